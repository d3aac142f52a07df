/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TCP connection setup: nsocks sockets per pair of ranks, made when a pair
 * first needs them (GS_CONNECT=lazy, the default: the ring neighbours at
 * init, every other peer when a send or receive first names it) or all at
 * init (GS_CONNECT=eager). The rank that needs the link connects to the
 * other's listening address and sends a HELLO; the other validates it and
 * answers with an ACK. With a job token (core/auth.h) the HELLO carries the
 * connector's nonce, the ACK the acceptor's nonce and MAC, and the
 * connector proves itself with a PROOF; the acceptor takes the socket only
 * when the PROOF checks out, so a peer without the token never gets a
 * frame read. A side with a token and one without learn it from the
 * verdict and fail at once with GS_ERR_AUTH.
 *
 * Both ranks of a pair may start at once. The higher rank's sockets are
 * kept: a lower rank that is connecting refuses nothing and drops its own
 * attempt when the higher one's HELLO arrives; a higher rank that is
 * connecting answers the lower one's HELLO with the CROSSED verdict, on
 * which the lower rank drops its attempt and waits. A lower rank defers
 * its first attempt to a higher peer by HS_DEFER_MS, so that in a
 * collective, where both sides need the link, the higher rank's attempt
 * usually arrives first and nothing crosses.
 *
 * Every socket being set up is in the instance's own epoll set (edge
 * triggered; each slot is driven until it would block), itself in the
 * transport's epoll set, so the handshakes advance in the progress loop
 * beside the traffic of the links that are up; init waits on them with
 * gs__tcp_hs_wait. Socket 0 of a pair on one host (the bootstrap's host
 * ids match and both offer shared memory) then carries the segment's
 * CREATE and MAPPED records (tcp_pipe_shm.c) before its first frame. When
 * every socket of the pair is through, the link comes up
 * (gs__tcp_link_up).
 *
 * With GS_TLS (tcp_pipe_tls.h) every socket first runs a TLS 1.3 handshake,
 * both sides verifying the other's certificate against the CA, and the
 * HELLO, ACK and PROOF travel inside it. A plain HELLO reaching a TLS rank
 * gets a plain TLS_REQUIRED verdict, and a TLS ClientHello reaching a plain
 * rank a TLS_UNEXPECTED one, so a job whose ranks disagree fails at once
 * with GS_ERR_AUTH instead of waiting for its deadline.
 *
 * Anything that fails the handshake on the listening side (a port scanner,
 * another job, a stale rank) gets one WARN naming its address and the
 * reason, is closed, and does not disturb the job. A bad ACK, on the other
 * hand, means the address we were given belongs to someone else, which
 * fails that peer. A peer whose address refuses HS_REFUSED_MAX connects in
 * a row is gone (every rank listens from before the bootstrap until it
 * leaves): it is failed with GS_ERR_PEER_FAILED, naming it.
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
#include <sys/epoll.h>
#include <unistd.h>

/* Half-open incoming connections held at once; beyond it the oldest goes. */
#define HS_MAX_INCOMING 256
#define HS_RETRY_MIN_MS 5
#define HS_RETRY_MAX_MS 200
/* Refused connects in a row after which the peer is taken for gone. */
#define HS_REFUSED_MAX 6
/* A lower rank's first attempt to a higher peer waits this long (lazy). */
#define HS_DEFER_MS 20
/* How long gs__tcp_hs_wait sleeps at most before looking at the abort flag. */
#define HS_WAIT_SLICE_MS 100
#define HS_EVENTS 64

_Static_assert(GS_TCP_SHM_LEN == GS_TCP_HS_LEN, "setup records travel in a slot's buffer");

typedef enum hs_state {
    HS_FREE = 0,
    HS_OUT_RETRY, /* waiting until retry_at to connect */
    HS_OUT_CONNECTING,
    HS_OUT_TLS, /* GS_TLS: the TLS handshake, before the HELLO */
    HS_OUT_HELLO,
    HS_OUT_ACK,
    HS_OUT_PROOF, /* last of the outgoing states (out_step drives them) */
    HS_IN_TLS,
    HS_IN_HELLO,
    HS_IN_ACK,
    HS_IN_PROOF,
    HS_SHM_CREATE_TX, /* lower rank of a local pair: CREATE out (socket 0) */
    HS_SHM_MAPPED_RX, /* then MAPPED in */
    HS_SHM_CREATE_RX, /* higher rank: CREATE in */
    HS_SHM_MAPPED_TX  /* then MAPPED out */
} hs_state_t;

typedef struct hs_slot {
    int fd;
    int peer;  /* -1 for an incoming socket not yet identified */
    int index; /* socket index within the pair */
    hs_state_t state;
    bool registered; /* fd is in the setup epoll set */
    size_t done;     /* bytes of buf sent or received */
    uint8_t buf[GS_TCP_HS_LEN];
    uint8_t nonce_c[GS_AUTH_NONCE_BYTES]; /* with a token: the connector's nonce */
    uint8_t nonce_a[GS_AUTH_NONCE_BYTES]; /* and the acceptor's */
    uint64_t retry_at;
    int backoff_ms;
    int refused;                 /* connects refused in a row */
    struct ssl_st *ssl;          /* GS_TLS: the session, handed to the connection with the socket */
    short tls_events;            /* what the TLS handshake waits for (POLLIN or POLLOUT) */
    bool tls_checked;            /* HS_IN_TLS: the first bytes were looked at (a plain HELLO?) */
    char why[GS_TCP_REASON_MAX]; /* hs_io: the TLS error behind an EPROTO */
    char text[GS_SOCK_ADDR_MAX]; /* remote address, for messages */
} hs_slot_t;

struct gs__tcp_setup {
    gs__tp_t *tp;
    char (*addrs)[GS_TP_ADDR_MAX]; /* every rank's address ("" until known) */
    hs_slot_t **out;               /* per peer: nsocks outgoing slots, NULL until needed */
    uint64_t *deadline;            /* per peer: when its outgoing connects give up */
    hs_slot_t in[HS_MAX_INCOMING];
    bool *claimed;    /* (peer, index) pairs with an incoming handshake under way */
    int evict;        /* the incoming slot to drop next when all are busy */
    int epfd;         /* the listening socket and every slot's socket */
    uint64_t next_ns; /* earliest retry_at of an outgoing slot (UINT64_MAX: none) */
};

