/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TLS sessions for the TCP transport (tcp_pipe_tls.h): context from the job's
 * certificate, key and CA; non-blocking handshake, read and gathered write
 * over OpenSSL's libssl; and the TLS byte pipe on them (gs__tcp_pipe_tls,
 * tcp_pipe.h), at the end.
 *
 * The context asks for TLS 1.3 only, verifies the peer's chain against the
 * CA on both sides (a missing certificate fails too), sends no session
 * tickets (no resumption: every connection is a full handshake, and nothing
 * arrives after it that the transport did not ask for) and takes an
 * unexpected end of stream as an ordinary close (the transport has its own
 * BYE frames). Writes use SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER: a write that
 * returned WANT_WRITE is retried with the same bytes at whatever address the
 * send queue holds them then, and may be offered more bytes behind them.
 */
#include "transport/tcp/tcp_pipe_tls.h"

#include "core/error.h"
#include "transport/tcp/tcp_conn.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#ifdef GS_WITH_OPENSSL

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

/* OpenSSL's most recent error as text (and the queue cleared), or @p dflt. */
static const char *ssl_reason(char *buf, size_t len, const char *dflt)
{
    unsigned long e = ERR_get_error();
    unsigned long last = e;

    while (e != 0) { /* the last queued error is the most specific */
        last = e;
        e = ERR_get_error();
    }
    if (last == 0) {
        (void)snprintf(buf, len, "%s", dflt);
    } else {
        ERR_error_string_n(last, buf, len);
    }
    return buf;
}

gs_status_t gs__tcp_tls_ctx_new(const gs__tcp_tls_conf_t *conf, struct ssl_ctx_st **ctx_out)
{
    char why[256];
    gs_status_t status;
    SSL_CTX *ctx;

    *ctx_out = NULL;
    if ((conf == NULL) || !conf->on) {
        return GS_OK;
    }
    if ((conf->cert == NULL) || (conf->cert[0] == '\0') || (conf->key == NULL) ||
        (conf->key[0] == '\0') || (conf->ca == NULL) || (conf->ca[0] == '\0')) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "tcp: GS_TLS=1 needs GS_TLS_CERT, GS_TLS_KEY and GS_TLS_CA "
                             "(PEM files: this rank's certificate chain, its private key and the "
                             "job's CA; docs/security.md)");
    }
    ERR_clear_error();
    ctx = SSL_CTX_new(TLS_method());
    if (ctx == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "tcp: could not create a TLS context: %s",
                             ssl_reason(why, sizeof(why), "out of memory"));
    }
    if ((SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1) ||
        (SSL_CTX_set_num_tickets(ctx, 0) != 1)) {
        status = gs__error_set(GS_ERR_SYSTEM, "tcp: this OpenSSL cannot do TLS 1.3: %s",
                               ssl_reason(why, sizeof(why), "unknown"));
        goto err;
    }
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    if (SSL_CTX_use_certificate_chain_file(ctx, conf->cert) != 1) {
        status = gs__error_set(GS_ERR_INVALID_ARG,
                               "tcp: GS_TLS_CERT %s: cannot use it as a PEM "
                               "certificate chain: %s",
                               conf->cert, ssl_reason(why, sizeof(why), "unreadable"));
        goto err;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, conf->key, SSL_FILETYPE_PEM) != 1) {
        const bool mismatch = (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH);

        status = gs__error_set(GS_ERR_INVALID_ARG, "tcp: GS_TLS_KEY %s %s: %s", conf->key,
                               mismatch ? "is not the key of the certificate in GS_TLS_CERT"
                                        : "cannot be used as a PEM private key",
                               ssl_reason(why, sizeof(why), "unreadable"));
        goto err;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        status = gs__error_set(GS_ERR_INVALID_ARG,
                               "tcp: GS_TLS_KEY %s is not the key of the certificate "
                               "in GS_TLS_CERT %s: %s",
                               conf->key, conf->cert, ssl_reason(why, sizeof(why), "mismatch"));
        goto err;
    }
    if (SSL_CTX_load_verify_locations(ctx, conf->ca, NULL) != 1) {
        status = gs__error_set(GS_ERR_INVALID_ARG,
                               "tcp: GS_TLS_CA %s: cannot load it as PEM CA "
                               "certificates: %s",
                               conf->ca, ssl_reason(why, sizeof(why), "unreadable"));
        goto err;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    *ctx_out = ctx;
    return GS_OK;
err:
    SSL_CTX_free(ctx);
    return status;
}

void gs__tcp_tls_ctx_free(struct ssl_ctx_st *ctx)
{
    SSL_CTX_free(ctx);
}

struct ssl_st *gs__tcp_tls_new(struct ssl_ctx_st *ctx, int fd, bool connector)
{
    SSL *ssl = SSL_new(ctx);

