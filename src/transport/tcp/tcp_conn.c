/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TCP data path, send half and shared bookkeeping, run by the worker
 * thread only: request completion, the posted and unexpected lists, peer
 * failure (close the sockets, fail every request involved), and per-socket
 * send queues written through the connection's byte pipe (tcp_pipe.h:
 * header and payload gathered, many frames per call). The receive state machine and matching are in tcp_recv.c,
 * connection setup in tcp_handshake.c, the request calls in tcp_transport.c.
 */
#include "transport/tcp/tcp_conn.h"

#include "core/error.h"
#include "core/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

/* ---------------------------------------------------------------------- */
/* Requests                                                               */
/* ---------------------------------------------------------------------- */

static void finish(gs_tp_t *tp, struct gs_tp_req *req, gs_status_t status)
{
    req->state = GS_TCP_REQ_DONE;
    req->comp.status = status;
    tp->nevents++;
    if ((status == GS_OK) && (tp->counters != NULL)) {
        if (req->kind == GS_TCP_REQ_SEND) {
            gs__counter_add(&tp->counters->bytes_sent, req->comp.nbytes);
            gs__counter_add(&tp->counters->msgs_sent, 1);
        } else {
            gs__counter_add(&tp->counters->bytes_received, req->comp.nbytes);
            gs__counter_add(&tp->counters->msgs_received, 1);
        }
    }
}

void gs__tcp_req_complete(gs_tp_t *tp, struct gs_tp_req *req, gs_status_t status,
                          const char *reason)
{
    if (req->state == GS_TCP_REQ_DONE) {
        return;
    }
    if ((status != GS_OK) && (reason != NULL)) {
        req->reason_buf = strdup(reason);
        req->reason = (req->reason_buf != NULL) ? req->reason_buf : gs_strerror(status);
    }
    finish(tp, req, status);
}

void gs__tcp_req_fail_ref(gs_tp_t *tp, struct gs_tp_req *req, gs_status_t status,
                          const char *reason)
{
    if (req->state == GS_TCP_REQ_DONE) {
        return;
    }
    req->reason = reason;
    finish(tp, req, status);
}

void gs__tcp_posted_unlink(gs_tp_t *tp, struct gs_tp_req *r)
{
    if (r->prev != NULL) {
        r->prev->next = r->next;
    } else {
        tp->posted_head = r->next;
    }
    if (r->next != NULL) {
        r->next->prev = r->prev;
    } else {
        tp->posted_tail = r->prev;
    }
    r->next = NULL;
    r->prev = NULL;
}

void gs__tcp_unexp_unlink(gs_tp_t *tp, gs__tcp_inmsg_t *m)
{
    gs__match_remove(&tp->unexp, &m->ue);
}

static uint64_t active_hash(const gs_tp_t *tp, int peer, uint64_t seq)
{
    return gs__htab_hash(&tp->active, seq, (uint64_t)peer);
}

gs_status_t gs__tcp_active_add(gs_tp_t *tp, gs__tcp_inmsg_t *m)
{
    gs__tcp_peer_t *p = &tp->peers[m->peer];

    if (gs__htab_insert(&tp->active, &m->anode, active_hash(tp, m->peer, m->seq)) != GS_OK) {
        return GS_ERR_NO_MEMORY;
    }
    m->prev = NULL;
    m->next = p->active;
    if (p->active != NULL) {
        p->active->prev = m;
    }
    p->active = m;
    m->in_active = true;
    return GS_OK;
}

void gs__tcp_active_unlink(gs_tp_t *tp, gs__tcp_inmsg_t *m)
{
    gs__tcp_peer_t *p = &tp->peers[m->peer];

    if (!m->in_active) {
        return;
    }
    gs__htab_remove(&tp->active, &m->anode);
    if (m->prev != NULL) {
        m->prev->next = m->next;
    } else {
        p->active = m->next;
    }
    if (m->next != NULL) {
        m->next->prev = m->prev;
    }
    m->next = NULL;
    m->prev = NULL;
    m->in_active = false;
}

gs__tcp_inmsg_t *gs__tcp_active_find(gs_tp_t *tp, int peer, uint64_t seq)
{
    const uint64_t h = active_hash(tp, peer, seq);

    for (gs__hnode_t *n = gs__htab_first(&tp->active, h); n != NULL; n = gs__htab_next(n)) {
        gs__tcp_inmsg_t *m = (gs__tcp_inmsg_t *)((char *)n - offsetof(gs__tcp_inmsg_t, anode));

        if ((m->peer == peer) && (m->seq == seq)) {
            return m;
        }
    }
    return NULL;
}

