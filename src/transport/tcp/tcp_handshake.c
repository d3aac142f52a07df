/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TCP connection setup: the full mesh of nsocks sockets per pair of ranks.
 * The higher rank connects to the lower rank's listening address and sends
 * a HELLO; the lower rank validates it and answers with an ACK. With a job
 * token (core/auth.h) the HELLO carries the connector's nonce, the ACK the
 * acceptor's nonce and MAC, and the connector proves itself with a PROOF;
 * the acceptor takes the socket only when the PROOF checks out, so a peer
 * without the token never gets a frame read. A side with a token and one
 * without learn it from the verdict and fail at once with GS_ERR_AUTH.
 * Everything runs in one poll loop (outgoing connects with retry, accepts,
 * handshakes) until every socket is up or the deadline passes.
 *
 * With GS_TLS (tcp_pipe_tls.h) every socket first runs a TLS 1.3 handshake, both
 * sides verifying the other's certificate against the CA, and the HELLO,
 * ACK and PROOF travel inside it. A plain HELLO reaching a TLS rank gets a
 * plain TLS_REQUIRED verdict, and a TLS ClientHello reaching a plain rank a
 * TLS_UNEXPECTED one, so a job whose ranks disagree fails at once with
 * GS_ERR_AUTH instead of waiting for its deadline.
 *
 * Anything that fails the handshake on the listening side (a port scanner,
 * another job, a stale rank) gets one WARN naming its address and the
 * reason, is closed, and does not disturb the job: we keep waiting for the
 * right peers. A bad ACK, on the other hand, means the address we were given
 * belongs to someone else, which is fatal for this communicator.
 */
#include "transport/tcp/tcp_conn.h"

#include "core/clock.h"
#include "core/error.h"
#include "core/le.h"
#include "core/log.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Half-open incoming connections held at once; beyond it the oldest goes. */
#define HS_MAX_INCOMING 256
#define HS_RETRY_MIN_MS 5
#define HS_RETRY_MAX_MS 200

typedef enum hs_state {
    HS_OUT_RETRY = 1, /* waiting until retry_at to connect */
    HS_OUT_CONNECTING,
    HS_OUT_TLS, /* GS_TLS: the TLS handshake, before the HELLO */
    HS_OUT_HELLO,
    HS_OUT_ACK,
    HS_OUT_PROOF, /* last of the outgoing states (out_step drives them) */
    HS_IN_TLS,
    HS_IN_HELLO,
    HS_IN_ACK,
    HS_IN_PROOF,
    HS_DONE
} hs_state_t;

typedef struct hs_slot {
    int fd;
    int peer;  /* -1 for an incoming socket not yet identified */
    int index; /* socket index within the pair */
    hs_state_t state;
    size_t done; /* bytes of buf sent or received */
    uint8_t buf[GS_TCP_HS_LEN];
    uint8_t nonce_c[GS_AUTH_NONCE_BYTES]; /* with a token: the connector's nonce */
    uint8_t nonce_a[GS_AUTH_NONCE_BYTES]; /* and the acceptor's */
    uint64_t retry_at;
    int backoff_ms;
    struct ssl_st *ssl;          /* GS_TLS: the session, handed to the connection with the socket */
    short tls_events;            /* what the TLS handshake waits for (POLLIN or POLLOUT) */
    bool tls_checked;            /* HS_IN_TLS: the first bytes were looked at (a plain HELLO?) */
    char why[GS_TCP_REASON_MAX]; /* hs_io: the TLS error behind an EPROTO */
    char text[GS_SOCK_ADDR_MAX]; /* remote address, for messages */
} hs_slot_t;

typedef struct hs_ctx {
    gs__tp_t *tp;
    gs__sockaddr_t *addrs; /* parsed endpoints of the lower ranks */
    hs_slot_t *out;        /* rank * nsocks outgoing slots */
    int nout;
    hs_slot_t in[HS_MAX_INCOMING];
    int nin;
    bool *claimed; /* (peer, index) pairs of higher ranks already accepted */
    struct pollfd *pfds;
    hs_slot_t **pslots;
} hs_ctx_t;