static bool hs_lazy_from(const gs__tcp_hs_t *hs)
{
    return (hs->flags & GS_TCP_HS_F_LAZY) != 0;
}

static void slot_unregister(struct gs__tcp_setup *ctx, hs_slot_t *s)
{
    if (s->registered && (s->fd >= 0)) {
        (void)epoll_ctl(ctx->epfd, EPOLL_CTL_DEL, s->fd, NULL);
    }
    s->registered = false;
}

static void slot_close(struct gs__tcp_setup *ctx, hs_slot_t *s)
{
    slot_unregister(ctx, s);
    gs__tcp_tls_free(s->ssl);
    s->ssl = NULL;
    if (s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
}

/* Put a slot's socket in the setup epoll set (edge triggered, both ways). */
static gs_status_t slot_register(struct gs__tcp_setup *ctx, hs_slot_t *s)
{
    struct epoll_event ev;

    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN | EPOLLOUT | EPOLLET;
    ev.data.ptr = s;
    if (epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, s->fd, &ev) != 0) {
        return gs__error_set(GS_ERR_SYSTEM, "tcp: epoll_ctl for a connection being set up: %s",
                             strerror(errno));
    }
    s->registered = true;
    return GS_OK;
}

static bool shm_applies(const gs__tp_t *tp, int peer)
{
    return tp->shm_offer && tp->peers[peer].shm_offered && (tp->peers[peer].shm_ring > 0);
}

static gs_status_t slot_through(struct gs__tcp_setup *ctx, hs_slot_t *s);

/* The slot's socket (and TLS session) become connection (peer, index); the
 * link comes up with the pair's last socket. */
static void slot_hand_over(struct gs__tcp_setup *ctx, hs_slot_t *s)
{
    gs__tp_t *tp = ctx->tp;
    gs__tcp_peer_t *p = &tp->peers[s->peer];
    gs__tcp_conn_t *c = &p->conns[s->index];
    const int peer = s->peer;

    slot_unregister(ctx, s);
    c->fd = s->fd;
    c->ssl = s->ssl;
    c->pipe = (c->ssl != NULL) ? &gs__tcp_pipe_tls : &gs__tcp_pipe_plain;
    s->fd = -1;
    s->ssl = NULL;
    s->state = HS_FREE;
    if (ctx->claimed != NULL) {
        ctx->claimed[(size_t)peer * (size_t)tp->max_conns + (size_t)s->index] = false;
    }
    p->nup++;
    if (p->nup == p->nconns) {
        gs__tcp_link_up(tp, peer); /* its slots are freed by the next out_tick */
    }
}

/* @p peer: whom it goes to (its pair's socket count), -1 when not known. */
static void fill_hs(const gs__tp_t *tp, gs__tcp_hs_t *hs, uint32_t kind, uint32_t verdict,
                    int index, int peer)
{
    hs->version = GS_TCP_PROTO_VERSION;
    hs->kind = kind;
    hs->verdict = verdict;
    hs->job_id = tp->job_id;
    hs->comm_id = tp->comm_id;
    hs->rank = (uint32_t)tp->rank;
    hs->size = (uint32_t)tp->size;
    hs->index = (uint32_t)index;
    hs->nsocks = (uint32_t)((peer >= 0) ? tp->peers[peer].nconns : tp->nsocks);
    /* Socket 0 offers shared memory (a local pair sets it up before its first frame). */
    hs->flags = ((index == 0) && tp->shm_offer) ? GS_TCP_HS_F_SHM : 0;
    if (tp->auth.on) {
        hs->flags |= GS_TCP_HS_F_AUTH;
    }
    if (tp->lazy) {
        hs->flags |= GS_TCP_HS_F_LAZY;
    }
    memset(hs->nonce, 0, sizeof(hs->nonce));
    memset(hs->mac, 0, sizeof(hs->mac));
}

/* Fail peer @p peer for what a slot found (the error text is the reason). */
static void hs_fail(struct gs__tcp_setup *ctx, int peer, gs_status_t status)
{
    gs__tcp_peer_fail(ctx->tp, peer, status, "%s", gs__error_get());
}

static void out_schedule_retry(struct gs__tcp_setup *ctx, hs_slot_t *s, uint64_t now,
                               const char *why)
{
    GS_INFO(NET, "tcp: connection %d to rank %d (%s) failed (%s); retrying in %d ms", s->index,
            s->peer, s->text, why, s->backoff_ms);
    if (why != s->why) {
        (void)snprintf(s->why, sizeof(s->why), "%s", why); /* for the timeout's text */
    }
    slot_close(ctx, s);
    s->state = HS_OUT_RETRY;
    s->done = 0;
    s->retry_at = now + (uint64_t)s->backoff_ms * 1000000u;
    s->backoff_ms = (s->backoff_ms * 2 > HS_RETRY_MAX_MS) ? HS_RETRY_MAX_MS : s->backoff_ms * 2;
    ctx->next_ns = (s->retry_at < ctx->next_ns) ? s->retry_at : ctx->next_ns;
}

/* A refused connect: retry, or after HS_REFUSED_MAX in a row, the peer is gone. */
static gs_status_t out_refused(struct gs__tcp_setup *ctx, hs_slot_t *s, uint64_t now, int err)
{
    if (++s->refused >= HS_REFUSED_MAX) {
        slot_close(ctx, s);
        return gs__error_set(GS_ERR_PEER_FAILED,
                             "rank %d failed: its address %s refused %d connections in a row "
                             "(it exited or crashed: nothing listens there any more)",
                             s->peer, s->text, s->refused);
    }
    out_schedule_retry(ctx, s, now, strerror(err));
    return GS_OK;
}