void gs__tcp_msg_free_buf(gs_tp_t *tp, gs__tcp_inmsg_t *m)
{
    if (m->dest == GS_TCP_DEST_UNEXP) {
        free(m->buf);
        m->buf = NULL;
        gs__match_budget_release(&tp->held, m->total, 0);
        m->charged -= m->total;
        m->dest = GS_TCP_DEST_DRAIN; /* nothing to hold the payload in any more */
    }
}

void gs__tcp_msg_free(gs_tp_t *tp, gs__tcp_inmsg_t *m)
{
    gs__tcp_unexp_unlink(tp, m);
    gs__tcp_active_unlink(tp, m);
    free(m->buf);
    gs__match_budget_release(&tp->held, m->charged, 1);
    free(m);
}

/* ---------------------------------------------------------------------- */
/* Peer failure                                                           */
/* ---------------------------------------------------------------------- */

void gs__tcp_conn_close(gs_tp_t *tp, gs__tcp_conn_t *c)
{
    if (c->fd < 0) {
        return;
    }
    epoll_ctl(tp->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    if (c->pipe->close != NULL) {
        c->pipe->close(c);
    }
    close(c->fd);
    c->fd = -1;
    c->events = 0;
    if (c->kicked) {
        c->kicked = false;
        tp->nkicked--;
    }
}

static void peer_fail_quiet(gs_tp_t *tp, int peer, gs_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/*
 * Tell every other healthy peer that rank x failed, with a DOWN frame on
 * each of its sockets: the receiver may be parked on some of them (not
 * reading until an earlier message starts elsewhere), and it must meet a
 * DOWN before the BYE or close that follows on any socket it does read.
 */
static void report_down(gs_tp_t *tp, int x)
{
    for (int q = 0; q < tp->size; q++) {
        /* A failed send below may fail q or others: re-check every time. */
        for (int i = 0; (q != tp->rank) && (q != x) && (i < tp->nsocks); i++) {
            gs__tcp_conn_t *c = &tp->peers[q].conns[i];

            if ((c->fd >= 0) && (tp->peers[q].fail_status == GS_OK)) {
                gs__tcp_queue_down(tp, c, x);
            }
        }
    }
}

void gs__tcp_queue_down(gs_tp_t *tp, gs__tcp_conn_t *c, int failed)
{
    gs__tcp_frame_t *f = calloc(1, sizeof(*f));
    gs__tcp_frame_hdr_t hdr;

    if (f == NULL) {
        GS_WARN("tcp: rank %d: out of memory telling peer %d that rank %d failed", tp->rank,
                c->peer, failed);
        return;
    }
    memset(&hdr, 0, sizeof(hdr));
    hdr.type = GS_TCP_FRAME_DOWN;
    hdr.tag = (uint64_t)failed;
    gs__tcp_frame_encode(&hdr, f->hdr);
    f->owned = true;
    gs__tcp_conn_queue(tp, c, f);
}

static void peer_fail_va(gs_tp_t *tp, int peer, gs_status_t status, bool remote, const char *fmt,
                         va_list ap) __attribute__((format(printf, 5, 0)));

/* One HEARTBEAT frame on socket 0 of peer p (owned; skipped when out of memory). */
static void queue_heartbeat(gs_tp_t *tp, gs__tcp_conn_t *c)
{
    gs__tcp_frame_t *f = calloc(1, sizeof(*f));
    gs__tcp_frame_hdr_t hdr;

    if (f == NULL) {
        return; /* the next tick tries again */
    }
    memset(&hdr, 0, sizeof(hdr));
    hdr.type = GS_TCP_FRAME_HEARTBEAT;
    gs__tcp_frame_encode(&hdr, f->hdr);
    f->owned = true;
    gs__tcp_conn_queue(tp, c, f);
}

void gs__tcp_heartbeat_tick(gs_tp_t *tp, uint64_t now)
{
    const uint64_t silence = tp->hb_ns * GS_TCP_HEARTBEAT_MISSES;
    bool blind;

    if ((tp->hb_ns == 0) || !tp->connected || tp->leaving ||
        atomic_load_explicit(&tp->aborted, memory_order_relaxed)) {
        tp->hb_next_ns = UINT64_MAX;
        return;
    }
    /* Ticks come every quarter interval while anyone drives the transport
     * (the worker does while idle). A longer gap means this process was not
     * looking (stopped, or starved of the CPU): what arrived meanwhile sits
     * unread, so the peers' silence over the gap is not held against them. */
    blind = (tp->hb_tick_ns == 0) || (now - tp->hb_tick_ns > tp->hb_ns);
    tp->hb_tick_ns = now;
    tp->hb_next_ns = now + tp->hb_ns / 4u;
    for (int q = 0; q < tp->size; q++) {
        gs__tcp_peer_t *p = &tp->peers[q];
        gs__tcp_conn_t *c;

        if ((q == tp->rank) || (p->fail_status != GS_OK)) {
            continue;
        }
        if (blind || p->rx_seen) {
            p->last_rx_ns = now;
            p->rx_seen = false;
        } else if (tp->hb_judge && (now - p->last_rx_ns >= silence)) {
            gs__tcp_peer_fail(tp, q, GS_ERR_PEER_FAILED,
                              "no heartbeat from rank %d for %llu ms (GS_HEARTBEAT_MS=%llu, "
                              "failed after %d silent intervals): its host is frozen, stopped "
                              "or unreachable",
                              q, (unsigned long long)((now - p->last_rx_ns) / 1000000ull),
                              (unsigned long long)(tp->hb_ns / 1000000ull),
                              GS_TCP_HEARTBEAT_MISSES);
            continue;
        }
        if (p->tx_seen) {
            p->last_tx_ns = now;
            p->tx_seen = false;
            continue;
        }
        c = &p->conns[0];
        /* Frames already queued will reach it (or it is not reading). After
         * a blind gap the peer may be close to its own limit: beat now. */
        if ((blind || (now - p->last_tx_ns >= tp->hb_ns)) && (c->fd >= 0) && (c->sq_head == NULL)) {
            queue_heartbeat(tp, c);
            p->last_tx_ns = now;
            p->tx_seen = false;
        }
    }
}

static void peer_fail_va(gs_tp_t *tp, int peer, gs_status_t status, bool remote, const char *fmt,
                         va_list ap)
{
    gs__tcp_peer_t *p = &tp->peers[peer];
    char down[GS_TCP_REASON_MAX + 32]; /* truncated to GS_TCP_REASON_MAX by go_down */

    if (p->fail_status != GS_OK) {
        return;
    }
    vsnprintf(p->reason, sizeof(p->reason), fmt, ap);
    if (remote && (status == GS_ERR_PEER_FAILED) && tp->connected && (tp->down_status == GS_OK) &&
        !p->reading_last) {
        /* Before blaming the peer for a broken connection, read what it sent
         * before that: a DOWN naming the rank that really failed (or a BYE)
         * may still sit unread on one of its sockets. A read that fails the
         * peer itself lands here again and goes straight on. */
        char saved[GS_TCP_REASON_MAX];

        memcpy(saved, p->reason, sizeof(saved));
        p->reading_last = true;
        for (int i = 0; (i < tp->nsocks) && (p->fail_status == GS_OK); i++) {
            if ((p->conns[i].fd >= 0) && (p->conns[i].rstate != GS_TCP_RS_PARKED)) {
                gs__tcp_conn_read(tp, &p->conns[i]);
            }
        }
        p->reading_last = false;
        if (p->fail_status != GS_OK) {
            return;
        }
        memcpy(p->reason, saved, sizeof(saved));
    }
    if (status != GS_ERR_ABORTED) {
        GS_WARN("tcp: rank %d: %s", tp->rank, p->reason);
    }
    peer_fail_quiet(tp, peer, status, "%s", p->reason);
    /* Only the first failure is reported: once down, later ones are most
     * likely its echoes (survivors leaving), and blaming them would mislead. */
    if (!remote || ((status != GS_ERR_PEER_FAILED) && (status != GS_ERR_PROTOCOL)) ||
        !tp->connected || tp->leaving || (tp->down_status != GS_OK) ||
        atomic_load_explicit(&tp->aborted, memory_order_relaxed)) {
        return;
    }
    snprintf(down, sizeof(down), "rank %d failed (%s)", peer, p->reason);
    gs__tcp_go_down(tp, peer, down);
    report_down(tp, peer);
}

void gs__tcp_peer_fail(gs_tp_t *tp, int peer, gs_status_t status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    peer_fail_va(tp, peer, status, true, fmt, ap);
    va_end(ap);
}

void gs__tcp_peer_drop(gs_tp_t *tp, int peer, gs_status_t status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    peer_fail_va(tp, peer, status, false, fmt, ap);
    va_end(ap);
}

void gs__tcp_go_down(gs_tp_t *tp, int failed, const char *reason)
{
    size_t n = strnlen(reason, sizeof(tp->down_reason) - 1);

    if (tp->down_status != GS_OK) {
        return;
    }
    memcpy(tp->down_reason, reason, n); /* truncates a long reason */
    tp->down_reason[n] = '\0';
    tp->down_status = GS_ERR_PEER_FAILED;
    tp->down_rank = failed;
    tp->nevents++;
    GS_WARN("tcp: rank %d: %s; every pending and later receive fails", tp->rank, reason);
    gs__tcp_recv_go_down(tp);
}

/* A peer that said goodbye is normal at shutdown: INFO, not WARN. */
void gs__tcp_peer_left(gs_tp_t *tp, int peer)
{
    if (tp->peers[peer].fail_status == GS_OK) {
        GS_INFO(NET, "tcp: rank %d: peer %d left the communicator", tp->rank, peer);
    }
    peer_fail_quiet(tp, peer, GS_ERR_PEER_FAILED, "peer %d left the communicator", peer);
}

static void peer_fail_quiet(gs_tp_t *tp, int peer, gs_status_t status, const char *fmt, ...)
{
    gs__tcp_peer_t *p = &tp->peers[peer];
    char reason[GS_TCP_REASON_MAX];
    struct gs_tp_req *r;
    struct gs_tp_req *rnext;
    const char *why;
    va_list ap;

    if (p->fail_status != GS_OK) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    memcpy(p->reason, reason, sizeof(reason));
    p->fail_status = status;
    why = gs__tcp_peer_why(tp, p);
    tp->nfailed++;
    tp->nevents++;
    for (int i = 0; i < tp->nsocks; i++) {
        gs__tcp_conn_t *c = &p->conns[i];
        gs__tcp_frame_t *f = c->sq_head;

        gs__tcp_conn_close(tp, c);
        while (f != NULL) {
            gs__tcp_frame_t *fnext = f->next;

            if (f->owned) {
                free(f);
            } else if (f->req != NULL) {
                gs__tcp_req_fail_ref(tp, f->req, status, why);
            }
            f = fnext;
        }
        c->sq_head = NULL;
        c->sq_tail = NULL;
        c->sq_bytes = 0;
        c->rmsg = NULL;
        c->rdst = NULL;
        c->rstate = GS_TCP_RS_HDR;
        c->rpos = 0;
        c->rlen = 0;
    }
    p->nparked = 0;
    while (p->active != NULL) {
        gs__tcp_inmsg_t *m = p->active;

        if (m->req != NULL) {
            m->req->msg = NULL;
            gs__tcp_req_fail_ref(tp, m->req, status, why);
        }
        gs__tcp_msg_free(tp, m);
    }
    for (r = tp->posted_head; r != NULL; r = rnext) {
        rnext = r->next;
        if ((r->peer == peer) || (r->peer == GS_ANY_SOURCE)) {
            gs__tcp_posted_unlink(tp, r);
            gs__tcp_req_fail_ref(tp, r, status, why);
        }
    }
}

/* ---------------------------------------------------------------------- */
/* Send side                                                              */
/* ---------------------------------------------------------------------- */

void gs__tcp_conn_update_events(gs_tp_t *tp, gs__tcp_conn_t *c)
{
    struct epoll_event ev;
    unsigned want = 0;

    if ((c->fd < 0) || (tp->epfd < 0) || !tp->connected) {
        return;
    }
    if (c->rstate != GS_TCP_RS_PARKED) {
        want |= EPOLLIN;
    }
    if ((c->sq_head != NULL) && c->pipe->poll_out) {
        want |= EPOLLOUT; /* else the pipe's peer announces room (a ring's doorbell) */
    }
    if (want == c->events) {
        return;
    }
    memset(&ev, 0, sizeof(ev));
    ev.events = want;
    ev.data.ptr = c;
    if (epoll_ctl(tp->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0) {
        c->events = want;
    } else {
        gs__tcp_peer_drop(tp, c->peer, GS_ERR_PEER_FAILED,
                          "epoll_ctl on the socket to peer %d failed: %s", c->peer,
                          strerror(errno));
    }
}

static void frame_written(gs_tp_t *tp, gs__tcp_frame_t *f)
{
    struct gs_tp_req *req = f->req;

    if (f->owned) {
        free(f);
        return;
    }
    if ((req != NULL) && (--req->frames_left == 0)) {
        gs__tcp_req_complete(tp, req, GS_OK, NULL);
    }
}

static void send_error(gs_tp_t *tp, gs__tcp_conn_t *c, int err)
{
    if ((err == ECONNRESET) || (err == EPIPE)) {
        gs__tcp_peer_fail(tp, c->peer, GS_ERR_PEER_FAILED, "connection reset by peer %d", c->peer);
    } else {
        gs__tcp_peer_fail(tp, c->peer, GS_ERR_PEER_FAILED, "sending to peer %d failed: %s", c->peer,
                          strerror(err));
    }
}

/* A write that must be retried (TLS) has sealed the first @p bytes of the
 * queue: their sends may no longer be cancelled as if never started. */
static void pipe_commit(gs__tcp_conn_t *c, size_t bytes)
{
    for (gs__tcp_frame_t *f = c->sq_head; (f != NULL) && (bytes > 0); f = f->next) {
        uint64_t left = GS_TCP_FRAME_HDR_LEN + f->payload_len - f->sent;

        if (f->req != NULL) {
            f->req->on_wire = true;
        }
        bytes -= (bytes < left) ? bytes : (size_t)left;
    }
}

void gs__tcp_conn_flush(gs_tp_t *tp, gs__tcp_conn_t *c)
{
    int budget = GS_TCP_IO_BUDGET;
    bool wrote = false;

    while ((c->sq_head != NULL) && (c->fd >= 0) && (budget-- > 0)) {
        struct iovec iov[GS_TCP_IOV_MAX];
        gs__tcp_pipe_res_t res;
        size_t niov = 0;
        size_t want = 0;
        bool short_write = false;
        ssize_t n;

        for (gs__tcp_frame_t *f = c->sq_head; (f != NULL) && (niov + 2 <= GS_TCP_IOV_MAX);
             f = f->next) {
            if (f->sent < GS_TCP_FRAME_HDR_LEN) {
                iov[niov].iov_base = f->hdr + f->sent;
                iov[niov].iov_len = GS_TCP_FRAME_HDR_LEN - (size_t)f->sent;
                want += iov[niov].iov_len;
                niov++;
                if (f->payload_len > 0) {
                    iov[niov].iov_base = (void *)f->payload;
                    iov[niov].iov_len = (size_t)f->payload_len;
                    want += iov[niov].iov_len;
                    niov++;
                }
            } else {
                uint64_t off = f->sent - GS_TCP_FRAME_HDR_LEN;

                iov[niov].iov_base = (void *)(f->payload + off);
                iov[niov].iov_len = (size_t)(f->payload_len - off);
                want += iov[niov].iov_len;
                niov++;
            }
        }
        res.err = 0;
        res.committed = 0;
        n = c->pipe->writev(tp, c, iov, niov, &res);
        if (res.committed > (size_t)((n > 0) ? n : 0)) {
            pipe_commit(c, res.committed);
        }
        if (n == GS_TCP_PIPE_PROTO) {
            gs__tcp_peer_fail(tp, c->peer, GS_ERR_PROTOCOL, "sending to peer %d failed: %s",
                              c->peer, res.why);
            return;
        }
        if (n == GS_TCP_PIPE_ERR) {
            if (res.err == EINTR) {
                continue;
            }
            send_error(tp, c, res.err);
            return;
        }
        if (n <= 0) {
            /* AGAIN: EPOLLOUT, the sweep or a doorbell resumes it; FAILED:
             * the pipe failed the peer. */
            break;
        }
        wrote = true;
        c->sq_bytes -= (uint64_t)n;
        if ((size_t)n < want) {
            short_write = true;
        }
        while ((n > 0) && (c->sq_head != NULL)) {
            gs__tcp_frame_t *f = c->sq_head;
            uint64_t left = GS_TCP_FRAME_HDR_LEN + f->payload_len - f->sent;
            uint64_t take = ((uint64_t)n < left) ? (uint64_t)n : left;

            if (f->req != NULL) {
                f->req->on_wire = true;
            }
            f->sent += take;
            n -= (ssize_t)take;
            if (f->sent == GS_TCP_FRAME_HDR_LEN + f->payload_len) {
                c->sq_head = f->next;
                if (c->sq_head == NULL) {
                    c->sq_tail = NULL;
                }
                frame_written(tp, f);
            }
        }
        if (short_write) {
            break; /* the socket buffer is full; EPOLLOUT will say when to go on */
        }
    }
    if (wrote && (c->fd >= 0) && (c->pipe->wrote != NULL)) {
        c->pipe->wrote(tp, c);
    }
    gs__tcp_conn_update_events(tp, c);
}

void gs__tcp_conn_queue(gs_tp_t *tp, gs__tcp_conn_t *c, gs__tcp_frame_t *f)
{
    bool was_empty = (c->sq_head == NULL);

    f->next = NULL;
    f->sent = 0;
    if (c->sq_tail != NULL) {
        c->sq_tail->next = f;
    } else {
        c->sq_head = f;
    }
    c->sq_tail = f;
    c->sq_bytes += GS_TCP_FRAME_HDR_LEN + f->payload_len;
    tp->peers[c->peer].tx_seen = true;
    if (was_empty) {
        gs__tcp_conn_flush(tp, c); /* latency: try the write now */
    }
}

/*
 * While down, a send released mid-wire finishes from a private copy instead
 * of cutting the stream: a cut would look like a crash of this rank to the
 * receiver (which would then blame us, not the rank that failed) and would
 * drop the DOWN frames queued behind it. The data is the caller's, copied
 * before release returns, so the receiver gets exactly what was sent.
 * Returns false when out of memory (the caller cuts the stream).
 */
static bool send_detach(gs_tp_t *tp, struct gs_tp_req *req)
{
    gs__tcp_peer_t *p = &tp->peers[req->peer];

    for (int i = 0; i < tp->nsocks; i++) {
        gs__tcp_conn_t *c = &p->conns[i];

        for (gs__tcp_frame_t **pp = &c->sq_head; *pp != NULL; pp = &(*pp)->next) {
            gs__tcp_frame_t *f = *pp;
            gs__tcp_frame_t *copy;

            if (f->req != req) {
                continue;
            }
            copy = malloc(sizeof(*copy) + (size_t)f->payload_len);
            if (copy == NULL) {
                return false; /* frames copied so far are owned and freed with the queue */
            }
            memcpy(copy, f, sizeof(*copy));
            if (f->payload_len > 0) {
                memcpy(copy + 1, f->payload, (size_t)f->payload_len);
            }
            copy->payload = (const uint8_t *)(copy + 1);
            copy->req = NULL;
            copy->owned = true;
            *pp = copy;
            if (c->sq_tail == f) {
                c->sq_tail = copy;
            }
        }
    }
    GS_INFO(NET, "tcp: rank %d: a send to peer %d released mid-wire finishes from a copy", tp->rank,
            req->peer);
    return true;
}

void gs__tcp_send_cancel(gs_tp_t *tp, struct gs_tp_req *req)
{
    gs__tcp_peer_t *p = &tp->peers[req->peer];
    gs__tcp_frame_t *skip;
    gs__tcp_frame_hdr_t hdr;

    if (req->on_wire) {
        if ((tp->down_status != GS_OK) && send_detach(tp, req)) {
            return;
        }
        /* A receiver mid-message cannot resynchronise on this stream. */
        gs__tcp_peer_drop(tp, req->peer, GS_ERR_PEER_FAILED,
                          "a send to peer %d was cancelled after part of it was sent", req->peer);
        return;
    }
    for (int i = 0; i < tp->nsocks; i++) {
        gs__tcp_conn_t *c = &p->conns[i];
        gs__tcp_frame_t **pp = &c->sq_head;

        c->sq_tail = NULL;
        while (*pp != NULL) {
            gs__tcp_frame_t *f = *pp;

            if (f->req == req) {
                c->sq_bytes -= GS_TCP_FRAME_HDR_LEN + f->payload_len;
                *pp = f->next;
            } else {
                c->sq_tail = f;
                pp = &f->next;
            }
        }
    }
    if (p->fail_status != GS_OK) {
        return;
    }
    /* Tell the receiver this sequence number will never carry data. */
    skip = calloc(1, sizeof(*skip));
    if (skip == NULL) {
        gs__tcp_peer_fail(tp, req->peer, GS_ERR_NO_MEMORY,
                          "out of memory while cancelling a send to peer %d", req->peer);
        return;
    }
    memset(&hdr, 0, sizeof(hdr));
    hdr.type = GS_TCP_FRAME_SKIP;
    hdr.seq = req->seq;
    gs__tcp_frame_encode(&hdr, skip->hdr);
    skip->owned = true;
    gs__tcp_conn_queue(tp, &p->conns[0], skip);
}