static void slot_close(hs_slot_t *s)
{
    gs__tcp_tls_free(s->ssl);
    s->ssl = NULL;
    if (s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
}

/* The slot's socket (and TLS session) become connection (peer, index). */
static void slot_hand_over(gs__tp_t *tp, hs_slot_t *s)
{
    gs__tcp_conn_t *c = &tp->peers[s->peer].conns[s->index];

    c->fd = s->fd;
    c->ssl = s->ssl;
    c->pipe = (c->ssl != NULL) ? &gs__tcp_pipe_tls : &gs__tcp_pipe_plain;
    s->fd = -1;
    s->ssl = NULL;
    s->state = HS_DONE;
}

static void fill_hs(const gs__tp_t *tp, gs__tcp_hs_t *hs, uint32_t kind, uint32_t verdict,
                    int index)
{
    hs->version = GS_TCP_PROTO_VERSION;
    hs->kind = kind;
    hs->verdict = verdict;
    hs->job_id = tp->job_id;
    hs->comm_id = tp->comm_id;
    hs->rank = (uint32_t)tp->rank;
    hs->size = (uint32_t)tp->size;
    hs->index = (uint32_t)index;
    hs->nsocks = (uint32_t)tp->nsocks;
    /* Socket 0 offers shared memory (tcp_pipe_shm.c decides after the handshakes). */
    hs->flags = ((index == 0) && tp->shm_offer) ? GS_TCP_HS_F_SHM : 0;
    if (tp->auth.on) {
        hs->flags |= GS_TCP_HS_F_AUTH;
    }
    memset(hs->nonce, 0, sizeof(hs->nonce));
    memset(hs->mac, 0, sizeof(hs->mac));
}

static void out_schedule_retry(hs_slot_t *s, uint64_t now, const char *why)
{
    GS_INFO(NET, "tcp: connection %d to rank %d (%s) failed (%s); retrying in %d ms", s->index,
            s->peer, s->text, why, s->backoff_ms);
    if (why != s->why) {
        (void)snprintf(s->why, sizeof(s->why), "%s", why); /* for the timeout's text */
    }
    slot_close(s);
    s->state = HS_OUT_RETRY;
    s->done = 0;
    s->retry_at = now + (uint64_t)s->backoff_ms * 1000000u;
    s->backoff_ms = (s->backoff_ms * 2 > HS_RETRY_MAX_MS) ? HS_RETRY_MAX_MS : s->backoff_ms * 2;
}

/* Start (or restart) an outgoing connect. */
static gs_status_t out_start(hs_ctx_t *ctx, hs_slot_t *s, uint64_t now)
{
    const gs__sockaddr_t *a = &ctx->addrs[s->peer];
    gs__tcp_hs_t hs;
    int ret;

    s->fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->fd < 0) {
        return gs__error_set(GS_ERR_SYSTEM, "tcp: socket() to connect to rank %d (%s) failed: %s",
                             s->peer, s->text, strerror(errno));
    }
    fill_hs(ctx->tp, &hs, GS_TCP_HS_HELLO, GS_TCP_HS_OK, s->index);
    if (ctx->tp->auth.on) {
        /* A fresh nonce per attempt: nothing of an earlier try can be replayed. */
        if (gs__auth_nonce(s->nonce_c) != GS_OK) {
            return GS_ERR_SYSTEM;
        }
        memcpy(hs.nonce, s->nonce_c, sizeof(hs.nonce));
    }
    gs__tcp_hs_encode(&hs, s->buf);
    s->done = 0;
    ret = connect(s->fd, (const struct sockaddr *)&a->ss, a->len);
    if ((ret == 0) || (errno == EINPROGRESS) || (errno == EINTR)) {
        /* Done at once or not: poll says writable, and out_step goes on from there. */
        s->state = HS_OUT_CONNECTING;
    } else if ((errno == ECONNREFUSED) || (errno == ENETUNREACH) || (errno == EHOSTUNREACH) ||
               (errno == EAGAIN) || (errno == ETIMEDOUT)) {
        out_schedule_retry(s, now, strerror(errno));
    } else {
        int err = errno;

        slot_close(s);
        return gs__error_set(GS_ERR_SYSTEM, "tcp: connect to rank %d (%s) failed: %s", s->peer,
                             s->text, strerror(err));
    }
    return GS_OK;
}

/* Read or write the rest of s->buf. Returns 1 when complete, 0 when it would
 * block, -1 on EOF or error (errno set, 0 for EOF, EPROTO for a TLS error
 * that s->why describes). */
static int hs_io(hs_slot_t *s, bool writing)
{
    while (s->done < GS_TCP_HS_LEN) {
        ssize_t n;

        if ((s->ssl != NULL) && writing) {
            struct iovec iov = {.iov_base = s->buf + s->done, .iov_len = GS_TCP_HS_LEN - s->done};
            size_t committed;

            n = gs__tcp_tls_writev(s->ssl, &iov, 1, NULL, &committed, s->why, sizeof(s->why));
        } else if (s->ssl != NULL) {
            n = gs__tcp_tls_read(s->ssl, s->buf + s->done, GS_TCP_HS_LEN - s->done, s->why,
                                 sizeof(s->why));
        } else if (writing) {
            n = send(s->fd, s->buf + s->done, GS_TCP_HS_LEN - s->done, MSG_NOSIGNAL | MSG_DONTWAIT);
        } else {
            n = recv(s->fd, s->buf + s->done, GS_TCP_HS_LEN - s->done, MSG_DONTWAIT);
        }
        if (n > 0) {
            s->done += (size_t)n;
            continue;
        }
        if (n == 0) {
            errno = 0;
            return -1;
        }
        if (errno == EINTR) {
            continue;
        }
        if ((errno == EAGAIN) || (errno == EWOULDBLOCK)) {
            return 0;
        }
        return -1;
    }
    return 1;
}

