/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Connection authentication with a shared job token (GS_AUTH_TOKEN or
 * GS_AUTH_TOKEN_FILE): a mutual HMAC-SHA256 challenge-response over fresh
 * nonces, run at the start of every connection, rendezvous and transport,
 * before any payload is read. The connecting side C sends its nonce Nc in
 * its hello; the accepting side A answers with its nonce Na and
 *     MAC_A = HMAC(K, "gradsync-auth A" | domain | Nc | Na)
 * and C, once it has checked MAC_A, proves itself with
 *     MAC_C = HMAC(K, "gradsync-auth C" | domain | Nc | Na).
 * K is SHA-256 of the token (the token itself is not kept). Each side's
 * fresh nonce makes a recorded exchange useless (a replayed proof was made
 * for another Na); the direction labels keep one side's MAC from serving as
 * the other's; the domain ("rendezvous", "tcp") keeps one protocol's MAC
 * from serving in the other. Comparisons are constant-time. The wire
 * layouts that carry these fields are in docs/wire.md.
 *
 * OpenSSL's libcrypto does the hashing and the randomness; a build without
 * it (GS_WITH_OPENSSL off) refuses a token with GS_ERR_UNSUPPORTED.
 */
#ifndef GS_CORE_AUTH_H
#define GS_CORE_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/status.h"

#define GS_AUTH_NONCE_BYTES 16
#define GS_AUTH_MAC_BYTES 32
/* Longest token accepted (bytes, from the variable or the file). */
#define GS_AUTH_TOKEN_MAX 4096

typedef enum gs__auth_dir { GS_AUTH_ACCEPTOR = 0, GS_AUTH_CONNECTOR = 1 } gs__auth_dir_t;

typedef struct gs__auth {
    int on;                         /* 1: a token is set; every connection authenticates */
    uint8_t key[GS_AUTH_MAC_BYTES]; /* SHA-256 of the token */
} gs__auth_t;

/*
 * Set @p a from a token (non-empty wins) or a file holding one (one
 * trailing newline is dropped); both empty or NULL: authentication off.
 * Returns GS_OK; GS_ERR_INVALID_ARG naming the file when it cannot be read,
 * is empty or longer than GS_AUTH_TOKEN_MAX, or for a token that long;
 * GS_ERR_UNSUPPORTED when a token is set but this build has no OpenSSL.
 */
gs_status_t gs__auth_init(gs__auth_t *a, const char *token, const char *token_file);

/* Fill @p nonce with fresh random bytes. Returns GS_OK or GS_ERR_SYSTEM. */
gs_status_t gs__auth_nonce(uint8_t nonce[GS_AUTH_NONCE_BYTES]);

/* The MAC of side @p dir over (domain, nc, na) into mac. */
void gs__auth_mac(const gs__auth_t *a, gs__auth_dir_t dir, const char *domain,
                  const uint8_t nc[GS_AUTH_NONCE_BYTES], const uint8_t na[GS_AUTH_NONCE_BYTES],
                  uint8_t mac[GS_AUTH_MAC_BYTES]);

/* 1 when @p mac is side @p dir's MAC over (domain, nc, na), in constant time. */
int gs__auth_check(const gs__auth_t *a, gs__auth_dir_t dir, const char *domain,
                   const uint8_t nc[GS_AUTH_NONCE_BYTES], const uint8_t na[GS_AUTH_NONCE_BYTES],
                   const uint8_t mac[GS_AUTH_MAC_BYTES]);

#endif /* GS_CORE_AUTH_H */
