/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TLS on the TCP transport's connections (GS_TLS, docs/security.md), with
 * OpenSSL's libssl. Every socket of the mesh runs a TLS 1.3 handshake right
 * after connect/accept, before the gradsync HELLO: both sides present a
 * certificate and verify the other's chain against GS_TLS_CA (mutual TLS),
 * so a peer without a certificate from the job's CA never gets a byte of the
 * HELLO. After it, every frame goes through SSL_write/SSL_read on the same
 * non-blocking socket; the progress engine treats bytes OpenSSL holds
 * decrypted as buffered work (a "kick"), since epoll cannot see them.
 *
 * Without OpenSSL in the build, GS_TLS=1 fails the init with
 * GS_ERR_UNSUPPORTED. Only the TLS byte pipe (tcp_pipe_tls.c), tcp_handshake.c
 * and tcp_transport.c call these; the SSL objects stay opaque to them.
 */
#ifndef GS_TRANSPORT_TCP_TCP_PIPE_TLS_H
#define GS_TRANSPORT_TCP_TCP_PIPE_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "gradsync/gradsync.h"
#include "transport/transport.h"

struct ssl_st;
struct ssl_ctx_st;

/* TLS settings of the TCP transport (GS_TLS, GS_TLS_CERT, GS_TLS_KEY,
 * GS_TLS_CA). */
typedef struct gs__tcp_tls_conf {
    int on;           /* 1: every connection is TLS 1.3, peers verified against ca */
    const char *cert; /* PEM certificate chain of this rank (GS_TLS_CERT) */
    const char *key;  /* PEM private key (GS_TLS_KEY) */
    const char *ca;   /* PEM CA certificates peers must chain to (GS_TLS_CA) */
} gs__tcp_tls_conf_t;

/* Largest run of small frames gathered into one TLS record (one SSL_write). */
#define GS_TCP_TLS_STAGE_LEN (16u * 1024u)

/* Load the certificate, key and CA of @p conf into a new context (*ctx_out
 * stays NULL when conf->on is 0). Returns GS_OK, GS_ERR_INVALID_ARG (a file
 * missing, unreadable or not matching, named with OpenSSL's reason) or
 * GS_ERR_UNSUPPORTED (a build without OpenSSL). */
gs_status_t gs__tcp_tls_ctx_new(const gs__tcp_tls_conf_t *conf, struct ssl_ctx_st **ctx_out);
void gs__tcp_tls_ctx_free(struct ssl_ctx_st *ctx);

/* A TLS session on connected socket fd: the connector is the TLS client.
 * Returns NULL (with gs_last_error set) when out of memory. */
struct ssl_st *gs__tcp_tls_new(struct ssl_ctx_st *ctx, int fd, bool connector);
void gs__tcp_tls_free(struct ssl_st *ssl);

/* Drive the handshake. Returns 1 when done, 0 when it must wait for
 * *events (POLLIN or POLLOUT), -1 when TLS failed (@p why says why: a
 * certificate the CA did not sign, a peer that does not speak TLS, ...),
 * -2 when the connection closed or failed under it (worth a retry). */
int gs__tcp_tls_handshake(struct ssl_st *ssl, short *events, char *why, size_t len);

/* Like recv(): bytes read (> 0); 0 at end of stream; -1 with errno EAGAIN
 * (nothing decrypted now), another errno for a socket error, or EPROTO for a
 * TLS error (@p why says which). */
ssize_t gs__tcp_tls_read(struct ssl_st *ssl, void *buf, size_t len, char *why, size_t why_len);

/* Like sendmsg() over @p niov buffers: bytes written (> 0), or -1 with errno
 * EAGAIN (retry later with the same bytes first), another errno for a
 * socket error, or EPROTO for a TLS error. Leading buffers shorter than a
 * record are gathered in @p stage (GS_TCP_TLS_STAGE_LEN bytes) so that small
 * frames share records. Once it returned EAGAIN, the bytes it was given are
 * committed (*committed_out of them): the caller must offer the same bytes
 * again, and may append more. */
ssize_t gs__tcp_tls_writev(struct ssl_st *ssl, const struct iovec *iov, size_t niov,
                           unsigned char *stage, size_t *committed_out, char *why, size_t why_len);

/* The handshakes are over: from now on a read may take whatever the socket
 * holds (read-ahead; fewer syscalls), so callers check gs__tcp_tls_pending. */
void gs__tcp_tls_stream(struct ssl_st *ssl);

/* Decrypted bytes OpenSSL holds that a read would return without the socket. */
bool gs__tcp_tls_pending(struct ssl_st *ssl);

#endif /* GS_TRANSPORT_TCP_TCP_PIPE_TLS_H */