static gs_status_t out_got_ack(hs_ctx_t *ctx, hs_slot_t *s)
{
    gs__tp_t *tp = ctx->tp;
    gs__tcp_hs_expect_t exp = {.job_id = tp->job_id,
                               .comm_id = tp->comm_id,
                               .size = tp->size,
                               .nsocks = tp->nsocks,
                               .rank_lo = s->peer,
                               .rank_hi = s->peer};
    char why[GS_TCP_REASON_MAX];
    gs__tcp_hs_t ack;
    gs_status_t status;

    status = gs__tcp_hs_decode(s->buf, GS_TCP_HS_LEN, &ack, why, sizeof(why));
    if (status != GS_OK) {
        return gs__error_set(status, "tcp: rank %d (%s) answered the handshake badly: %s", s->peer,
                             s->text, why);
    }
    if (ack.kind != GS_TCP_HS_ACK) {
        return gs__error_set(GS_ERR_PROTOCOL, "tcp: rank %d (%s) answered with a HELLO", s->peer,
                             s->text);
    }
    if (ack.verdict != GS_TCP_HS_OK) {
        gs_status_t st = GS_ERR_MISMATCH;

        if (ack.verdict == GS_TCP_HS_BAD_VERSION) {
            st = GS_ERR_VERSION_MISMATCH;
        } else if ((ack.verdict == GS_TCP_HS_AUTH_REQUIRED) ||
                   (ack.verdict == GS_TCP_HS_AUTH_UNEXPECTED) ||
                   (ack.verdict == GS_TCP_HS_TLS_REQUIRED) ||
                   (ack.verdict == GS_TCP_HS_TLS_UNEXPECTED)) {
            st = GS_ERR_AUTH;
        }
        return gs__error_set(st, "tcp: rank %d (%s) rejected our connection %d: %s%s", s->peer,
                             s->text, s->index, gs__tcp_hs_verdict_str(ack.verdict),
                             (ack.verdict == GS_TCP_HS_TLS_REQUIRED)
                                 ? "; give every rank GS_TLS=1 and its certificate, key and CA "
                                   "(docs/security.md)"
                             : (st == GS_ERR_AUTH) ? "; give every rank the same GS_AUTH_TOKEN "
                                                     "(or GS_AUTH_TOKEN_FILE)"
                                                   : "");
    }
    if ((gs__tcp_hs_check(&ack, &exp, why, sizeof(why)) != GS_TCP_HS_OK) ||
        (ack.index != (uint32_t)s->index)) {
        return gs__error_set(
            GS_ERR_MISMATCH, "tcp: the process at %s is not rank %d of this communicator: %s",
            s->text, s->peer, (ack.index != (uint32_t)s->index) ? "wrong socket index" : why);
    }
    if (s->index == 0) {
        tp->peers[s->peer].shm_offered = ((ack.flags & GS_TCP_HS_F_SHM) != 0);
    }
    if (tp->auth.on) {
        gs__tcp_hs_t proof;

        if (!(ack.flags & GS_TCP_HS_F_AUTH) ||
            !gs__auth_check(&tp->auth, GS_AUTH_ACCEPTOR, GS_TCP_AUTH_DOMAIN, s->nonce_c, ack.nonce,
                            ack.mac)) {
            return gs__error_set(GS_ERR_AUTH,
                                 "tcp: rank %d (%s) failed authentication: its GS_AUTH_TOKEN "
                                 "differs from this rank's (or it is not rank %d of this job)",
                                 s->peer, s->text, s->peer);
        }
        fill_hs(tp, &proof, GS_TCP_HS_PROOF, GS_TCP_HS_OK, s->index);
        gs__auth_mac(&tp->auth, GS_AUTH_CONNECTOR, GS_TCP_AUTH_DOMAIN, s->nonce_c, ack.nonce,
                     proof.mac);
        gs__tcp_hs_encode(&proof, s->buf);
        s->done = 0;
        s->state = HS_OUT_PROOF;
        return GS_OK;
    }
    slot_hand_over(tp, s);
    return GS_OK;
}

/* TLS with the peer failed for a reason a retry cannot change (its
 * certificate, ours, or a peer without TLS): fatal, like a bad ACK. In TLS
 * 1.3 the acceptor judges our certificate after our side of the handshake
 * is done, so its refusal arrives as an alert in place of the ACK. */
