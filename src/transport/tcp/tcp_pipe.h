/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The byte pipe under one TCP connection: what the send half writes its
 * frame stream into (tcp_tx.c, gs__tcp_conn_flush) and the receive half
 * reads it from (tcp_rx.c, do_recv). One small interface, one
 * implementation per byte source, chosen per connection (gs__tcp_conn_t.pipe):
 *
 *   gs__tcp_pipe_plain  the socket itself: sendmsg/recv (tcp_pipe_plain.c)
 *   gs__tcp_pipe_tls    a TLS 1.3 session over the socket (tcp_pipe_tls.c)
 *   gs__tcp_pipe_shm    a pair of shared-memory rings, the socket carrying
 *                       doorbells and the EOF (tcp_pipe_shm.c)
 *
 * A new byte source (a rail of another interface) is one more table. The
 * frames, their order, partial writes and zero-copy reads above it are the
 * same for every pipe. Worker thread only, never blocks.
 */
#ifndef GS_TRANSPORT_TCP_TCP_PIPE_H
#define GS_TRANSPORT_TCP_TCP_PIPE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

/* What writev and read return instead of a byte count (> 0). */
#define GS_TCP_PIPE_AGAIN 0     /* nothing moves now: would block, or a ring is full / empty */
#define GS_TCP_PIPE_EOF (-1)    /* read: the peer closed the stream */
#define GS_TCP_PIPE_ERR (-2)    /* the socket failed (or was interrupted): res->err */
#define GS_TCP_PIPE_PROTO (-3)  /* the peer broke the pipe's protocol (TLS): res->why */
#define GS_TCP_PIPE_FAILED (-4) /* the pipe found the peer broken and failed it itself */

/* The reason for GS_TCP_PIPE_PROTO, and room for it. */
#define GS_TCP_PIPE_WHY_MAX 200

struct gs__tp;
struct gs__tcp_conn;

/* What a call reports besides its return value. */
typedef struct gs__tcp_pipe_res {
    int err;          /* GS_TCP_PIPE_ERR: the errno (EINTR: call again); 0 otherwise */
    size_t committed; /* writev: bytes of the iovecs sealed into the pipe, which may exceed
                       * those returned (TLS: a record that must be retried whole) */
    char why[GS_TCP_PIPE_WHY_MAX];
} gs__tcp_pipe_res_t;

typedef struct gs__tcp_pipe_ops {
    const char *name;
    /* Write a prefix of the iovecs. Returns the bytes written (> 0, may be
     * short) or a GS_TCP_PIPE_* code. */
    ssize_t (*writev)(struct gs__tp *tp, struct gs__tcp_conn *c, const struct iovec *iov,
                      size_t niov, gs__tcp_pipe_res_t *res);
    /* Read at most len bytes into dst. Returns the bytes read (> 0) or a
     * GS_TCP_PIPE_* code. */
    ssize_t (*read)(struct gs__tp *tp, struct gs__tcp_conn *c, void *dst, size_t len,
                    gs__tcp_pipe_res_t *res);
    /* Optional: the socket is readable; take what it carries for the pipe
     * itself (shm: doorbells, the EOF) before the frames are read. */
    void (*on_readable)(struct gs__tp *tp, struct gs__tcp_conn *c);
    /* Optional: after reads (room was freed) and after writes (bytes were
     * added): tell the other side if it sleeps (shm: a doorbell). */
    void (*read_done)(struct gs__tp *tp, struct gs__tcp_conn *c);
    void (*wrote)(struct gs__tp *tp, struct gs__tcp_conn *c);
    /* Optional: the pipe holds read bytes epoll cannot see (TLS records
     * decrypted ahead). */
    bool (*pending)(const struct gs__tcp_conn *c);
    /* Optional: free what the pipe holds when the socket closes. */
    void (*close)(struct gs__tcp_conn *c);
    bool poll_out;          /* room to write is announced by EPOLLOUT (not by the peer) */
    bool short_read_drains; /* a read shorter than asked means nothing more is there now */
    bool exact;             /* reads cost no syscall: read headers exactly, payloads in place */
} gs__tcp_pipe_ops_t;

/* A socket call failed with errno: GS_TCP_PIPE_AGAIN when it would block,
 * else GS_TCP_PIPE_ERR with res->err set. */
static inline ssize_t gs__tcp_pipe_errno(gs__tcp_pipe_res_t *res)
{
    if ((errno == EAGAIN) || (errno == EWOULDBLOCK)) {
        return GS_TCP_PIPE_AGAIN;
    }
    res->err = errno;
    return GS_TCP_PIPE_ERR;
}

extern const gs__tcp_pipe_ops_t gs__tcp_pipe_plain;
extern const gs__tcp_pipe_ops_t gs__tcp_pipe_tls;
extern const gs__tcp_pipe_ops_t gs__tcp_pipe_shm;

#endif /* GS_TRANSPORT_TCP_TCP_PIPE_H */
