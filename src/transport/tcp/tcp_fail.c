/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What happens when a peer fails, run by the worker thread only: marking
 * it failed (closing its sockets, failing every request involving it),
 * reading what it sent before blaming it, reporting it to the other peers
 * with DOWN frames, and taking the instance down (every pending and later
 * receive fails, but for the survivors' recovery tags); also the heartbeat
 * that fails peers gone silent. Failure propagation is described in
 * tcp_conn.h. It does not detect broken sockets itself (the send half,
 * tcp_tx.c, and the receive half, tcp_rx.c, report them here) and does not
 * touch sends to live peers.
 */
#include "transport/tcp/tcp_conn.h"

#include "core/error.h"
#include "core/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------- */
/* Peer failure                                                           */
/* ---------------------------------------------------------------------- */

static void peer_fail_quiet(gs__tp_t *tp, int peer, gs_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/*
 * Tell every other healthy peer whose link is up (but @p skip, -1 for
 * none) that rank x failed, with a DOWN frame on
 * each of its sockets: the receiver may be parked on some of them (not
 * reading until an earlier message starts elsewhere), and it must meet a
 * DOWN before the BYE or close that follows on any socket it does read.
 */
void gs__tcp_report_down(gs__tp_t *tp, int x, int skip)
{
    for (int q = 0; q < tp->size; q++) {
        /* A failed send below may fail q or others: re-check every time. */
        for (int i = 0; (q != tp->rank) && (q != x) && (i < tp->peers[q].nconns); i++) {
            gs__tcp_conn_t *c = &tp->peers[q].conns[i];

            if ((c->fd >= 0) && (tp->peers[q].fail_status == GS_OK) &&
                (tp->peers[q].link == GS_TCP_LINK_UP) && (q != skip) &&
                tp->peers[q].rails[c->rail].up) {
                gs__tcp_queue_down(tp, c, x);
            }
        }
    }
}

void gs__tcp_queue_down(gs__tp_t *tp, gs__tcp_conn_t *c, int failed)
{
    if (!gs__tcp_queue_control(tp, c, GS_TCP_FRAME_DOWN, 0, (uint64_t)failed)) {
        GS_WARN("tcp: rank %d: out of memory telling peer %d that rank %d failed", tp->rank,
                c->peer, failed);
    }
}

static void peer_fail_va(gs__tp_t *tp, int peer, gs_status_t status, bool remote, const char *fmt,
                         va_list ap) __attribute__((format(printf, 5, 0)));

/* One HEARTBEAT frame on socket 0 of peer p (owned; skipped when out of memory). */
static void queue_heartbeat(gs__tp_t *tp, gs__tcp_conn_t *c)
{
    (void)gs__tcp_queue_control(tp, c, GS_TCP_FRAME_HEARTBEAT, 0, 0); /* else: the next tick */
}

void gs__tcp_heartbeat_tick(gs__tp_t *tp, uint64_t now)
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

        if ((q == tp->rank) || (p->fail_status != GS_OK) || (p->link != GS_TCP_LINK_UP)) {
            continue; /* only the links that are up are watched */
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
        if (p->nrails > 1) {
            gs__tcp_rails_publish(tp, q); /* a peer we only receive from has rails too */
        }
        if ((p->nrails > 1) && (blind || (now - p->rails_hb_ns >= tp->hb_ns))) {
            /* Every rail beats: a rail that carries nothing is watched too
             * (its TCP_USER_TIMEOUT needs bytes in flight to fire). */
            p->rails_hb_ns = now;
            for (int k = 0; k < p->nrails; k++) {
                gs__tcp_conn_t *rc = &p->conns[k * tp->nsocks];

                if (p->rails[k].up && (rc->fd >= 0) && (rc->sq_head == NULL)) {
                    queue_heartbeat(tp, rc);
                }
            }
        }
        if (p->tx_seen) {
            p->last_tx_ns = now;
            p->tx_seen = false;
            continue;
        }
        c = &p->conns[0];
        for (int i = 1; (i < p->nconns) && !p->rails[c->rail].up; i++) {
            c = &p->conns[i]; /* the first socket of a rail that is up */
        }
        /* Frames already queued will reach it (or it is not reading). After
         * a blind gap the peer may be close to its own limit: beat now. */
        if ((blind || (now - p->last_tx_ns >= tp->hb_ns)) && (c->fd >= 0) && (c->sq_head == NULL)) {
            queue_heartbeat(tp, c);
            p->last_tx_ns = now;
            p->tx_seen = false;
        }
    }
}

static void peer_fail_va(gs__tp_t *tp, int peer, gs_status_t status, bool remote, const char *fmt,
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
        for (int i = 0; (i < p->nconns) && (p->fail_status == GS_OK); i++) {
            if ((p->conns[i].fd >= 0) && (p->conns[i].rstate != GS_TCP_RS_PARKED) &&
                (p->link == GS_TCP_LINK_UP)) {
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
    gs__tcp_report_down(tp, peer, -1);
}

void gs__tcp_down_heard(gs__tp_t *tp, int x, int from)
{
    char reason[GS_TCP_REASON_MAX];
    const bool was_up = (tp->down_status == GS_OK);

    snprintf(reason, sizeof(reason), "rank %d failed (reported by rank %d)", x, from);
    gs__tcp_peer_drop(tp, x, GS_ERR_PEER_FAILED, "%s", reason);
    gs__tcp_go_down(tp, x, reason);
    /* Without a full mesh (GS_CONNECT=lazy) the reporter reaches only its
     * own links: pass it on, once (a rank already down passes nothing), so
     * that it floods the graph of links, which the ring keeps connected. */
    if (tp->lazy && was_up && !tp->leaving &&
        !atomic_load_explicit(&tp->aborted, memory_order_relaxed)) {
        gs__tcp_report_down(tp, x, from);
    }
}

void gs__tcp_peer_fail(gs__tp_t *tp, int peer, gs_status_t status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    peer_fail_va(tp, peer, status, true, fmt, ap);
    va_end(ap);
}

void gs__tcp_peer_drop(gs__tp_t *tp, int peer, gs_status_t status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    peer_fail_va(tp, peer, status, false, fmt, ap);
    va_end(ap);
}

static void go_down_as(gs__tp_t *tp, gs_status_t status, int rank, const char *reason)
{
    size_t n = strnlen(reason, sizeof(tp->down_reason) - 1);

    if (tp->down_status != GS_OK) {
        return;
    }
    memcpy(tp->down_reason, reason, n); /* truncates a long reason */
    tp->down_reason[n] = '\0';
    tp->down_status = status;
    tp->down_rank = rank;
    tp->nevents++;
    GS_WARN("tcp: rank %d: %s; every pending and later receive fails", tp->rank, reason);
    gs__tcp_recv_go_down(tp);
}

void gs__tcp_go_down(gs__tp_t *tp, int failed, const char *reason)
{
    go_down_as(tp, GS_ERR_PEER_FAILED, failed, reason);
}

void gs__tcp_revoke(gs__tp_t *tp, int by, int from)
{
    char reason[GS_TCP_REASON_MAX];

    if ((tp->revoked_by >= 0) || !tp->connected || tp->leaving) {
        return;
    }
    tp->revoked_by = by;
    tp->nevents++;
    if (by == tp->rank) {
        snprintf(reason, sizeof(reason), "rank %d revoked the communicator (gs_comm_revoke)", by);
    } else {
        snprintf(reason, sizeof(reason),
                 "rank %d revoked the communicator (gs_comm_revoke; told by rank %d)", by, from);
    }
    go_down_as(tp, GS_ERR_REVOKED, by, reason);
    if (atomic_load_explicit(&tp->aborted, memory_order_relaxed)) {
        return;
    }
    for (int q = 0; q < tp->size; q++) {
        if ((q != tp->rank) && (q != from) && (q != by)) {
            gs__tcp_queue_revoke(tp, q);
        }
    }
}

void gs__tcp_queue_revoke(gs__tp_t *tp, int q)
{
    gs__tcp_peer_t *p = &tp->peers[q];

    if ((p->fail_status != GS_OK) || (p->link != GS_TCP_LINK_UP)) {
        return;
    }
    /* On every socket, as DOWN: the peer may be parked on some of them. */
    for (int i = 0; i < p->nconns; i++) {
        gs__tcp_conn_t *c = &p->conns[i];

        if ((c->fd >= 0) && p->rails[c->rail].up &&
            !gs__tcp_queue_control(tp, c, GS_TCP_FRAME_REVOKE, 0, (uint64_t)tp->revoked_by)) {
            GS_WARN("tcp: rank %d: out of memory telling peer %d of the revoke", tp->rank, q);
        }
    }
}

gs_status_t gs__tcp_revoked_status(const gs__tp_t *tp)
{
    if (tp->revoked_by < 0) {
        return GS_OK;
    }
    return gs__error_set(GS_ERR_REVOKED, "rank %d revoked the communicator (gs_comm_revoke)",
                         tp->revoked_by);
}

/* A peer that said goodbye is normal at shutdown: INFO, not WARN. */
void gs__tcp_peer_left(gs__tp_t *tp, int peer)
{
    if (tp->peers[peer].fail_status == GS_OK) {
        GS_INFO(NET, "tcp: rank %d: peer %d left the communicator", tp->rank, peer);
    }
    peer_fail_quiet(tp, peer, GS_ERR_PEER_FAILED, "peer %d left the communicator", peer);
}

static void peer_fail_quiet(gs__tp_t *tp, int peer, gs_status_t status, const char *fmt, ...)
{
    gs__tcp_peer_t *p = &tp->peers[peer];
    char reason[GS_TCP_REASON_MAX];
    struct gs__tp_req *r;
    struct gs__tp_req *rnext;
    const char *why;
    va_list ap;

    if (p->fail_status != GS_OK) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    gs__tcp_acks_poll_peer(tp, peer); /* what reached it is sent, whatever follows */
    memcpy(p->reason, reason, sizeof(reason));
    p->fail_status = status;
    why = gs__tcp_peer_why(tp, p);
    tp->nfailed++;
    tp->nevents++;
    for (int i = 0; i < p->nconns; i++) {
        gs__tcp_conn_t *c = &p->conns[i];
        gs__tcp_frame_t *f = c->sq_head;

        /* Sends waiting for their acknowledgement (multi-rail) fail too. */
        for (gs__tcp_frame_t *u = c->uq_head; u != NULL; u = u->next) {
            if ((u->req != NULL) && (u->req->state != GS_TCP_REQ_DONE)) {
                gs__tcp_req_fail_ref(tp, u->req, status, why);
            }
        }
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
    while (p->wait_head != NULL) {
        r = p->wait_head;
        gs__tcp_send_unwait(tp, r);
        gs__tcp_req_fail_ref(tp, r, status, why);
    }
    gs__tcp_hs_forget(tp, peer);
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

void gs__tcp_recv_go_down(gs__tp_t *tp)
{
    struct gs__tp_req *r;

    /* Messages still arriving: detach and fail their receives, drain the rest. */
    for (int q = 0; q < tp->size; q++) {
        gs__tcp_peer_t *p = &tp->peers[q];

        if (q == tp->rank) {
            continue;
        }
        for (gs__tcp_inmsg_t *m = p->active; m != NULL; m = m->next) {
            if (gs__tp_tag_is_recovery(m->tag)) {
                continue; /* the survivors' agreement: keep it coming */
            }
            if (m->req != NULL) {
                r = m->req;
                m->req = NULL;
                r->msg = NULL;
                gs__tcp_req_fail_ref(tp, r, tp->down_status, tp->down_reason);
            }
            if (m->dest == GS_TCP_DEST_DRAIN) {
                continue;
            }
            gs__tcp_unexp_unlink(tp, m);
            gs__tcp_msg_free_buf(tp, m); /* still charged GS_TCP_MSG_COST until it is freed */
            m->dest = GS_TCP_DEST_DRAIN;
            for (int i = 0; i < p->nconns; i++) {
                if (p->conns[i].rmsg == m) {
                    p->conns[i].rdst = NULL; /* never into a buffer that is gone */
                }
            }
        }
    }
    /* What is left on the unexpected list is complete and unwanted now,
     * but for recovery messages. */
    for (gs__tcp_inmsg_t *m = (gs__tcp_inmsg_t *)tp->unexp.head; m != NULL;) {
        gs__tcp_inmsg_t *next = (gs__tcp_inmsg_t *)m->ue.anext;

        if (!gs__tp_tag_is_recovery(m->tag)) {
            gs__tcp_msg_free(tp, m);
        }
        m = next;
    }
    for (r = tp->posted_head; r != NULL;) {
        struct gs__tp_req *next = r->next;

        if (!gs__tp_tag_is_recovery(r->tag)) {
            gs__tcp_posted_unlink(tp, r);
            gs__tcp_req_fail_ref(tp, r, tp->down_status, tp->down_reason);
        }
        r = next;
    }
}