static gs_status_t out_tls_failed(hs_slot_t *s)
{
    return gs__error_set(GS_ERR_AUTH,
                         "tcp: TLS with rank %d (%s) failed: %s. Every rank needs GS_TLS=1 and a "
                         "certificate (GS_TLS_CERT, GS_TLS_KEY) signed by the CA in every "
                         "rank's GS_TLS_CA; a rank without GS_TLS answers a TLS handshake with "
                         "bytes that are not TLS",
                         s->peer, s->text, s->why);
}

/* Drive one outgoing slot after poll said it is ready. */
static gs_status_t out_step(hs_ctx_t *ctx, hs_slot_t *s, short revents, uint64_t now)
{
    int ret;

    if (s->state == HS_OUT_CONNECTING) {
        int err = 0;
        socklen_t elen = sizeof(err);

        if ((revents & (POLLOUT | POLLERR | POLLHUP)) == 0) {
            return GS_OK;
        }
        if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0) {
            err = errno;
        }
        if (err != 0) {
            out_schedule_retry(s, now, strerror(err));
            return GS_OK;
        }
        if (gs__sock_tune(s->fd) != GS_OK) {
            return GS_ERR_SYSTEM;
        }
        s->state = HS_OUT_HELLO;
        if (ctx->tp->tls_ctx != NULL) {
            s->ssl = gs__tcp_tls_new(ctx->tp->tls_ctx, s->fd, true);
            if (s->ssl == NULL) {
                return GS_ERR_NO_MEMORY;
            }
            s->state = HS_OUT_TLS;
        }
    }
    if (s->state == HS_OUT_TLS) {
        ret = gs__tcp_tls_handshake(s->ssl, &s->tls_events, s->why, sizeof(s->why));
        if (ret == 0) {
            return GS_OK;
        }
        if (ret == -2) {
            out_schedule_retry(s, now, s->why);
            return GS_OK;
        }
        if (ret < 0) {
            return out_tls_failed(s);
        }
        s->state = HS_OUT_HELLO;
    }
    if (s->state == HS_OUT_HELLO) {
        ret = hs_io(s, true);
        if ((ret < 0) && (errno == EPROTO)) {
            return out_tls_failed(s);
        }
        if (ret < 0) {
            out_schedule_retry(s, now, (errno != 0) ? strerror(errno) : "closed");
            return GS_OK;
        }
        if (ret == 0) {
            return GS_OK;
        }
        s->state = HS_OUT_ACK;
        s->done = 0;
        return GS_OK;
    }
    if (s->state == HS_OUT_ACK) {
        ret = hs_io(s, false);
        if ((ret < 0) && (errno == EPROTO)) {
            return out_tls_failed(s);
        }
        if (ret < 0) {
            out_schedule_retry(s, now, (errno != 0) ? strerror(errno) : "closed before the ack");
            return GS_OK;
        }
        if (ret == 0) {
            return GS_OK;
        }
        return out_got_ack(ctx, s);
    }
    if (s->state == HS_OUT_PROOF) {
        ret = hs_io(s, true);
        if ((ret < 0) && (errno == EPROTO)) {
            return out_tls_failed(s);
        }
        if (ret < 0) {
            out_schedule_retry(s, now, (errno != 0) ? strerror(errno) : "closed before the proof");
            return GS_OK;
        }
        if (ret == 0) {
            return GS_OK;
        }
        slot_hand_over(ctx->tp, s);
    }
    return GS_OK;
}

/* Reject an incoming socket: WARN, best-effort reject ACK, close. */
static void in_reject(hs_ctx_t *ctx, hs_slot_t *s, uint32_t verdict, const char *why)
{
    GS_WARN("tcp: rank %d rejected a connection from %s: %s", ctx->tp->rank, s->text, why);
    if (verdict != GS_TCP_HS_OK) {
        gs__tcp_hs_t ack;
        uint8_t buf[GS_TCP_HS_LEN];

        fill_hs(ctx->tp, &ack, GS_TCP_HS_ACK, verdict, 0);
        if (ctx->tp->auth.on) {
            /* Nothing about the job for a peer that has not proven the token:
             * the verdict alone (the connector does not check ids on a refusal). */
            ack.job_id = 0;
            ack.comm_id = 0;
        }
        gs__tcp_hs_encode(&ack, buf);
        if ((s->ssl != NULL) && (s->state != HS_IN_TLS)) {
            struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
            size_t committed;
            char why_tls[GS_TCP_REASON_MAX];

            (void)gs__tcp_tls_writev(s->ssl, &iov, 1, NULL, &committed, why_tls, sizeof(why_tls));
        } else {
            /* Plain, also to a plain HELLO that reached a TLS rank (TLS_REQUIRED). */
            (void)send(s->fd, buf, sizeof(buf), MSG_NOSIGNAL | MSG_DONTWAIT);
        }
    }
    slot_close(s);
    s->state = HS_DONE;
}