/* Start (or restart) an outgoing connect. */
static gs_status_t out_start(struct gs__tcp_setup *ctx, hs_slot_t *s, uint64_t now)
{
    const gs__tcp_prail_t *rail = &ctx->tp->peers[s->peer].rails[s->index / ctx->tp->nsocks];
    gs__sockaddr_t a;
    gs__tcp_hs_t hs;
    gs_status_t status;
    int ret;

    if (rail->raddr.len > 0) {
        a = rail->raddr; /* the peer's address on the socket's rail (tcp_stripe.c) */
    } else {
        status = gs__sock_parse(ctx->addrs[s->peer], "any", &a);
        if (status != GS_OK) {
            return status; /* gs__sock_parse named the address */
        }
    }
    s->fd = socket(a.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->fd < 0) {
        return gs__error_set(GS_ERR_SYSTEM,
                             "tcp: socket() to connect to rank %d (%s) failed: %s (with "
                             "GS_CONNECT=eager every rank opens GS_TCP_NSOCKS sockets to every "
                             "other; raise ulimit -n or use GS_CONNECT=lazy)",
                             s->peer, s->text, strerror(errno));
    }
    if ((ctx->tp->nrails > 1) && rail->bind) {
        /* Leave by the rail's own interface: its address is the source. */
        gs__sockaddr_t src = ctx->tp->rails[rail->local].addr;

        if (bind(s->fd, (const struct sockaddr *)&src.ss, src.len) != 0) {
            return gs__error_set(GS_ERR_SYSTEM, "tcp: bind to rail %s's address failed: %s",
                                 ctx->tp->rails[rail->local].ifname, strerror(errno));
        }
    }
    fill_hs(ctx->tp, &hs, GS_TCP_HS_HELLO, GS_TCP_HS_OK, s->index, s->peer);
    if (ctx->tp->auth.on) {
        /* A fresh nonce per attempt: nothing of an earlier try can be replayed. */
        if (gs__auth_nonce(s->nonce_c) != GS_OK) {
            return GS_ERR_SYSTEM;
        }
        memcpy(hs.nonce, s->nonce_c, sizeof(hs.nonce));
    }
    gs__tcp_hs_encode(&hs, s->buf);
    s->done = 0;
    ret = connect(s->fd, (const struct sockaddr *)&a.ss, a.len);
    if ((ret == 0) || (errno == EINPROGRESS) || (errno == EINTR)) {
        /* Done at once or not: epoll says writable, and out_step goes on from there. */
        s->state = HS_OUT_CONNECTING;
        return slot_register(ctx, s);
    }
    if (errno == ECONNREFUSED) {
        return out_refused(ctx, s, now, errno);
    }
    if ((errno == ENETUNREACH) || (errno == EHOSTUNREACH) || (errno == EAGAIN) ||
        (errno == ETIMEDOUT)) {
        out_schedule_retry(ctx, s, now, strerror(errno));
        return GS_OK;
    }
    {
        int err = errno;

        slot_close(ctx, s);
        return gs__error_set(GS_ERR_SYSTEM, "tcp: connect to rank %d (%s) failed: %s", s->peer,
                             s->text, strerror(err));
    }
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

/* The peer's connection won the crossing: drop our attempt and wait for it. */
static void out_abandon(struct gs__tcp_setup *ctx, int peer)
{
    hs_slot_t *out = ctx->out[peer];

    for (int i = 0; (out != NULL) && (i < ctx->tp->peers[peer].nconns); i++) {
        if (out[i].state != HS_FREE) {
            slot_close(ctx, &out[i]);
            out[i].state = HS_FREE;
        }
    }
    if (ctx->tp->peers[peer].link == GS_TCP_LINK_OUT) {
        ctx->tp->peers[peer].link = GS_TCP_LINK_IN;
    }
}

static gs_status_t out_got_ack(struct gs__tcp_setup *ctx, hs_slot_t *s)
{
    gs__tp_t *tp = ctx->tp;
    gs__tcp_hs_expect_t exp = {.job_id = tp->job_id,
                               .comm_id = tp->comm_id,
                               .size = tp->size,
                               .nsocks = tp->peers[s->peer].nconns,
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
    if ((ack.verdict == GS_TCP_HS_CROSSED) && tp->lazy && (s->peer > tp->rank)) {
        GS_INFO(NET, "tcp: rank %d: rank %d connects to us at the same time; taking its sockets",
                tp->rank, s->peer);
        out_abandon(ctx, s->peer);
        return GS_OK;
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
                             : (ack.verdict == GS_TCP_HS_CONNECT_DIFFERS)
                                 ? "; give every rank the same GS_CONNECT"
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
        fill_hs(tp, &proof, GS_TCP_HS_PROOF, GS_TCP_HS_OK, s->index, s->peer);
        gs__auth_mac(&tp->auth, GS_AUTH_CONNECTOR, GS_TCP_AUTH_DOMAIN, s->nonce_c, ack.nonce,
                     proof.mac);
        gs__tcp_hs_encode(&proof, s->buf);
        s->done = 0;
        s->state = HS_OUT_PROOF;
        return GS_OK;
    }
    return slot_through(ctx, s);
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

/* Drive one outgoing slot as far as it goes. */
static gs_status_t out_step(struct gs__tcp_setup *ctx, hs_slot_t *s, uint64_t now)
{
    int ret;

    if (s->state == HS_OUT_CONNECTING) {
        int err = 0;
        socklen_t elen = sizeof(err);
        struct pollfd pfd = {.fd = s->fd, .events = POLLOUT};

        if ((poll(&pfd, 1, 0) <= 0) || ((pfd.revents & (POLLOUT | POLLERR | POLLHUP)) == 0)) {
            return GS_OK; /* still connecting */
        }
        if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0) {
            err = errno;
        }
        if (err == ECONNREFUSED) {
            return out_refused(ctx, s, now, err);
        }
        if (err != 0) {
            out_schedule_retry(ctx, s, now, strerror(err));
            return GS_OK;
        }
        s->refused = 0;
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
            out_schedule_retry(ctx, s, now, s->why);
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
            out_schedule_retry(ctx, s, now, (errno != 0) ? strerror(errno) : "closed");
            return GS_OK;
        }
        if (ret == 0) {
            return GS_OK;
        }
        s->state = HS_OUT_ACK;
        s->done = 0;
    }
    if (s->state == HS_OUT_ACK) {
        ret = hs_io(s, false);
        if ((ret < 0) && (errno == EPROTO)) {
            return out_tls_failed(s);
        }
        if (ret < 0) {
            out_schedule_retry(ctx, s, now,
                               (errno != 0) ? strerror(errno) : "closed before the ack");
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
            out_schedule_retry(ctx, s, now,
                               (errno != 0) ? strerror(errno) : "closed before the proof");
            return GS_OK;
        }
        if (ret == 0) {
            return GS_OK;
        }
        return slot_through(ctx, s);
    }
    return GS_OK;
}

/* Reject an incoming socket: WARN (INFO for a crossing), best-effort
 * reject ACK, close. */
static void in_reject(struct gs__tcp_setup *ctx, hs_slot_t *s, uint32_t verdict, const char *why)
{
    if (verdict == GS_TCP_HS_CROSSED) {
        GS_INFO(NET, "tcp: rank %d: %s", ctx->tp->rank, why);
    } else {
        GS_WARN("tcp: rank %d rejected a connection from %s: %s", ctx->tp->rank, s->text, why);
    }
    if (verdict != GS_TCP_HS_OK) {
        gs__tcp_hs_t ack;
        uint8_t buf[GS_TCP_HS_LEN];

        fill_hs(ctx->tp, &ack, GS_TCP_HS_ACK, verdict,
                (verdict == GS_TCP_HS_CROSSED) ? s->index : 0, -1);
        if (ctx->tp->auth.on && (verdict != GS_TCP_HS_CROSSED)) {
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
    slot_close(ctx, s);
    s->state = HS_FREE;
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

/* The HELLO of a validated connector: which of the pair's attempts goes on.
 * Returns GS_TCP_HS_OK to accept (the link is the peer's now), else the
 * verdict to refuse with and the reason in why. */
static uint32_t in_claim(struct gs__tcp_setup *ctx, const gs__tcp_hs_t *hello, char *why,
                         size_t len)
{
    gs__tp_t *tp = ctx->tp;
    gs__tcp_peer_t *p = &tp->peers[hello->rank];
    const size_t k = (size_t)hello->rank * (size_t)tp->max_conns + hello->index;

    if (p->fail_status != GS_OK) {
        snprintf(why, len, "rank %u has failed here (%.100s)", hello->rank, p->reason);
        return GS_TCP_HS_DUPLICATE;
    }
    if (ctx->claimed[k] || (p->conns[hello->index].fd >= 0) || (p->link == GS_TCP_LINK_UP)) {
        if (tp->lazy && ((int)hello->rank < tp->rank) && (p->link == GS_TCP_LINK_UP)) {
            /* A lower rank's attempt that crossed ours and lost, arriving late. */
            snprintf(why, len, "rank %u's late attempt: our link to it is up", hello->rank);
            return GS_TCP_HS_CROSSED;
        }
        snprintf(why, len, "rank %u socket %u is already connected", hello->rank, hello->index);
        return GS_TCP_HS_DUPLICATE;
    }
    if (p->link == GS_TCP_LINK_OUT) {
        if ((int)hello->rank < tp->rank) {
            snprintf(why, len, "rank %u connects while we connect to it: ours are kept",
                     hello->rank);
            return GS_TCP_HS_CROSSED;
        }
        out_abandon(ctx, (int)hello->rank);
    }
    p->link = GS_TCP_LINK_IN;
    ctx->claimed[k] = true;
    return GS_TCP_HS_OK;
}

static gs_status_t in_step(struct gs__tcp_setup *ctx, hs_slot_t *s)
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
                return GS_OK;
            }
            if (wait) {
                return GS_OK;
            }
            s->tls_checked = true;
        }
        ret = gs__tcp_tls_handshake(s->ssl, &s->tls_events, s->why, sizeof(s->why));
        if (ret == 0) {
            return GS_OK;
        }
        if (ret < 0) {
            in_reject(ctx, s, GS_TCP_HS_OK, s->why);
            return GS_OK;
        }
        s->state = HS_IN_HELLO;
    }
    if (s->state == HS_IN_HELLO) {
        gs__tcp_hs_expect_t exp = {.job_id = tp->job_id,
                                   .comm_id = tp->comm_id,
                                   .size = tp->size,
                                   .nsocks = -1, /* the pair's: checked below */
                                   .rank_lo = tp->lazy ? 0 : tp->rank + 1,
                                   .rank_hi = tp->size - 1};
        uint32_t verdict;

        ret = hs_io(s, false);
        if (ret < 0) {
            /* (the TLS reason is cut to fit the line) */
            snprintf(why, sizeof(why), "%.150s after %zu handshake bytes",
                     (errno == EPROTO) ? s->why
                     : (errno != 0)    ? strerror(errno)
                                       : "closed",
                     s->done);
            in_reject(ctx, s, GS_TCP_HS_OK, why);
            return GS_OK;
        }
        if (ret == 0) {
            return GS_OK;
        }
        status = gs__tcp_hs_decode(s->buf, GS_TCP_HS_LEN, &hello, why, sizeof(why));
        if ((status != GS_OK) && (s->ssl == NULL) && (s->buf[0] == 0x16u) && (s->buf[1] == 0x03u)) {
            /* A TLS ClientHello: our plain ACK ends the peer's handshake with an error. */
            in_reject(ctx, s, GS_TCP_HS_TLS_UNEXPECTED,
                      "a TLS handshake, and this rank does not use TLS (no GS_TLS=1)");
            return GS_OK;
        }
        if (status == GS_ERR_VERSION_MISMATCH) {
            in_reject(ctx, s, GS_TCP_HS_BAD_VERSION, why);
            return GS_OK;
        }
        if ((status != GS_OK) || (hello.kind != GS_TCP_HS_HELLO)) {
            in_reject(ctx, s, GS_TCP_HS_OK, (status != GS_OK) ? why : "an ACK instead of a HELLO");
            return GS_OK;
        }
        verdict = gs__tcp_hs_check(&hello, &exp, why, sizeof(why));
        if ((verdict == GS_TCP_HS_OK) && (hello.rank == (uint32_t)tp->rank)) {
            snprintf(why, sizeof(why), "rank %u is this rank", hello.rank);
            verdict = GS_TCP_HS_BAD_RANK;
        }
        if ((verdict == GS_TCP_HS_OK) && (hello.nsocks != (uint32_t)tp->peers[hello.rank].nconns)) {
            snprintf(why, sizeof(why),
                     "rank %u has %u sockets for this pair, this rank %d (every rank needs the "
                     "same GS_TCP_NSOCKS, and rails that pair: GS_SOCKET_IFNAME)",
                     hello.rank, hello.nsocks, tp->peers[hello.rank].nconns);
            verdict = GS_TCP_HS_BAD_RANK;
        }
        if (verdict != GS_TCP_HS_OK) {
            in_reject(ctx, s, verdict, why);
            return GS_OK;
        }
        if (hs_lazy_from(&hello) != tp->lazy) {
            snprintf(why, sizeof(why),
                     "rank %u has GS_CONNECT=%s and this rank %s; give every rank the same",
                     hello.rank, hs_lazy_from(&hello) ? "lazy" : "eager",
                     tp->lazy ? "lazy" : "eager");
            in_reject(ctx, s, GS_TCP_HS_CONNECT_DIFFERS, why);
            return GS_OK;
        }
        if (tp->auth.on && !(hello.flags & GS_TCP_HS_F_AUTH)) {
            snprintf(why, sizeof(why), "rank %u has no GS_AUTH_TOKEN and this rank requires one",
                     hello.rank);
            in_reject(ctx, s, GS_TCP_HS_AUTH_REQUIRED, why);
            return GS_OK;
        }
        if (!tp->auth.on && (hello.flags & GS_TCP_HS_F_AUTH)) {
            snprintf(why, sizeof(why), "rank %u has a GS_AUTH_TOKEN and this rank has none",
                     hello.rank);
            in_reject(ctx, s, GS_TCP_HS_AUTH_UNEXPECTED, why);
            return GS_OK;
        }
        s->index = (int)hello.index;
        verdict = in_claim(ctx, &hello, why, sizeof(why));
        if (verdict != GS_TCP_HS_OK) {
            in_reject(ctx, s, verdict, why);
            return GS_OK;
        }
        s->peer = (int)hello.rank;
        if (s->index == 0) {
            tp->peers[s->peer].shm_offered = ((hello.flags & GS_TCP_HS_F_SHM) != 0);
        }
        if (tp->auth.on) {
            memcpy(s->nonce_c, hello.nonce, sizeof(s->nonce_c));
            if (gs__auth_nonce(s->nonce_a) != GS_OK) {
                ctx->claimed[s->peer * tp->max_conns + s->index] = false;
                in_reject(ctx, s, GS_TCP_HS_OK, gs__error_get());
                return GS_OK;
            }
        }
        fill_hs(tp, &hello, GS_TCP_HS_ACK, GS_TCP_HS_OK, s->index, s->peer);
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
            ctx->claimed[s->peer * tp->max_conns + s->index] = false;
            snprintf(why, sizeof(why), "rank %d failed while taking the ack: %s", s->peer,
                     (errno != 0) ? strerror(errno) : "closed");
            in_reject(ctx, s, GS_TCP_HS_OK, why);
            return GS_OK;
        }
        if (ret == 0) {
            return GS_OK;
        }
        if (tp->auth.on) {
            s->done = 0;
            s->state = HS_IN_PROOF;
            return GS_OK;
        }
        return slot_through(ctx, s);
    }
    if (s->state == HS_IN_PROOF) {
        gs__tcp_hs_t proof;

        ret = hs_io(s, false);
        if (ret == 0) {
            return GS_OK;
        }
        if ((ret < 0) ||
            (gs__tcp_hs_decode(s->buf, GS_TCP_HS_LEN, &proof, why, sizeof(why)) != GS_OK) ||
            (proof.kind != GS_TCP_HS_PROOF) ||
            !gs__auth_check(&tp->auth, GS_AUTH_CONNECTOR, GS_TCP_AUTH_DOMAIN, s->nonce_c,
                            s->nonce_a, proof.mac)) {
            /* Not the token's holder (or a replay of an old handshake): free the place. */
            ctx->claimed[s->peer * tp->max_conns + s->index] = false;
            snprintf(why, sizeof(why),
                     "the peer claiming rank %d failed authentication (%s): a wrong "
                     "GS_AUTH_TOKEN or a replayed handshake",
                     s->peer, (ret < 0) ? "closed before its proof" : "bad proof");
            in_reject(ctx, s, GS_TCP_HS_OK, why);
            return GS_OK;
        }
        return slot_through(ctx, s);
    }
    return GS_OK;
}

