/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The token, nonces and MACs of connection authentication (auth.h), on
 * OpenSSL's libcrypto.
 */
#include "core/auth.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "core/error.h"

#ifdef GS_WITH_OPENSSL
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

static const char *const dir_label[2] = {"gradsync-auth A", "gradsync-auth C"};
#endif

/* Read the token file into buf (NUL-terminated); returns its length or -1. */
static long read_token_file(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    size_t n;

    if (f == NULL) {
        gs__error_set(GS_ERR_INVALID_ARG, "GS_AUTH_TOKEN_FILE '%s' cannot be read: %s", path,
                      strerror(errno));
        return -1;
    }
    n = fread(buf, 1, cap, f);
    fclose(f);
    if (n == cap) {
        gs__error_set(GS_ERR_INVALID_ARG,
                      "GS_AUTH_TOKEN_FILE '%s' holds more than %d bytes; a token is a short secret",
                      path, GS_AUTH_TOKEN_MAX);
        return -1;
    }
    if ((n > 0) && (buf[n - 1] == '\n')) {
        n--;
    }
    buf[n] = '\0';
    if (n == 0) {
        gs__error_set(GS_ERR_INVALID_ARG, "GS_AUTH_TOKEN_FILE '%s' is empty", path);
        return -1;
    }
    return (long)n;
}

gs_status_t gs__auth_init(gs__auth_t *a, const char *token, const char *token_file)
{
    char buf[GS_AUTH_TOKEN_MAX + 1];
    const char *tok = NULL;
    size_t len = 0;

    memset(a, 0, sizeof(*a));
    if ((token != NULL) && (token[0] != '\0')) {
        len = strnlen(token, GS_AUTH_TOKEN_MAX + 1);
        if (len > GS_AUTH_TOKEN_MAX) {
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "GS_AUTH_TOKEN is longer than %d bytes; a token is a short secret",
                                 GS_AUTH_TOKEN_MAX);
        }
        tok = token;
    } else if ((token_file != NULL) && (token_file[0] != '\0')) {
        long n = read_token_file(token_file, buf, sizeof(buf));

        if (n < 0) {
            return GS_ERR_INVALID_ARG;
        }
        tok = buf;
        len = (size_t)n;
    } else {
        return GS_OK;
    }
#ifdef GS_WITH_OPENSSL
    SHA256((const unsigned char *)tok, len, a->key);
    OPENSSL_cleanse(buf, sizeof(buf));
    a->on = 1;
    return GS_OK;
#else
    (void)tok;
    return gs__error_set(GS_ERR_UNSUPPORTED,
                         "GS_AUTH_TOKEN is set but this gradsync was built without OpenSSL: "
                         "install libssl-dev and rebuild (GS_WITH_OPENSSL), or unset the token");
#endif
}

gs_status_t gs__auth_nonce(uint8_t nonce[GS_AUTH_NONCE_BYTES])
{
#ifdef GS_WITH_OPENSSL
    if (RAND_bytes(nonce, GS_AUTH_NONCE_BYTES) == 1) {
        return GS_OK;
    }
#endif
    if (getrandom(nonce, GS_AUTH_NONCE_BYTES, 0) == GS_AUTH_NONCE_BYTES) {
        return GS_OK;
    }
    return gs__error_set(GS_ERR_SYSTEM, "auth: no random bytes for a nonce: %s", strerror(errno));
}

void gs__auth_mac(const gs__auth_t *a, gs__auth_dir_t dir, const char *domain,
                  const uint8_t nc[GS_AUTH_NONCE_BYTES], const uint8_t na[GS_AUTH_NONCE_BYTES],
                  uint8_t mac[GS_AUTH_MAC_BYTES])
{
    memset(mac, 0, GS_AUTH_MAC_BYTES);
#ifdef GS_WITH_OPENSSL
    {
        uint8_t msg[64 + 2 * GS_AUTH_NONCE_BYTES];
        const size_t llen = strlen(dir_label[dir]) + 1; /* with its NUL: labels never run on */
        size_t dlen = strlen(domain) + 1;
        unsigned int outlen = GS_AUTH_MAC_BYTES;
        size_t off = 0;

        if (llen + dlen > 64) {
            dlen = 64 - llen; /* domains are short constants; never reached */
        }
        memcpy(msg + off, dir_label[dir], llen);
        off += llen;
        memcpy(msg + off, domain, dlen);
        off += dlen;
        memcpy(msg + off, nc, GS_AUTH_NONCE_BYTES);
        off += GS_AUTH_NONCE_BYTES;
        memcpy(msg + off, na, GS_AUTH_NONCE_BYTES);
        off += GS_AUTH_NONCE_BYTES;
        (void)HMAC(EVP_sha256(), a->key, sizeof(a->key), msg, off, mac, &outlen);
    }
#else
    (void)a;
    (void)dir;
    (void)domain;
    (void)nc;
    (void)na;
#endif
}

int gs__auth_check(const gs__auth_t *a, gs__auth_dir_t dir, const char *domain,
                   const uint8_t nc[GS_AUTH_NONCE_BYTES], const uint8_t na[GS_AUTH_NONCE_BYTES],
                   const uint8_t mac[GS_AUTH_MAC_BYTES])
{
#ifdef GS_WITH_OPENSSL
    uint8_t want[GS_AUTH_MAC_BYTES];

    if (!a->on) {
        return 0;
    }
    gs__auth_mac(a, dir, domain, nc, na, want);
    return CRYPTO_memcmp(want, mac, GS_AUTH_MAC_BYTES) == 0;
#else
    (void)a;
    (void)dir;
    (void)domain;
    (void)nc;
    (void)na;
    (void)mac;
    return 0;
#endif
}