/* Whether the bytes a TLS rank got first are a plain HELLO rather than a TLS
 * record: 1 yes, 0 no (or not known yet: 0 with *wait set). */
static int in_plain_hello(hs_slot_t *s, bool *wait)
{
    uint8_t head[4];
    ssize_t n = recv(s->fd, head, sizeof(head), MSG_PEEK | MSG_DONTWAIT);

    *wait = false;
    if ((n > 0) && (n < (ssize_t)sizeof(head)) && (head[0] != 0x16u)) {
        *wait = true; /* maybe a HELLO still arriving */
        return 0;
    }
    if (n < (ssize_t)sizeof(head)) {
        return 0; /* a TLS record, EOF or an error: the TLS handshake reports it */
    }
    if (gs__get_le32(head) != GS_TCP_HS_MAGIC) {
        return 0;
    }
    /* Take the HELLO off the socket: closing it unread would reset the
     * connection before the peer reads our verdict. */
    (void)recv(s->fd, s->buf, sizeof(s->buf), MSG_DONTWAIT);
    return 1;
}

static void in_step(hs_ctx_t *ctx, hs_slot_t *s)
{
    gs__tp_t *tp = ctx->tp;
    char why[GS_TCP_REASON_MAX];
    gs__tcp_hs_t hello;
    gs_status_t status;
    int ret;

    if (s->state == HS_IN_TLS) {
        if (!s->tls_checked) {
            bool wait = false;

            if (in_plain_hello(s, &wait) == 1) {
                in_reject(ctx, s, GS_TCP_HS_TLS_REQUIRED,
                          "a plain gradsync HELLO where TLS was required (GS_TLS=1 here)");
                return;
            }
            if (wait) {
                return;
            }
            s->tls_checked = true;
        }
        ret = gs__tcp_tls_handshake(s->ssl, &s->tls_events, s->why, sizeof(s->why));
        if (ret == 0) {
            return;
        }
        if (ret < 0) {
            in_reject(ctx, s, GS_TCP_HS_OK, s->why);
            return;
        }
        s->state = HS_IN_HELLO;
    }
    if (s->state == HS_IN_HELLO) {
        gs__tcp_hs_expect_t exp = {.job_id = tp->job_id,
                                   .comm_id = tp->comm_id,
                                   .size = tp->size,
                                   .nsocks = tp->nsocks,
                                   .rank_lo = tp->rank + 1,
                                   .rank_hi = tp->size - 1};
        gs__tcp_hs_verdict_t verdict;

        ret = hs_io(s, false);
        if (ret < 0) {
            /* (the TLS reason is cut to fit the line) */
            snprintf(why, sizeof(why), "%.150s after %zu handshake bytes",
                     (errno == EPROTO) ? s->why
                     : (errno != 0)    ? strerror(errno)
                                       : "closed",
                     s->done);
            in_reject(ctx, s, GS_TCP_HS_OK, why);
            return;
        }
        if (ret == 0) {
            return;
        }
        status = gs__tcp_hs_decode(s->buf, GS_TCP_HS_LEN, &hello, why, sizeof(why));
        if ((status != GS_OK) && (s->ssl == NULL) && (s->buf[0] == 0x16u) && (s->buf[1] == 0x03u)) {
            /* A TLS ClientHello: our plain ACK ends the peer's handshake with an error. */
            in_reject(ctx, s, GS_TCP_HS_TLS_UNEXPECTED,
                      "a TLS handshake, and this rank does not use TLS (no GS_TLS=1)");
            return;
        }
        if (status == GS_ERR_VERSION_MISMATCH) {
            in_reject(ctx, s, GS_TCP_HS_BAD_VERSION, why);
            return;
        }
        if ((status != GS_OK) || (hello.kind != GS_TCP_HS_HELLO)) {
            in_reject(ctx, s, GS_TCP_HS_OK, (status != GS_OK) ? why : "an ACK instead of a HELLO");
            return;
        }
        verdict = gs__tcp_hs_check(&hello, &exp, why, sizeof(why));
        if (verdict != GS_TCP_HS_OK) {
            in_reject(ctx, s, verdict, why);
            return;
        }
        if (tp->auth.on && !(hello.flags & GS_TCP_HS_F_AUTH)) {
            snprintf(why, sizeof(why), "rank %u has no GS_AUTH_TOKEN and this rank requires one",
                     hello.rank);
            in_reject(ctx, s, GS_TCP_HS_AUTH_REQUIRED, why);
            return;
        }
        if (!tp->auth.on && (hello.flags & GS_TCP_HS_F_AUTH)) {
            snprintf(why, sizeof(why), "rank %u has a GS_AUTH_TOKEN and this rank has none",
                     hello.rank);
            in_reject(ctx, s, GS_TCP_HS_AUTH_UNEXPECTED, why);
            return;
        }
        if (ctx->claimed[hello.rank * (uint32_t)tp->nsocks + hello.index]) {
            snprintf(why, sizeof(why), "rank %u socket %u is already connected", hello.rank,
                     hello.index);
            in_reject(ctx, s, GS_TCP_HS_DUPLICATE, why);
            return;
        }
        ctx->claimed[hello.rank * (uint32_t)tp->nsocks + hello.index] = true;
        s->peer = (int)hello.rank;
        s->index = (int)hello.index;
        if (s->index == 0) {
            tp->peers[s->peer].shm_offered = ((hello.flags & GS_TCP_HS_F_SHM) != 0);
        }
        if (tp->auth.on) {
            memcpy(s->nonce_c, hello.nonce, sizeof(s->nonce_c));
            if (gs__auth_nonce(s->nonce_a) != GS_OK) {
                ctx->claimed[s->peer * tp->nsocks + s->index] = false;
                in_reject(ctx, s, GS_TCP_HS_OK, gs__error_get());
                return;
            }
        }
        fill_hs(tp, &hello, GS_TCP_HS_ACK, GS_TCP_HS_OK, s->index);
        if (tp->auth.on) {
            memcpy(hello.nonce, s->nonce_a, sizeof(hello.nonce));
            gs__auth_mac(&tp->auth, GS_AUTH_ACCEPTOR, GS_TCP_AUTH_DOMAIN, s->nonce_c, s->nonce_a,
                         hello.mac);
        }
        gs__tcp_hs_encode(&hello, s->buf);
        s->done = 0;
        s->state = HS_IN_ACK;
    }
    if (s->state == HS_IN_ACK) {
        ret = hs_io(s, true);
        if (ret < 0) {
            /* The right peer, gone mid-handshake: free its place for a retry. */
            ctx->claimed[s->peer * tp->nsocks + s->index] = false;
            snprintf(why, sizeof(why), "rank %d failed while taking the ack: %s", s->peer,
                     (errno != 0) ? strerror(errno) : "closed");
            in_reject(ctx, s, GS_TCP_HS_OK, why);
            return;
        }
        if (ret == 0) {
            return;
        }
        if (tp->auth.on) {
            s->done = 0;
            s->state = HS_IN_PROOF;
            return;
        }
        slot_hand_over(tp, s);
    }
    if (s->state == HS_IN_PROOF) {
        gs__tcp_hs_t proof;

        ret = hs_io(s, false);
        if (ret == 0) {
            return;
        }
        if ((ret < 0) ||
            (gs__tcp_hs_decode(s->buf, GS_TCP_HS_LEN, &proof, why, sizeof(why)) != GS_OK) ||
            (proof.kind != GS_TCP_HS_PROOF) ||
            !gs__auth_check(&tp->auth, GS_AUTH_CONNECTOR, GS_TCP_AUTH_DOMAIN, s->nonce_c,
                            s->nonce_a, proof.mac)) {
            /* Not the token's holder (or a replay of an old handshake): free the place. */
            ctx->claimed[s->peer * tp->nsocks + s->index] = false;
            snprintf(why, sizeof(why),
                     "the peer claiming rank %d failed authentication (%s): a wrong "
                     "GS_AUTH_TOKEN or a replayed handshake",
                     s->peer, (ret < 0) ? "closed before its proof" : "bad proof");
            in_reject(ctx, s, GS_TCP_HS_OK, why);
            return;
        }
        slot_hand_over(tp, s);
    }
}