/* ---------------------------------------------------------------------- */
/* Shared memory on socket 0 of a local pair                              */
/* ---------------------------------------------------------------------- */

/* The handshake of a socket is through: socket 0 of a local pair sets up
 * the segment first, every other socket is handed over. */
static gs_status_t slot_through(struct gs__tcp_setup *ctx, hs_slot_t *s)
{
    gs__tp_t *tp = ctx->tp;

    if ((s->index != 0) || !shm_applies(tp, s->peer)) {
        slot_hand_over(ctx, s);
        return GS_OK;
    }
    s->done = 0;
    if (tp->rank < s->peer) {
        gs__tcp_shm_pair_create(tp, s->peer, s->buf);
        s->state = HS_SHM_CREATE_TX;
    } else {
        s->state = HS_SHM_CREATE_RX;
    }
    return GS_OK;
}

/* A local pair's setup records; a socket that fails here fails the peer. */
static gs_status_t shm_step(struct gs__tcp_setup *ctx, hs_slot_t *s)
{
    gs__tp_t *tp = ctx->tp;
    const bool writing = (s->state == HS_SHM_CREATE_TX) || (s->state == HS_SHM_MAPPED_TX);
    bool more = true;
    gs_status_t status;
    int ret = hs_io(s, writing);

    if (ret < 0) {
        return gs__error_set(GS_ERR_PEER_FAILED,
                             "rank %d failed while setting up shared memory with rank %d: %s",
                             s->peer, tp->rank, (errno != 0) ? strerror(errno) : "closed");
    }
    if (ret == 0) {
        return GS_OK;
    }
    s->done = 0;
    switch (s->state) {
    case HS_SHM_CREATE_TX:
        more = (tp->peers[s->peer].shm != NULL); /* "not ok" is answered by nothing */
        s->state = HS_SHM_MAPPED_RX;
        break;
    case HS_SHM_MAPPED_RX:
        status = gs__tcp_shm_pair_mapped(tp, s->peer, s->buf);
        if (status != GS_OK) {
            return status;
        }
        more = false;
        break;
    case HS_SHM_CREATE_RX:
        status = gs__tcp_shm_pair_map(tp, s->peer, s->buf, &more);
        if (status != GS_OK) {
            return status;
        }
        s->state = HS_SHM_MAPPED_TX; /* the reply is in s->buf when more */
        break;
    default: /* HS_SHM_MAPPED_TX */
        more = false;
        break;
    }
    if (!more) {
        slot_hand_over(ctx, s);
    }
    return GS_OK;
}