    if ((ssl == NULL) || (SSL_set_fd(ssl, fd) != 1)) {
        SSL_free(ssl);
        gs__error_set(GS_ERR_NO_MEMORY, "tcp: out of memory for a TLS session");
        return NULL;
    }
    if (connector) {
        SSL_set_connect_state(ssl);
    } else {
        SSL_set_accept_state(ssl);
    }
    return ssl;
}

void gs__tcp_tls_free(struct ssl_st *ssl)
{
    SSL_free(ssl);
}

/* Why a handshake failed, in words: the verification result when there is one. */
static void handshake_why(SSL *ssl, int err, char *why, size_t len)
{
    long vr = SSL_get_verify_result(ssl);
    char reason[256];

    if (err == SSL_ERROR_SYSCALL) {
        ERR_clear_error();
        (void)snprintf(why, len, "TLS handshake cut short: %s",
                       (errno != 0) ? strerror(errno) : "the peer closed the connection");
        return;
    }
    if (err == SSL_ERROR_ZERO_RETURN) {
        ERR_clear_error();
        (void)snprintf(why, len, "TLS handshake cut short: the peer closed the connection");
        return;
    }
    ssl_reason(reason, sizeof(reason), "unknown TLS error");
    if (vr != X509_V_OK) {
        (void)snprintf(why, len, "its certificate failed verification against GS_TLS_CA: %s",
                       X509_verify_cert_error_string(vr));
    } else {
        (void)snprintf(why, len, "TLS handshake failed: %s", reason);
    }
}

int gs__tcp_tls_handshake(struct ssl_st *ssl, short *events, char *why, size_t len)
{
    int ret;
    int err;

    ERR_clear_error();
    errno = 0;
    ret = SSL_do_handshake(ssl);
    if (ret == 1) {
        return 1;
    }
    err = SSL_get_error(ssl, ret);
    if (err == SSL_ERROR_WANT_READ) {
        *events = POLLIN;
        return 0;
    }
    if (err == SSL_ERROR_WANT_WRITE) {
        *events = POLLOUT;
        return 0;
    }
    handshake_why(ssl, err, why, len);
    return ((err == SSL_ERROR_SYSCALL) || (err == SSL_ERROR_ZERO_RETURN)) ? -2 : -1;
}

/* Map a failed SSL_read_ex/SSL_write_ex to recv()/send() conventions. */
static ssize_t io_error(SSL *ssl, int ret, char *why, size_t why_len)
{
    int err = SSL_get_error(ssl, ret);
    char reason[256];

    switch (err) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_SYSCALL:
        ERR_clear_error();
        if (errno == 0) {
            return 0; /* end of stream without close_notify */
        }
        return -1;
    default:
        (void)snprintf(why, why_len, "TLS error: %s",
                       ssl_reason(reason, sizeof(reason), "unknown"));
        errno = EPROTO;
        return -1;
    }
}

ssize_t gs__tcp_tls_read(struct ssl_st *ssl, void *buf, size_t len, char *why, size_t why_len)
{
    size_t got = 0;
    int ret;

    ERR_clear_error();
    errno = 0;
    ret = SSL_read_ex(ssl, buf, len, &got);
    if (ret == 1) {
        return (ssize_t)got;
    }
    return io_error(ssl, ret, why, why_len);
}

ssize_t gs__tcp_tls_writev(struct ssl_st *ssl, const struct iovec *iov, size_t niov,
                           unsigned char *stage, size_t *committed_out, char *why, size_t why_len)
{
    size_t total = 0;
    size_t i = 0;

    *committed_out = 0;
    while (i < niov) {
        const void *src = iov[i].iov_base;
        size_t len = iov[i].iov_len;
        size_t next = i + 1;
        size_t written = 0;
        int ret;

        /* Gather leading short buffers (frame headers, small payloads) into one record. */
        if ((len < GS_TCP_TLS_STAGE_LEN) && (next < niov) &&
            (len + iov[next].iov_len <= GS_TCP_TLS_STAGE_LEN)) {
            size_t n = 0;

            while ((i < niov) && (n + iov[i].iov_len <= GS_TCP_TLS_STAGE_LEN)) {
                memcpy(stage + n, iov[i].iov_base, iov[i].iov_len);
                n += iov[i].iov_len;
                i++;
            }
            next = i;
            src = stage;
            len = n;
        }
        ERR_clear_error();
        errno = 0;
        ret = SSL_write_ex(ssl, src, len, &written);
        if (ret != 1) {
            ssize_t r = io_error(ssl, ret, why, why_len);

            if ((r < 0) && (errno == EAGAIN)) {
                /* OpenSSL may have sealed part of these bytes: they are the next ones out. */
                *committed_out = total + len;
                if (total > 0) {
                    return (ssize_t)total;
                }
                errno = EAGAIN;
                return -1;
            }
            if (r == 0) {
                errno = EPIPE; /* a write never sees an orderly end of stream */
            }
            return -1;
        }
        total += written;
        i = next;
    }
    *committed_out = total;
    return (ssize_t)total;
}