static void in_accept(hs_ctx_t *ctx)
{
    for (;;) {
        gs__sockaddr_t from;
        hs_slot_t *s;
        int fd;

        memset(&from, 0, sizeof(from));
        from.len = sizeof(from.ss);
        fd = accept4(ctx->tp->listen_fd, (struct sockaddr *)&from.ss, &from.len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if ((errno == EINTR) || (errno == ECONNABORTED) || (errno == EPROTO)) {
                continue;
            }
            if ((errno != EAGAIN) && (errno != EWOULDBLOCK)) {
                GS_WARN("tcp: accept on rank %d failed: %s", ctx->tp->rank, strerror(errno));
            }
            return;
        }
        /* Compact finished slots, then make room by dropping the oldest. */
        {
            int j = 0;

            for (int i = 0; i < ctx->nin; i++) {
                if (ctx->in[i].state != HS_DONE) {
                    ctx->in[j++] = ctx->in[i];
                }
            }
            ctx->nin = j;
        }
        if (ctx->nin == HS_MAX_INCOMING) {
            in_reject(ctx, &ctx->in[0], GS_TCP_HS_OK, "too many unfinished handshakes");
            memmove(&ctx->in[0], &ctx->in[1], sizeof(ctx->in[0]) * (HS_MAX_INCOMING - 1));
            ctx->nin--;
        }
        s = &ctx->in[ctx->nin++];
        memset(s, 0, sizeof(*s));
        s->fd = fd;
        s->peer = -1;
        s->state = HS_IN_HELLO;
        if (gs__sock_format(&from, s->text, sizeof(s->text)) != GS_OK) {
            snprintf(s->text, sizeof(s->text), "(unknown address)");
        }
        if (gs__sock_tune(fd) != GS_OK) {
            in_reject(ctx, s, GS_TCP_HS_OK, "could not set socket options");
            continue;
        }
        if (ctx->tp->tls_ctx != NULL) {
            s->ssl = gs__tcp_tls_new(ctx->tp->tls_ctx, fd, false);
            s->state = HS_IN_TLS;
            s->tls_events = POLLIN;
            if (s->ssl == NULL) {
                in_reject(ctx, s, GS_TCP_HS_OK, "out of memory for a TLS session");
            }
        }
    }
}