/* ---------------------------------------------------------------------- */
/* Driving the slots                                                      */
/* ---------------------------------------------------------------------- */

/* Drive a slot until it would block (the set is edge triggered); a failure
 * fails its peer. */
static void slot_drive(struct gs__tcp_setup *ctx, hs_slot_t *s, uint64_t now)
{
    for (int guard = 0; guard < 16; guard++) {
        const hs_state_t before = s->state;
        const int peer = s->peer;
        gs_status_t status;

        if ((s->state == HS_FREE) || (s->state == HS_OUT_RETRY)) {
            return;
        }
        if (s->state <= HS_OUT_PROOF) {
            status = out_step(ctx, s, now);
        } else if (s->state <= HS_IN_PROOF) {
            status = in_step(ctx, s);
        } else {
            status = shm_step(ctx, s);
        }
        if (status != GS_OK) {
            slot_close(ctx, s);
            s->state = HS_FREE;
            hs_fail(ctx, peer, status); /* closes the peer's other slots too */
            return;
        }
        if (s->state == before) {
            return; /* it would block */
        }
    }
}

static void in_accept(struct gs__tcp_setup *ctx, uint64_t now)
{
    gs__tp_t *tp = ctx->tp;

    for (int budget = 0; budget < HS_MAX_INCOMING; budget++) {
        gs__sockaddr_t from;
        hs_slot_t *s = NULL;
        int fd;

        memset(&from, 0, sizeof(from));
        from.len = sizeof(from.ss);
        fd = accept4(tp->listen_fd, (struct sockaddr *)&from.ss, &from.len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if ((errno == EINTR) || (errno == ECONNABORTED) || (errno == EPROTO)) {
                continue;
            }
            if ((errno != EAGAIN) && (errno != EWOULDBLOCK)) {
                GS_WARN("tcp: accept on rank %d failed: %s", tp->rank, strerror(errno));
            }
            return;
        }
        for (int i = 0; (i < HS_MAX_INCOMING) && (s == NULL); i++) {
            s = (ctx->in[i].state == HS_FREE) ? &ctx->in[i] : NULL;
        }
        if (s == NULL) {
            /* Make room by dropping an unfinished handshake, in turn. */
            s = &ctx->in[ctx->evict];
            ctx->evict = (ctx->evict + 1) % HS_MAX_INCOMING;
            if (s->peer >= 0) {
                ctx->claimed[s->peer * tp->max_conns + s->index] = false;
            }
            in_reject(ctx, s, GS_TCP_HS_OK, "too many unfinished handshakes");
        }
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
        if (tp->tls_ctx != NULL) {
            s->ssl = gs__tcp_tls_new(tp->tls_ctx, fd, false);
            s->state = HS_IN_TLS;
            s->tls_events = POLLIN;
            if (s->ssl == NULL) {
                in_reject(ctx, s, GS_TCP_HS_OK, "out of memory for a TLS session");
                continue;
            }
        }
        if (slot_register(ctx, s) != GS_OK) {
            in_reject(ctx, s, GS_TCP_HS_OK, gs__error_get());
            continue;
        }
        slot_drive(ctx, s, now);
    }
}