void gs__tcp_tls_stream(struct ssl_st *ssl)
{
    if (ssl != NULL) {
        SSL_set_read_ahead(ssl, 1);
    }
}

bool gs__tcp_tls_pending(struct ssl_st *ssl)
{
    return (ssl != NULL) && (SSL_has_pending(ssl) == 1);
}

#else /* !GS_WITH_OPENSSL */

gs_status_t gs__tcp_tls_ctx_new(const gs__tcp_tls_conf_t *conf, struct ssl_ctx_st **ctx_out)
{
    *ctx_out = NULL;
    if ((conf == NULL) || !conf->on) {
        return GS_OK;
    }
    return gs__error_set(GS_ERR_UNSUPPORTED,
                         "tcp: GS_TLS=1, but this gradsync was built "
                         "without OpenSSL (rebuild with libssl-dev installed; docs/security.md)");
}

void gs__tcp_tls_ctx_free(struct ssl_ctx_st *ctx)
{
    (void)ctx;
}

struct ssl_st *gs__tcp_tls_new(struct ssl_ctx_st *ctx, int fd, bool connector)
{
    (void)ctx;
    (void)fd;
    (void)connector;
    gs__error_set(GS_ERR_UNSUPPORTED, "tcp: TLS is not built in");
    return NULL;
}

void gs__tcp_tls_free(struct ssl_st *ssl)
{
    (void)ssl;
}

int gs__tcp_tls_handshake(struct ssl_st *ssl, short *events, char *why, size_t len)
{
    (void)ssl;
    (void)events;
    (void)snprintf(why, len, "TLS is not built in");
    return -1;
}

ssize_t gs__tcp_tls_read(struct ssl_st *ssl, void *buf, size_t len, char *why, size_t why_len)
{
    (void)ssl;
    (void)buf;
    (void)len;
    (void)snprintf(why, why_len, "TLS is not built in");
    errno = EPROTO;
    return -1;
}

ssize_t gs__tcp_tls_writev(struct ssl_st *ssl, const struct iovec *iov, size_t niov,
                           unsigned char *stage, size_t *committed_out, char *why, size_t why_len)
{
    (void)ssl;
    (void)iov;
    (void)niov;
    (void)stage;
    *committed_out = 0;
    (void)snprintf(why, why_len, "TLS is not built in");
    errno = EPROTO;
    return -1;
}

void gs__tcp_tls_stream(struct ssl_st *ssl)
{
    (void)ssl;
}

bool gs__tcp_tls_pending(struct ssl_st *ssl)
{
    (void)ssl;
    return false;
}

#endif /* GS_WITH_OPENSSL */

/* ---------------------------------------------------------------------- */
/* The TLS byte pipe (tcp_pipe.h)                                         */
/* ---------------------------------------------------------------------- */

static ssize_t tls_pipe_writev(gs__tp_t *tp, gs__tcp_conn_t *c, const struct iovec *iov,
                               size_t niov, gs__tcp_pipe_res_t *res)
{
    const ssize_t n = gs__tcp_tls_writev(c->ssl, iov, niov, tp->tls_stage, &res->committed,
                                         res->why, sizeof(res->why));

    if (n >= 0) {
        return n;
    }
    return (errno == EPROTO) ? GS_TCP_PIPE_PROTO : gs__tcp_pipe_errno(res);
}

/* One SSL_read: a short read says nothing about what the socket or OpenSSL
 * still hold (a read returns one record at most), so only "would block"
 * means drained (short_read_drains is false). */
static ssize_t tls_pipe_read(gs__tp_t *tp, gs__tcp_conn_t *c, void *dst, size_t len,
                             gs__tcp_pipe_res_t *res)
{
    ssize_t n;

    (void)tp;
    do {
        n = gs__tcp_tls_read(c->ssl, dst, len, res->why, sizeof(res->why));
    } while ((n < 0) && (errno == EINTR));
    if (n > 0) {
        return n;
    }
    if (n == 0) {
        return GS_TCP_PIPE_EOF;
    }
    return (errno == EPROTO) ? GS_TCP_PIPE_PROTO : gs__tcp_pipe_errno(res);
}

static bool tls_pipe_pending(const gs__tcp_conn_t *c)
{
    return gs__tcp_tls_pending(c->ssl);
}

static void tls_pipe_close(gs__tcp_conn_t *c)
{
    gs__tcp_tls_free(c->ssl);
    c->ssl = NULL;
}

const gs__tcp_pipe_ops_t gs__tcp_pipe_tls = {
    .name = "tls",
    .writev = tls_pipe_writev,
    .read = tls_pipe_read,
    .pending = tls_pipe_pending,
    .close = tls_pipe_close,
    .poll_out = true,
};
