/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TCP transport's shared bookkeeping, run by the worker thread only:
 * finishing a request, the posted list and the unexpected index, the table
 * of started messages by (peer, seq) (tp->active and each peer's list),
 * freeing held messages, and a socket's close and epoll interest. It moves
 * no bytes and decides nothing about failures: connection setup is in
 * tcp_handshake.c, the send half in tcp_tx.c, the receive half in
 * tcp_rx.c, peer failure in tcp_fail.c, the request calls in
 * tcp_transport.c.
 */
#include "transport/tcp/tcp_conn.h"

#include "core/error.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

/* ---------------------------------------------------------------------- */
/* Requests                                                               */
/* ---------------------------------------------------------------------- */

static void finish(gs__tp_t *tp, struct gs__tp_req *req, gs_status_t status)
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

void gs__tcp_req_complete(gs__tp_t *tp, struct gs__tp_req *req, gs_status_t status,
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

void gs__tcp_req_fail_ref(gs__tp_t *tp, struct gs__tp_req *req, gs_status_t status,
                          const char *reason)
{
    if (req->state == GS_TCP_REQ_DONE) {
        return;
    }
    req->reason = reason;
    finish(tp, req, status);
}

void gs__tcp_req_unlink(struct gs__tp_req **head, struct gs__tp_req **tail, struct gs__tp_req *r)
{
    if (r->prev != NULL) {
        r->prev->next = r->next;
    } else {
        *head = r->next;
    }
    if (r->next != NULL) {
        r->next->prev = r->prev;
    } else {
        *tail = r->prev;
    }
    r->next = NULL;
    r->prev = NULL;
}

void gs__tcp_posted_unlink(gs__tp_t *tp, struct gs__tp_req *r)
{
    gs__tcp_req_unlink(&tp->posted_head, &tp->posted_tail, r);
}

void gs__tcp_unexp_unlink(gs__tp_t *tp, gs__tcp_inmsg_t *m)
{
    gs__match_remove(&tp->unexp, &m->ue);
}

static uint64_t active_hash(const gs__tp_t *tp, int peer, uint64_t seq)
{
    return gs__htab_hash(&tp->active, seq, (uint64_t)peer);
}

gs_status_t gs__tcp_active_add(gs__tp_t *tp, gs__tcp_inmsg_t *m)
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

void gs__tcp_active_unlink(gs__tp_t *tp, gs__tcp_inmsg_t *m)
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

gs__tcp_inmsg_t *gs__tcp_active_find(gs__tp_t *tp, int peer, uint64_t seq)
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

void gs__tcp_msg_free_buf(gs__tp_t *tp, gs__tcp_inmsg_t *m)
{
    if (m->dest == GS_TCP_DEST_UNEXP) {
        free(m->buf);
        m->buf = NULL;
        gs__match_budget_release(&tp->held, m->total, 0);
        m->charged -= m->total;
        m->dest = GS_TCP_DEST_DRAIN; /* nothing to hold the payload in any more */
    }
}

void gs__tcp_msg_free(gs__tp_t *tp, gs__tcp_inmsg_t *m)
{
    gs__tcp_unexp_unlink(tp, m);
    gs__tcp_active_unlink(tp, m);
    free(m->buf);
    gs__match_budget_release(&tp->held, m->charged, 1);
    free(m);
}

/* ---------------------------------------------------------------------- */
/* Connections                                                            */
/* ---------------------------------------------------------------------- */

void gs__tcp_conn_close(gs__tp_t *tp, gs__tcp_conn_t *c)
{
    if (c->fd < 0) {
        return;
    }
    gs__tcp_unretain_conn(tp, c); /* their sends complete or fail with the peer */
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

void gs__tcp_conn_update_events(gs__tp_t *tp, gs__tcp_conn_t *c)
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