/* Start the outgoing slots whose time has come; give up on peers past their
 * deadline. */
static void out_tick(struct gs__tcp_setup *ctx, uint64_t now)
{
    gs__tp_t *tp = ctx->tp;

    ctx->next_ns = UINT64_MAX;
    for (int p = 0; p < tp->size; p++) {
        if ((ctx->out[p] != NULL) &&
            ((tp->peers[p].link == GS_TCP_LINK_UP) || (tp->peers[p].fail_status != GS_OK))) {
            free(ctx->out[p]); /* every slot was handed over, or the peer failed */
            ctx->out[p] = NULL;
        }
        for (int i = 0; (ctx->out[p] != NULL) && (i < tp->peers[p].nconns); i++) {
            hs_slot_t *s = &ctx->out[p][i];

            if (s->state != HS_OUT_RETRY) {
                continue;
            }
            if (now >= ctx->deadline[p]) {
                gs__tcp_peer_fail(tp, p, GS_ERR_TIMEOUT,
                                  "could not connect to rank %d at %s within %llu ms (last "
                                  "attempt: %.80s); it is not running, is stuck, or listens "
                                  "elsewhere (GS_DEBUG_SUBSYS=NET logs each attempt)",
                                  p, s->text,
                                  (unsigned long long)(tp->link_timeout_ns / 1000000ull),
                                  (s->why[0] != '\0') ? s->why : "none");
                break; /* the failure closed the slots */
            }
            if (s->retry_at <= now) {
                gs_status_t status = out_start(ctx, s, now);

                if (status == GS_OK) {
                    slot_drive(ctx, s, now);
                } else {
                    slot_close(ctx, s);
                    s->state = HS_FREE;
                    hs_fail(ctx, p, status);
                    break;
                }
            }
            if ((ctx->out[p] != NULL) && (s->state == HS_OUT_RETRY)) {
                ctx->next_ns = (s->retry_at < ctx->next_ns) ? s->retry_at : ctx->next_ns;
            }
        }
    }
}

/* One pass over what the setup epoll set reports (waiting up to timeout_ms),
 * then the retries that are due. */