/* Text listing the ranks that still lack a socket, for the timeout error. */
static void missing_ranks(const hs_ctx_t *ctx, char *buf, size_t len)
{
    const gs__tp_t *tp = ctx->tp;
    size_t off = 0;
    int count = 0;

    buf[0] = '\0';
    for (int p = 0; (p < tp->size) && (off + 16 < len); p++) {
        int have = 0;

        if (p == tp->rank) {
            continue;
        }
        for (int i = 0; i < tp->nsocks; i++) {
            have += (tp->peers[p].conns[i].fd >= 0) ? 1 : 0;
        }
        if (have < tp->nsocks) {
            const hs_slot_t *at = NULL;
            int n;

            for (int i = 0; (i < ctx->nout) && (at == NULL); i++) {
                at = (ctx->out[i].peer == p) ? &ctx->out[i] : NULL;
            }
            /* Our connects to a lower rank: where, and what the last attempt got. */
            n = snprintf(buf + off, len - off, "%s%d%s%s (%d/%d sockets%s%.60s)",
                         (count > 0) ? ", " : "", p, (at != NULL) ? " at " : "",
                         (at != NULL) ? at->text : "", have, tp->nsocks,
                         ((at != NULL) && (at->why[0] != '\0')) ? "; last attempt: " : "",
                         ((at != NULL) && (at->why[0] != '\0')) ? at->why : "");

            off += (n > 0) ? (size_t)n : 0;
            count++;
        }
    }
}

static bool all_connected(const gs__tp_t *tp)
{
    for (int p = 0; p < tp->size; p++) {
        for (int i = 0; (p != tp->rank) && (i < tp->nsocks); i++) {
            if (tp->peers[p].conns[i].fd < 0) {
                return false;
            }
        }
    }
    return true;
}

static gs_status_t hs_loop(hs_ctx_t *ctx, uint64_t deadline_ns)
{
    gs__tp_t *tp = ctx->tp;
    uint64_t start = gs__now_ns();
    gs_status_t status;

    while (!all_connected(tp)) {
        uint64_t now = gs__now_ns();
        uint64_t wake = deadline_ns;
        nfds_t npfd = 0;
        int ret;

        if (atomic_load(&tp->aborted)) {
            return gs__error_set(GS_ERR_ABORTED, "tcp: rank %d: connect aborted", tp->rank);
        }
        if (now >= deadline_ns) {
            char missing[512];

            missing_ranks(ctx, missing, sizeof(missing));
            return gs__error_set(GS_ERR_TIMEOUT,
                                 "tcp: rank %d timed out after %llu ms connecting; still missing "
                                 "ranks %s (a rank that refuses connections is not running, "
                                 "crashed or listens elsewhere; GS_DEBUG_SUBSYS=NET logs each "
                                 "attempt, GS_SOCKET_IFNAME picks the interface)",
                                 tp->rank, (unsigned long long)((now - start) / 1000000u), missing);
        }
        ctx->pfds[npfd].fd = tp->listen_fd;
        ctx->pfds[npfd].events = POLLIN;
        ctx->pslots[npfd++] = NULL;
        ctx->pfds[npfd].fd = tp->evfd;
        ctx->pfds[npfd].events = POLLIN;
        ctx->pslots[npfd++] = NULL;
        for (int i = 0; i < ctx->nout; i++) {
            hs_slot_t *s = &ctx->out[i];

            if ((s->state == HS_OUT_RETRY) && (s->retry_at <= now)) {
                status = out_start(ctx, s, now);
                if (status != GS_OK) {
                    return status;
                }
            }
            if (s->state == HS_OUT_RETRY) {
                wake = (s->retry_at < wake) ? s->retry_at : wake;
            } else if (s->state != HS_DONE) {
                ctx->pfds[npfd].fd = s->fd;
                ctx->pfds[npfd].events = (s->state == HS_OUT_TLS)   ? s->tls_events
                                         : (s->state == HS_OUT_ACK) ? POLLIN
                                                                    : POLLOUT;
                ctx->pslots[npfd++] = s;
            }
        }
        for (int i = 0; i < ctx->nin; i++) {
            hs_slot_t *s = &ctx->in[i];

            if (s->state != HS_DONE) {
                ctx->pfds[npfd].fd = s->fd;
                ctx->pfds[npfd].events = (s->state == HS_IN_TLS) ? s->tls_events
                                         : ((s->state == HS_IN_HELLO) || (s->state == HS_IN_PROOF))
                                             ? POLLIN
                                             : POLLOUT;
                ctx->pslots[npfd++] = s;
            }
        }
        ret = poll(ctx->pfds, npfd, gs__ms_until(wake, now));
        if ((ret < 0) && (errno != EINTR)) {
            return gs__error_set(GS_ERR_SYSTEM, "tcp: poll while connecting failed: %s",
                                 strerror(errno));
        }
        if (ret <= 0) {
            continue;
        }
        now = gs__now_ns();
        for (nfds_t i = 2; i < npfd; i++) {
            hs_slot_t *s = ctx->pslots[i];

            if (ctx->pfds[i].revents == 0) {
                continue;
            }
            if (s->state <= HS_OUT_PROOF) {
                status = out_step(ctx, s, ctx->pfds[i].revents, now);
                if (status != GS_OK) {
                    return status;
                }
            } else {
                in_step(ctx, s);
            }
        }
        if (ctx->pfds[0].revents != 0) {
            in_accept(ctx);
        }
    }
    return GS_OK;
}

gs_status_t gs__tcp_handshake_all(gs__tp_t *tp, char (*addrs)[GS_TP_ADDR_MAX], uint64_t deadline_ns)
{
    size_t maxfds = 2 + (size_t)tp->rank * (size_t)tp->nsocks + HS_MAX_INCOMING;
    gs_status_t status = GS_OK;
    hs_ctx_t *ctx = calloc(1, sizeof(*ctx));

    if (ctx == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "tcp: out of memory for connection setup");
    }
    ctx->tp = tp;
    ctx->nout = tp->rank * tp->nsocks;
    ctx->addrs = calloc((size_t)tp->rank + 1, sizeof(*ctx->addrs));
    ctx->out = calloc((size_t)ctx->nout + 1, sizeof(*ctx->out));
    ctx->claimed = calloc((size_t)tp->size * (size_t)tp->nsocks, sizeof(bool));
    ctx->pfds = calloc(maxfds, sizeof(*ctx->pfds));
    ctx->pslots = calloc(maxfds, sizeof(*ctx->pslots));
    if ((ctx->addrs == NULL) || (ctx->out == NULL) || (ctx->claimed == NULL) ||
        (ctx->pfds == NULL) || (ctx->pslots == NULL)) {
        status = gs__error_set(GS_ERR_NO_MEMORY, "tcp: out of memory for connection setup");
        goto out_free;
    }
    for (int p = 0; p < tp->rank; p++) {
        if (memchr(addrs[p], '\0', GS_TP_ADDR_MAX) == NULL) {
            status = gs__error_set(GS_ERR_INVALID_ARG,
                                   "tcp: the address of rank %d is not "
                                   "NUL-terminated",
                                   p);
            goto out_free;
        }
        status = gs__sock_parse(addrs[p], "any", &ctx->addrs[p]);
        if (status != GS_OK) {
            goto out_free; /* gs__sock_parse named the address */
        }
        for (int i = 0; i < tp->nsocks; i++) {
            hs_slot_t *s = &ctx->out[p * tp->nsocks + i];

            s->fd = -1;
            s->peer = p;
            s->index = i;
            s->state = HS_OUT_RETRY;
            s->retry_at = 0;
            s->backoff_ms = HS_RETRY_MIN_MS;
            snprintf(s->text, sizeof(s->text), "%s", addrs[p]);
        }
    }
    status = hs_loop(ctx, deadline_ns);
out_free:
    for (int i = 0; (ctx->out != NULL) && (i < ctx->nout); i++) {
        slot_close(&ctx->out[i]);
    }
    for (int i = 0; i < ctx->nin; i++) {
        if (ctx->in[i].state != HS_DONE) {
            GS_INFO(NET, "tcp: closing an unfinished handshake from %s", ctx->in[i].text);
        }
        slot_close(&ctx->in[i]);
    }
    free(ctx->pslots);
    free(ctx->pfds);
    free(ctx->claimed);
    free(ctx->out);
    free(ctx->addrs);
    free(ctx);
    return status;
}