static void hs_pass(struct gs__tcp_setup *ctx, int timeout_ms)
{
    struct epoll_event evs[HS_EVENTS];
    uint64_t now;
    int n = epoll_wait(ctx->epfd, evs, HS_EVENTS, timeout_ms);

    now = gs__now_ns();
    for (int i = 0; i < n; i++) {
        hs_slot_t *s = (hs_slot_t *)evs[i].data.ptr;

        if (s == NULL) {
            in_accept(ctx, now);
        } else {
            slot_drive(ctx, s, now);
        }
    }
    if (now >= ctx->next_ns) {
        out_tick(ctx, now);
    }
}

/* ---------------------------------------------------------------------- */
/* The interface (tcp_conn.h)                                             */
/* ---------------------------------------------------------------------- */

gs_status_t gs__tcp_hs_open(gs__tp_t *tp, char (*addrs)[GS_TP_ADDR_MAX])
{
    struct gs__tcp_setup *ctx = calloc(1, sizeof(*ctx));
    struct epoll_event ev;

    if (ctx == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "tcp: out of memory for connection setup");
    }
    ctx->tp = tp;
    ctx->epfd = -1;
    ctx->next_ns = UINT64_MAX;
    tp->hs = ctx;
    ctx->addrs = calloc((size_t)tp->size, GS_TP_ADDR_MAX);
    ctx->out = calloc((size_t)tp->size, sizeof(*ctx->out));
    ctx->deadline = calloc((size_t)tp->size, sizeof(*ctx->deadline));
    ctx->claimed = calloc((size_t)tp->size * (size_t)tp->max_conns, sizeof(bool));
    if ((ctx->addrs == NULL) || (ctx->out == NULL) || (ctx->deadline == NULL) ||
        (ctx->claimed == NULL)) {
        return gs__error_set(GS_ERR_NO_MEMORY, "tcp: out of memory for connection setup");
    }
    for (int i = 0; i < HS_MAX_INCOMING; i++) {
        ctx->in[i].fd = -1;
        ctx->in[i].peer = -1;
    }
    for (int p = 0; (addrs != NULL) && (p < tp->size); p++) {
        if (memchr(addrs[p], '\0', GS_TP_ADDR_MAX) == NULL) {
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "tcp: the address of rank %d is not NUL-terminated", p);
        }
        memcpy(ctx->addrs[p], addrs[p], GS_TP_ADDR_MAX);
        if (p != tp->rank) {
            gs__tcp_rails_peer(tp, p, ctx->addrs[p]); /* its rails, paired with ours */
        }
    }
    ctx->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (ctx->epfd < 0) {
        return gs__error_set(GS_ERR_SYSTEM, "tcp: epoll_create1 for connection setup failed: %s",
                             strerror(errno));
    }
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data.ptr = NULL; /* the listening socket */
    if (epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, tp->listen_fd, &ev) != 0) {
        return gs__error_set(GS_ERR_SYSTEM, "tcp: epoll_ctl(listen) failed: %s", strerror(errno));
    }
    ev.events = EPOLLIN;
    ev.data.ptr = ctx; /* poll_once: a connection being set up has news */
    if (epoll_ctl(tp->epfd, EPOLL_CTL_ADD, ctx->epfd, &ev) != 0) {
        return gs__error_set(GS_ERR_SYSTEM, "tcp: epoll_ctl(setup set) failed: %s",
                             strerror(errno));
    }
    return GS_OK;
}

void gs__tcp_hs_close(gs__tp_t *tp)
{
    struct gs__tcp_setup *ctx = tp->hs;

    if (ctx == NULL) {
        return;
    }
    for (int i = 0; i < HS_MAX_INCOMING; i++) {
        if (ctx->in[i].state != HS_FREE) {
            GS_INFO(NET, "tcp: closing an unfinished handshake from %s", ctx->in[i].text);
        }
        slot_close(ctx, &ctx->in[i]);
    }
    for (int p = 0; (ctx->out != NULL) && (p < tp->size); p++) {
        for (int i = 0; (ctx->out[p] != NULL) && (i < tp->peers[p].nconns); i++) {
            slot_close(ctx, &ctx->out[p][i]);
        }
        free(ctx->out[p]);
    }
    if (ctx->epfd >= 0) {
        if (tp->epfd >= 0) {
            (void)epoll_ctl(tp->epfd, EPOLL_CTL_DEL, ctx->epfd, NULL);
        }
        close(ctx->epfd);
    }
    free(ctx->claimed);
    free(ctx->deadline);
    free(ctx->out);
    free(ctx->addrs);
    free(ctx);
    tp->hs = NULL;
}

bool gs__tcp_hs_is(const gs__tp_t *tp, const void *ptr)
{
    return (tp->hs != NULL) && (ptr == (const void *)tp->hs);
}

void gs__tcp_hs_learn(gs__tp_t *tp, int peer, const char *addr)
{
    if ((tp->hs != NULL) && (peer >= 0) && (peer < tp->size)) {
        snprintf(tp->hs->addrs[peer], GS_TP_ADDR_MAX, "%s", addr);
        if ((peer != tp->rank) && (tp->peers[peer].link == GS_TCP_LINK_NONE)) {
            gs__tcp_rails_peer(tp, peer, tp->hs->addrs[peer]);
        }
    }
}

void gs__tcp_hs_want(gs__tp_t *tp, int peer, bool initiate)
{
    struct gs__tcp_setup *ctx = tp->hs;
    gs__tcp_peer_t *p = &tp->peers[peer];
    const uint64_t now = gs__now_ns();
    hs_slot_t *out;
    bool defer;

    if ((ctx == NULL) || (p->link != GS_TCP_LINK_NONE) || (p->fail_status != GS_OK)) {
        return;
    }
    if (tp->connected) {
        hs_pass(ctx, 0); /* its HELLO may be waiting: then it is the peer's link */
        if ((p->link != GS_TCP_LINK_NONE) || (p->fail_status != GS_OK)) {
            return;
        }
    }
    if (!initiate) {
        p->link = GS_TCP_LINK_IN;
        return;
    }
    if (ctx->addrs[peer][0] == '\0') {
        gs__tcp_peer_fail(tp, peer, GS_ERR_INTERNAL,
                          "tcp: rank %d has no address for rank %d (the bootstrap did not give it)",
                          tp->rank, peer);
        return;
    }
    out = calloc((size_t)p->nconns, sizeof(*out));
    if (out == NULL) {
        gs__tcp_peer_fail(tp, peer, GS_ERR_NO_MEMORY, "tcp: out of memory connecting to rank %d",
                          peer);
        return;
    }
    ctx->out[peer] = out;
    ctx->deadline[peer] = now + tp->link_timeout_ns;
    p->link = GS_TCP_LINK_OUT;
    /* Lazy, to a higher rank: give its own attempt a head start. */
    defer = tp->lazy && (peer > tp->rank);
    for (int i = 0; i < p->nconns; i++) {
        hs_slot_t *s = &out[i];

        s->fd = -1;
        s->peer = peer;
        s->index = i;
        s->state = HS_OUT_RETRY;
        s->retry_at = defer ? now + (uint64_t)HS_DEFER_MS * 1000000ull : now;
        s->backoff_ms = HS_RETRY_MIN_MS;
        snprintf(s->text, sizeof(s->text), "%s", ctx->addrs[peer]);
    }
    ctx->next_ns = (out[0].retry_at < ctx->next_ns) ? out[0].retry_at : ctx->next_ns;
    if (!defer) {
        out_tick(ctx, now);
    }
}

void gs__tcp_hs_forget(gs__tp_t *tp, int peer)
{
    struct gs__tcp_setup *ctx = tp->hs;

    if (ctx == NULL) {
        return;
    }
    /* The slots stay allocated until out_tick: an event of this pass may
     * still point at one. */
    for (int i = 0; (ctx->out[peer] != NULL) && (i < tp->peers[peer].nconns); i++) {
        slot_close(ctx, &ctx->out[peer][i]);
        ctx->out[peer][i].state = HS_FREE;
    }
    for (int i = 0; i < HS_MAX_INCOMING; i++) {
        if ((ctx->in[i].state != HS_FREE) && (ctx->in[i].peer == peer)) {
            ctx->claimed[(size_t)peer * (size_t)tp->max_conns + (size_t)ctx->in[i].index] = false;
            slot_close(ctx, &ctx->in[i]);
            ctx->in[i].state = HS_FREE;
        }
    }
}

void gs__tcp_hs_poll(gs__tp_t *tp)
{
    if (tp->hs != NULL) {
        hs_pass(tp->hs, 0);
    }
}

uint64_t gs__tcp_hs_next_ns(const gs__tp_t *tp)
{
    return (tp->hs != NULL) ? tp->hs->next_ns : UINT64_MAX;
}

void gs__tcp_hs_tick(gs__tp_t *tp, uint64_t now)
{
    if ((tp->hs != NULL) && (now >= tp->hs->next_ns)) {
        out_tick(tp->hs, now);
    }
}

/* Text listing the ranks of @p peers whose link is not up, for the timeout. */
static void missing_ranks(const struct gs__tcp_setup *ctx, const int *peers, int n, char *buf,
                          size_t len)
{
    const gs__tp_t *tp = ctx->tp;
    size_t off = 0;
    int count = 0;

    buf[0] = '\0';
    for (int k = 0; (k < n) && (off + 16 < len); k++) {
        const int p = peers[k];
        const hs_slot_t *at = (ctx->out[p] != NULL) ? &ctx->out[p][0] : NULL;
        int nn;

        if (tp->peers[p].link == GS_TCP_LINK_UP) {
            continue;
        }
        /* Our connects to it: where, and what the last attempt got. */
        nn = snprintf(buf + off, len - off, "%s%d%s%s (%d/%d sockets%s%.60s)",
                      (count > 0) ? ", " : "", p, (at != NULL) ? " at " : "",
                      (at != NULL) ? at->text : "", tp->peers[p].nup, tp->peers[p].nconns,
                      ((at != NULL) && (at->why[0] != '\0')) ? "; last attempt: " : "",
                      ((at != NULL) && (at->why[0] != '\0')) ? at->why : "");
        off += (nn > 0) ? (size_t)nn : 0;
        if (off >= len) {
            break;
        }
        count++;
    }
}

gs_status_t gs__tcp_hs_wait(gs__tp_t *tp, const int *peers, int n, uint64_t deadline_ns)
{
    struct gs__tcp_setup *ctx = tp->hs;
    const uint64_t start = gs__now_ns();

    for (;;) {
        struct pollfd pfd[2] = {{.fd = ctx->epfd, .events = POLLIN},
                                {.fd = tp->evfd, .events = POLLIN}};
        uint64_t now = gs__now_ns();
        uint64_t wake = deadline_ns;
        bool all_up = true;

        for (int k = 0; k < n; k++) {
            const gs__tcp_peer_t *p = &tp->peers[peers[k]];

            if (p->fail_status != GS_OK) {
                return gs__error_set(p->fail_status, "tcp: rank %d: %s", tp->rank, p->reason);
            }
            all_up = all_up && (p->link == GS_TCP_LINK_UP);
        }
        if (all_up) {
            return GS_OK;
        }
        if (atomic_load(&tp->aborted)) {
            return gs__error_set(GS_ERR_ABORTED, "tcp: rank %d: connect aborted", tp->rank);
        }
        if (now >= deadline_ns) {
            char missing[512];

            missing_ranks(ctx, peers, n, missing, sizeof(missing));
            return gs__error_set(GS_ERR_TIMEOUT,
                                 "tcp: rank %d timed out after %llu ms connecting; still missing "
                                 "ranks %s (a rank that refuses connections is not running, "
                                 "crashed or listens elsewhere; GS_DEBUG_SUBSYS=NET logs each "
                                 "attempt, GS_SOCKET_IFNAME picks the interface)",
                                 tp->rank, (unsigned long long)((now - start) / 1000000u), missing);
        }
        wake = (ctx->next_ns < wake) ? ctx->next_ns : wake;
        {
            int ms = gs__ms_until(wake, now);

            ms = (ms > HS_WAIT_SLICE_MS) ? HS_WAIT_SLICE_MS : ms;
            if ((poll(pfd, 2, ms) < 0) && (errno != EINTR)) {
                return gs__error_set(GS_ERR_SYSTEM, "tcp: poll while connecting failed: %s",
                                     strerror(errno));
            }
        }
        hs_pass(ctx, 0);
    }
}
