/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TCP data path, receive half, run by the worker thread only: matching
 * a receive against held unexpected messages or posting it, and the
 * per-socket receive state machine (header, then payload read straight into
 * the matched receive's buffer, or held, or drained), which starts a peer's
 * messages in sequence order across its sockets (see tcp_conn.h). It
 * writes nothing (tcp_tx.c) and leaves what a failure means to tcp_fail.c,
 * including failing the receives pending when the instance goes down.
 *
 * NOTE: every header is validated by gs__tcp_frame_decode before use, and
 * every chunk is checked against its message and the sender's chunk plan
 * (tcp_wire.h; each chunk of the plan once, so chunks never overlap and a
 * message completes only when every byte of it arrived) before a byte of
 * payload is placed, and every message started is charged against the
 * bounds on what peers can make us hold (tcp_conn.h); any violation fails
 * the peer with GS_ERR_PROTOCOL.
 */
#include "transport/tcp/tcp_conn.h"

#include "core/error.h"
#include "core/log.h"
#include "core/msg_limit.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* ---------------------------------------------------------------------- */
/* Matching                                                               */
/* ---------------------------------------------------------------------- */

/*
 * Decide whether message m may fill receive r (which accepts it:
 * gs__match_accepts). On refusal (gs__match_bind), completes r with
 * GS_ERR_MISMATCH or GS_ERR_TRUNCATED.
 */
static bool bind_ok(gs__tp_t *tp, struct gs__tp_req *r, int peer, uint64_t tag, uint64_t total)
{
    char why[GS_MATCH_WHY_MAX];
    const gs_status_t st = gs__match_bind(r->tag, r->len, peer, tag, total, why, sizeof(why));

    r->comp.peer = peer;
    r->comp.tag = tag;
    if (st == GS_OK) {
        return true;
    }
    /* Detail only: the tags are numbers, and the layer above names the
     * calls in words (a collective's diagnosis, algo/diag). */
    GS_INFO(NET, "tcp: %s", why);
    gs__tcp_req_complete(tp, r, st, why);
    return false;
}

void gs__tcp_recv_post(gs__tp_t *tp, struct gs__tp_req *req)
{
    gs__tcp_inmsg_t *m;

    if ((tp->down_status != GS_OK) && !gs__tp_tag_is_recovery(req->tag)) {
        gs__tcp_req_fail_ref(tp, req, tp->down_status, tp->down_reason);
        return;
    }

    m = (gs__tcp_inmsg_t *)gs__match_find(&tp->unexp, req->peer, req->peer == GS_ANY_SOURCE,
                                          req->tag & GS_TP_TAG_MATCH_MASK);
    if (m != NULL) {
        gs__tcp_unexp_unlink(tp, m);
        if (!bind_ok(tp, req, m->peer, m->tag, m->total)) {
            if (m->complete) {
                gs__tcp_msg_free(tp, m);
            }
            return; /* still arriving: finishes into its own buffer, then freed */
        }
        if (m->complete) {
            if (m->total > 0) {
                memcpy(req->buf, m->buf, (size_t)m->total);
            }
            req->comp.nbytes = (size_t)m->total;
            gs__tcp_msg_free(tp, m);
            gs__tcp_req_complete(tp, req, GS_OK, NULL);
            return;
        }
        m->req = req;
        req->msg = m;
        req->state = GS_TCP_REQ_ACTIVE;
        return;
    }
    if ((req->peer != GS_ANY_SOURCE) && (tp->peers[req->peer].fail_status != GS_OK)) {
        gs__tcp_req_fail_ref(tp, req, tp->peers[req->peer].fail_status,
                             tp->peers[req->peer].reason);
        return;
    }
    if ((req->peer == GS_ANY_SOURCE) && (tp->nfailed > 0)) {
        for (int p = 0; p < tp->size; p++) {
            if ((p != tp->rank) && (tp->peers[p].fail_status != GS_OK)) {
                gs__tcp_req_fail_ref(tp, req, tp->peers[p].fail_status, tp->peers[p].reason);
                return;
            }
        }
    }
    req->state = GS_TCP_REQ_POSTED;
    req->prev = tp->posted_tail;
    req->next = NULL;
    if (tp->posted_tail != NULL) {
        tp->posted_tail->next = req;
    } else {
        tp->posted_head = req;
    }
    tp->posted_tail = req;
}

gs_status_t gs__tcp_recv_probe(gs__tp_t *tp, int peer, uint64_t tag, int *found_out,
                               gs__tp_completion_t *comp_out)
{
    const gs__tcp_inmsg_t *m;

    *found_out = 0;
    if (tp->down_status != GS_OK) {
        gs__error_copy_in(tp->down_reason);
        return tp->down_status;
    }
    /* The same lookup as gs__tcp_recv_post, so the message found is the one
     * an irecv posted next would take. */
    m = (const gs__tcp_inmsg_t *)gs__match_find(&tp->unexp, peer, peer == GS_ANY_SOURCE,
                                                tag & GS_TP_TAG_MATCH_MASK);
    if (m != NULL) {
        *found_out = 1;
        comp_out->status = GS_OK;
        comp_out->peer = m->peer;
        comp_out->tag = m->tag;
        comp_out->nbytes = (size_t)m->total;
        return GS_OK;
    }
    if ((peer != GS_ANY_SOURCE) && (tp->peers[peer].fail_status != GS_OK)) {
        gs__error_copy_in(tp->peers[peer].reason);
        return tp->peers[peer].fail_status;
    }
    for (int p = 0; (peer == GS_ANY_SOURCE) && (tp->nfailed > 0) && (p < tp->size); p++) {
        if ((p != tp->rank) && (tp->peers[p].fail_status != GS_OK)) {
            gs__error_copy_in(tp->peers[p].reason);
            return tp->peers[p].fail_status;
        }
    }
    return GS_OK;
}

void gs__tcp_recv_cancel(gs__tp_t *tp, struct gs__tp_req *req)
{
    gs__tcp_inmsg_t *m = req->msg;

    if (req->state == GS_TCP_REQ_POSTED) {
        gs__tcp_posted_unlink(tp, req);
        return;
    }
    if (m == NULL) {
        return;
    }
    m->req = NULL;
    req->msg = NULL;
    if (m->dest == GS_TCP_DEST_USER) {
        /* The user's buffer is going away: drain the rest of the message. */
        gs__tcp_peer_t *p = &tp->peers[m->peer];

        m->dest = GS_TCP_DEST_DRAIN;
        for (int i = 0; i < p->nconns; i++) {
            if (p->conns[i].rmsg == m) {
                p->conns[i].rdst = NULL;
            }
        }
    }
}

/* ---------------------------------------------------------------------- */
/* Receive side                                                           */
/* ---------------------------------------------------------------------- */

static void kick(gs__tp_t *tp, gs__tcp_conn_t *c)
{
    if (!c->kicked) {
        c->kicked = true;
        tp->nkicked++;
    }
}

/*
 * Which run of granules of its message's granule plan (tcp_wire.h) the DATA
 * frame h from peer is: the plan both sides cut from the total, and whether
 * the pair stripes (several sockets, no shared-memory link; set up the same
 * on both sides before the first frame). Fails the peer when it is none.
 */
static bool chunk_run(gs__tp_t *tp, int peer, const gs__tcp_frame_hdr_t *h, uint64_t *mask_out)
{
    const gs__tcp_peer_t *p = &tp->peers[peer];
    const unsigned g = gs__tcp_granules(h->total_len, (p->shm == NULL) && (p->nconns > 1));
    unsigned first;
    unsigned count;

    if (!gs__tcp_granule_run(h->total_len, g, h->offset, h->chunk_len, &first, &count)) {
        gs__tcp_peer_fail(tp, peer, GS_ERR_PROTOCOL,
                          "peer %d sent a bad frame header: chunk [%" PRIu64 ", +%" PRIu64
                          ") of message %" PRIu64 " (%" PRIu64
                          " bytes) is not a run of the %u granules its sender cuts it into",
                          peer, h->offset, h->chunk_len, h->seq, h->total_len, g);
        return false;
    }
    *mask_out = gs__tcp_granule_mask(first, count);
    return true;
}

/* What a held message is charged covers what holding it takes. */
_Static_assert(sizeof(gs__tcp_inmsg_t) + 2 * sizeof(size_t) + GS_MATCH_ENTRY_OVERHEAD +
                       4 * sizeof(void *) <=
                   GS_TCP_MSG_COST,
               "GS_TCP_MSG_COST covers a message, its allocator overhead, its match keys and "
               "its slots in the indexes");
_Static_assert(GS_TCP_GRANULES_MAX <= 64, "gs__tcp_inmsg_t.parts has a bit per granule");

/* A new message (seq == recv_seq) from peer: bind it to a receive or hold it. */
static gs__tcp_inmsg_t *msg_start(gs__tp_t *tp, int peer, const gs__tcp_frame_hdr_t *h)
{
    gs__tcp_dest_t dest = GS_TCP_DEST_UNEXP;
    uint64_t held = 0; /* payload bytes this rank holds for it */
    char why[GS_MATCH_WHY_MAX];
    struct gs__tp_req *r = NULL;
    gs__tcp_inmsg_t *m;
    uint64_t mask;

    /* Before anything is allocated or read for it (GS_MAX_MESSAGE_BYTES). */
    if (h->total_len > tp->max_msg) {
        gs__tcp_peer_fail(tp, peer, GS_ERR_PROTOCOL,
                          "peer %d announced a message of %" PRIu64
                          " bytes, over the limit of %" PRIu64 " bytes (GS_MAX_MESSAGE_BYTES)",
                          peer, h->total_len, tp->max_msg);
        return NULL;
    }
    if (!chunk_run(tp, peer, h, &mask)) {
        return NULL;
    }
    if ((tp->down_status != GS_OK) && !gs__tp_tag_is_recovery(h->tag)) {
        dest = GS_TCP_DEST_DRAIN; /* no receive will ever take it: hold no payload */
    } else {
        for (r = tp->posted_head; r != NULL; r = r->next) {
            if (gs__match_accepts(r->peer, r->tag, peer, h->tag)) {
                break;
            }
        }
        if (r != NULL) {
            dest = GS_TCP_DEST_USER; /* or DRAIN, when bind_ok refuses it below */
        } else {
            held = h->total_len;
        }
    }
    /* Every message held is charged, whatever its destination (tcp_conn.h,
     * GS_TCP_MSG_COST): one that never finishes, or is empty, is not free.
     * Charged once it is set up below; given back by gs__tcp_msg_free. */
    if (!gs__match_budget_fits(&tp->held, GS_TCP_MSG_COST, held, h->total_len, why, sizeof(why))) {
        gs__tcp_peer_fail(tp, peer, GS_ERR_PROTOCOL, "peer %d %s", peer, why);
        return NULL;
    }
    m = calloc(1, sizeof(*m));
    if (m == NULL) {
        gs__tcp_peer_fail(tp, peer, GS_ERR_NO_MEMORY, "out of memory for a message from peer %d",
                          peer);
        return NULL;
    }
    if ((dest == GS_TCP_DEST_UNEXP) && (h->total_len > 0)) {
        /* NOTE: malloc, not calloc: every byte is written before the
         * message completes (the chunk plan tiles it, each chunk once), and
         * zeroing cost 5-10% on unexpected messages of 64 KiB .. 1 MiB. */
        m->buf = malloc((size_t)h->total_len);
        if (m->buf == NULL) {
            free(m);
            gs__tcp_peer_fail(tp, peer, GS_ERR_NO_MEMORY,
                              "out of memory holding an unexpected message of %" PRIu64
                              " bytes from peer %d",
                              h->total_len, peer);
            return NULL;
        }
    }
    m->parts = mask;
    m->peer = peer;
    m->seq = h->seq;
    m->tag = h->tag;
    m->total = h->total_len;
    m->dest = dest;
    if (gs__tcp_active_add(tp, m) != GS_OK) {
        free(m->buf);
        free(m);
        gs__tcp_peer_fail(tp, peer, GS_ERR_NO_MEMORY, "out of memory for a message from peer %d",
                          peer);
        return NULL;
    }
    if ((r == NULL) && (dest == GS_TCP_DEST_UNEXP) &&
        (gs__match_add(&tp->unexp, &m->ue, peer, h->tag & GS_TP_TAG_MATCH_MASK) != GS_OK)) {
        gs__tcp_active_unlink(tp, m);
        free(m->buf);
        free(m);
        gs__tcp_peer_fail(tp, peer, GS_ERR_NO_MEMORY,
                          "out of memory holding an unexpected message from peer %d", peer);
        return NULL;
    }
    m->charged = GS_TCP_MSG_COST + held;
    gs__match_budget_charge(&tp->held, m->charged);
    if (r != NULL) {
        gs__tcp_posted_unlink(tp, r);
        if (bind_ok(tp, r, peer, h->tag, h->total_len)) {
            m->req = r;
            r->msg = m;
            r->state = GS_TCP_REQ_ACTIVE;
        } else {
            m->dest = GS_TCP_DEST_DRAIN;
        }
    } else if (dest == GS_TCP_DEST_UNEXP) {
        tp->nevents++; /* progress returns: a probe may be waiting for it */
    }
    return m;
}

static void msg_done(gs__tp_t *tp, gs__tcp_inmsg_t *m)
{
    struct gs__tp_req *r = m->req;
    /* Bound to a receive: in its buffer already (DEST_USER), or in ours
     * (DEST_UNEXP, a receive that came after the first chunk). A drained
     * message never has one. */
    const bool copy = (r != NULL) && (m->dest == GS_TCP_DEST_UNEXP) && (m->total > 0);

    gs__tcp_active_unlink(tp, m);
    m->complete = true;
    if (r == NULL) {
        /* Held until a receive takes it, or nobody wants it (drained, or
         * its receive was refused or cancelled). */
        if (!m->ue.held) {
            gs__tcp_msg_free(tp, m);
        }
        return;
    }
    if (copy) {
        memcpy(r->buf, m->buf, (size_t)m->total);
    }
    r->msg = NULL;
    r->comp.nbytes = (size_t)m->total;
    gs__tcp_req_complete(tp, r, GS_OK, NULL);
    gs__tcp_msg_free(tp, m);
}

/* Point the socket at a chunk of message m. */
static void chunk_start(gs__tp_t *tp, gs__tcp_conn_t *c, gs__tcp_inmsg_t *m)
{
    uint8_t *base = NULL;

    c->rmsg = m;
    c->rleft = c->rhdr.chunk_len;
    m->claimed += c->rhdr.chunk_len;
    if (m->dest == GS_TCP_DEST_USER) {
        base = (uint8_t *)m->req->buf;
    } else if (m->dest == GS_TCP_DEST_UNEXP) {
        base = m->buf;
    }
    c->rdst = (base != NULL) ? base + c->rhdr.offset : NULL;
    c->rstate = GS_TCP_RS_PAYLOAD;
    if (c->rleft == 0) {
        c->rstate = GS_TCP_RS_HDR;
        c->rmsg = NULL;
        if (m->got == m->total) {
            msg_done(tp, m);
        }
    }
}

static void chunk_done(gs__tp_t *tp, gs__tcp_conn_t *c)
{
    gs__tcp_inmsg_t *m = c->rmsg;

    c->rmsg = NULL;
    c->rdst = NULL;
    c->rstate = GS_TCP_RS_HDR;
    if (m == NULL) {
        return; /* a repeat drained (a lost rail's frame, or one sent again) */
    }
    m->got += c->rhdr.chunk_len;
    if (m->got == m->total) {
        msg_done(tp, m);
    }
}

static void on_header(gs__tp_t *tp, gs__tcp_conn_t *c);

/* Read the chunk whose header c holds into nowhere. */
static void chunk_drain(gs__tcp_conn_t *c)
{
    c->rmsg = NULL;
    c->rdst = NULL;
    c->rleft = c->rhdr.chunk_len;
    c->rstate = (c->rleft > 0) ? GS_TCP_RS_PAYLOAD : GS_TCP_RS_HDR;
}

/*
 * A repeat of granules m already has, after a rail failed (a RESEND, or a
 * lost rail's socket still being read). When a lost rail's socket is in the
 * middle of exactly those granules, the repeat takes over: that socket's
 * rest is drained instead (its sender may never finish it). Otherwise the
 * repeat is drained.
 */
static void chunk_repeat(gs__tp_t *tp, gs__tcp_conn_t *c, gs__tcp_inmsg_t *m, uint64_t mask)
{
    gs__tcp_peer_t *p = &tp->peers[c->peer];

    for (int i = 0; i < p->nconns; i++) {
        gs__tcp_conn_t *d = &p->conns[i];

        if ((d != c) && !p->rails[d->rail].up && (d->rstate == GS_TCP_RS_PAYLOAD) &&
            (d->rmsg == m) && (d->rx_chunk_mask == mask)) {
            m->claimed -= d->rhdr.chunk_len;
            d->rmsg = NULL;
            d->rdst = NULL;
            c->rx_chunk_mask = mask;
            chunk_start(tp, c, m);
            return;
        }
    }
    chunk_drain(c);
}

void gs__tcp_dead_conn_close(gs__tp_t *tp, gs__tcp_conn_t *c)
{
    gs__tcp_peer_t *p = &tp->peers[c->peer];

    if ((c->rstate == GS_TCP_RS_PAYLOAD) && (c->rmsg != NULL)) {
        c->rmsg->parts &= ~c->rx_chunk_mask; /* it comes again as RESEND */
        c->rmsg->claimed -= c->rhdr.chunk_len;
    }
    if (c->rstate == GS_TCP_RS_PARKED) {
        p->nparked--;
    }
    c->rmsg = NULL;
    c->rdst = NULL;
    c->rstate = GS_TCP_RS_HDR;
    c->rpos = 0;
    c->rlen = 0;
    gs__tcp_conn_close(tp, c);
}

/* After recv_seq moved on, let every socket whose header is now usable go on:
 * a further chunk of the message that just started (seq < recv_seq) or the
 * start of the next one (seq == recv_seq). */
static void unpark(gs__tp_t *tp, gs__tcp_peer_t *p)
{
    for (int i = 0; (i < p->nconns) && (p->nparked > 0); i++) {
        gs__tcp_conn_t *c = &p->conns[i];

        if ((c->rstate == GS_TCP_RS_PARKED) && (c->rhdr.seq <= p->recv_seq)) {
            p->nparked--;
            c->rstate = GS_TCP_RS_HDR;
            on_header(tp, c); /* may start the message and unpark the next one */
            if (p->fail_status != GS_OK) {
                return;
            }
            gs__tcp_conn_update_events(tp, c);
            kick(tp, c);
            i = -1; /* rescan: recv_seq moved again */
        }
    }
}

/* DOWN(x) from a live peer: x failed (tcp_fail.c, gs__tcp_down_heard). */
static void on_down(gs__tp_t *tp, gs__tcp_conn_t *c)
{
    uint64_t x = c->rhdr.tag; /* <= INT32_MAX, checked by the decoder */

    if ((x >= (uint64_t)tp->size) || (x == (uint64_t)tp->rank) || (x == (uint64_t)c->peer)) {
        gs__tcp_peer_fail(tp, c->peer, GS_ERR_PROTOCOL,
                          "peer %d sent a bad frame header: down frame names rank %" PRIu64
                          " (world size %d, receiver %d)",
                          c->peer, x, tp->size, tp->rank);
        return;
    }
    gs__tcp_down_heard(tp, (int)x, c->peer);
}

/* Sockets of the pair still open (a lost rail's close after its EOF). */
static int conns_open(const gs__tcp_peer_t *p)
{
    int n = 0;

    for (int i = 0; i < p->nconns; i++) {
        n += (p->conns[i].fd >= 0) ? 1 : 0;
    }
    return n;
}

static void on_header(gs__tp_t *tp, gs__tcp_conn_t *c)
{
    gs__tcp_peer_t *p = &tp->peers[c->peer];
    const gs__tcp_frame_hdr_t *h = &c->rhdr;
    gs__tcp_inmsg_t *m;
    uint64_t mask;
    bool repeat_ok;

    if (c->bye_rcvd) {
        gs__tcp_peer_fail(tp, c->peer, GS_ERR_PROTOCOL, "peer %d sent a frame after saying goodbye",
                          c->peer);
        return;
    }
    if (h->type == GS_TCP_FRAME_DOWN) {
        on_down(tp, c); /* a control frame: no sequence number */
        return;
    }
    if (h->type == GS_TCP_FRAME_HEARTBEAT) {
        return; /* its bytes arriving was the point (do_recv noted them) */
    }
    if (h->type == GS_TCP_FRAME_REVOKE) {
        if (h->tag >= (uint64_t)tp->size) {
            gs__tcp_peer_fail(tp, c->peer, GS_ERR_PROTOCOL,
                              "peer %d sent a bad frame header: revoke frame names rank %" PRIu64
                              " (world size %d)",
                              c->peer, h->tag, tp->size);
            return;
        }
        gs__tcp_revoke(tp, (int)h->tag, c->peer); /* a control frame: no sequence number */
        return;
    }
    if (h->type == GS_TCP_FRAME_RAIL_DOWN) {
        gs__tcp_rail_down_heard(tp, c, h->tag); /* a control frame: no sequence number */
        return;
    }
    if (((h->flags & GS_TCP_FRAME_F_RESEND) != 0) && !p->rail_failed) {
        gs__tcp_peer_fail(tp, c->peer, GS_ERR_PROTOCOL,
                          "peer %d sent a bad frame header: a frame sent again, and no rail of "
                          "the pair failed",
                          c->peer);
        return;
    }
    /* After a rail failed, granules may come twice: sent again, and read
     * from the lost rail's socket. */
    repeat_ok = ((h->flags & GS_TCP_FRAME_F_RESEND) != 0) || !p->rails[c->rail].up;
    if (h->type == GS_TCP_FRAME_BYE) {
        c->bye_rcvd = true;
        /* Only the rails that are up count: the peer says goodbye on them. */
        p->nbye += p->rails[c->rail].up ? 1 : 0;
        if (p->nbye >= p->nrails_up * tp->nsocks) {
            gs__tcp_peer_left(tp, c->peer);
        }
        return;
    }
    if (h->seq < p->recv_seq) {
        /* A further chunk of a message that has started. */
        m = gs__tcp_active_find(tp, c->peer, h->seq);
        if (repeat_ok && (h->type == GS_TCP_FRAME_DATA) &&
            ((m == NULL) || ((m->tag == h->tag) && (m->total == h->total_len)))) {
            if (m == NULL) {
                chunk_drain(c); /* its message is complete */
                return;
            }
            if (!chunk_run(tp, c->peer, h, &mask)) {
                return;
            }
            if ((m->parts & mask) == mask) {
                chunk_repeat(tp, c, m, mask);
                return;
            }
        }
        if ((h->type != GS_TCP_FRAME_DATA) || (m == NULL) || (m->tag != h->tag) ||
            (m->total != h->total_len) || (h->chunk_len > m->total - m->claimed) ||
            (h->chunk_len == 0)) {
            gs__tcp_peer_fail(tp, c->peer, GS_ERR_PROTOCOL,
                              "peer %d sent a bad frame header: chunk of message %" PRIu64
                              " does not fit any message in progress",
                              c->peer, h->seq);
            return;
        }
        /* Only runs of the plan's granules, each once: chunks that overlap
         * would add up to the total and complete the message around a hole. */
        if (!chunk_run(tp, c->peer, h, &mask)) {
            return;
        }
        if ((m->parts & mask) != 0) {
            gs__tcp_peer_fail(tp, c->peer, GS_ERR_PROTOCOL,
                              "peer %d sent a bad frame header: granules 0x%" PRIx64
                              " of message %" PRIu64 " arrived twice",
                              c->peer, m->parts & mask, h->seq);
            return;
        }
        m->parts |= mask;
        c->rx_chunk_mask = mask;
        chunk_start(tp, c, m);
        return;
    }
    if (h->seq > p->recv_seq) {
        c->rstate = GS_TCP_RS_PARKED;
        p->nparked++;
        if (p->nparked + p->nbye >= conns_open(p)) {
            gs__tcp_peer_fail(tp, c->peer, GS_ERR_PROTOCOL,
                              "peer %d sent a bad frame header: message %" PRIu64
                              " never started (every socket waits for it)",
                              c->peer, p->recv_seq);
            return;
        }
        gs__tcp_conn_update_events(tp, c);
        return;
    }
    p->recv_seq++;
    if (h->type == GS_TCP_FRAME_SKIP) {
        unpark(tp, p);
        return;
    }
    m = msg_start(tp, c->peer, h);
    if (m == NULL) {
        return;
    }
    c->rx_chunk_mask = m->parts;
    chunk_start(tp, c, m);
    if (p->nparked > 0) {
        unpark(tp, p);
    }
}

static void recv_error(gs__tp_t *tp, gs__tcp_conn_t *c, ssize_t n, int err)
{
    gs__tcp_peer_t *p = &tp->peers[c->peer];
    char why[GS_TCP_REASON_MAX];

    if (!p->rails[c->rail].up) {
        gs__tcp_dead_conn_close(tp, c); /* a lost rail's socket has given all it had */
        return;
    }
    if ((n != 0) || (!c->bye_rcvd && (p->nbye == 0))) {
        snprintf(why, sizeof(why), "%s", (n == 0) ? "closed" : strerror(err));
        if (gs__tcp_rail_fail(tp, c, why)) {
            return; /* another rail of the pair carries on */
        }
    }
    if (n == 0) {
        if (c->bye_rcvd) {
            gs__tcp_conn_close(tp, c); /* orderly: the peer already said goodbye */
            return;
        }
        if (p->nbye > 0) {
            gs__tcp_peer_left(tp, c->peer);
        } else {
            gs__tcp_peer_fail(tp, c->peer, GS_ERR_PEER_FAILED, "peer %d closed the connection",
                              c->peer);
        }
    } else if (err == ECONNRESET) {
        gs__tcp_peer_fail(tp, c->peer, GS_ERR_PEER_FAILED, "connection reset by peer %d", c->peer);
    } else {
        gs__tcp_peer_fail(tp, c->peer, GS_ERR_PEER_FAILED, "receiving from peer %d failed: %s",
                          c->peer, strerror(err));
    }
}

/* One read from c's byte pipe (tcp_pipe.h); returns false when it has
 * nothing more now (or failed). Until "drained", the read loop goes on, or
 * kicks: a pipe whose short reads say nothing (TLS: one record per read)
 * is drained only when it would block. */
static bool do_recv(gs__tp_t *tp, gs__tcp_conn_t *c, void *dst, size_t len, ssize_t *n_out)
{
    gs__tcp_pipe_res_t res;
    ssize_t n;

    res.err = 0;
    res.committed = 0;
    n = c->pipe->read(tp, c, dst, len, &res);
    if (n > 0) {
        *n_out = n;
        tp->peers[c->peer].rx_seen = true;
        if (((size_t)n < len) && c->pipe->short_read_drains) {
            c->drained = true; /* no more there; skip the call that would say so */
        }
        return true;
    }
    if ((n == GS_TCP_PIPE_AGAIN) || (n == GS_TCP_PIPE_FAILED)) {
        c->drained = true;
        return false;
    }
    if (n == GS_TCP_PIPE_PROTO) {
        gs__tcp_peer_fail(tp, c->peer, GS_ERR_PROTOCOL, "receiving from peer %d failed: %s",
                          c->peer, res.why);
        return false;
    }
    recv_error(tp, c, (n == GS_TCP_PIPE_EOF) ? 0 : -1, res.err);
    return false;
}

static void conn_read_frames(gs__tp_t *tp, gs__tcp_conn_t *c);

void gs__tcp_conn_read(gs__tp_t *tp, gs__tcp_conn_t *c)
{
    if (c->pipe->on_readable != NULL) {
        c->pipe->on_readable(tp, c); /* what the socket carries for the pipe itself */
    }
    gs__tcp_conn_read_ring(tp, c);
}

void gs__tcp_conn_read_ring(gs__tp_t *tp, gs__tcp_conn_t *c)
{
    conn_read_frames(tp, c);
    if ((c->fd >= 0) && (c->pipe->read_done != NULL)) {
        c->pipe->read_done(tp, c); /* we may have freed room the other side waits for */
    }
}

static void conn_read_frames(gs__tp_t *tp, gs__tcp_conn_t *c)
{
    gs__tcp_peer_t *p = &tp->peers[c->peer];
    int budget = GS_TCP_IO_BUDGET;
    char why[GS_TCP_REASON_MAX];
    ssize_t n = 0;
    /* A ring costs no syscall per read: take headers exactly and every
     * payload straight to its destination (one copy out of the ring). */
    bool exact = c->pipe->exact;

    c->drained = false;
    if (c->kicked) {
        c->kicked = false;
        tp->nkicked--;
    }
    while ((c->fd >= 0) && (p->fail_status == GS_OK)) {
        size_t avail = c->rlen - c->rpos;

        if (c->rstate == GS_TCP_RS_PARKED) {
            return;
        }
        if (c->rstate == GS_TCP_RS_HDR) {
            if (avail >= GS_TCP_FRAME_HDR_LEN) {
                if (gs__tcp_frame_decode(c->rbuf + c->rpos, avail, &c->rhdr, why, sizeof(why)) !=
                    GS_OK) {
                    gs__tcp_peer_fail(tp, c->peer, GS_ERR_PROTOCOL,
                                      "peer %d sent a bad frame header: %s", c->peer, why);
                    return;
                }
                c->rpos += GS_TCP_FRAME_HDR_LEN;
                on_header(tp, c);
                continue;
            }
            if (c->drained || (budget-- <= 0)) {
                break;
            }
            if (c->rpos > 0) {
                memmove(c->rbuf, c->rbuf + c->rpos, avail);
                c->rpos = 0;
                c->rlen = avail;
            }
            if (!do_recv(tp, c, c->rbuf + c->rlen,
                         exact ? (GS_TCP_FRAME_HDR_LEN - avail) : (GS_TCP_RBUF_LEN - c->rlen),
                         &n)) {
                return;
            }
            c->rlen += (size_t)n;
            continue;
        }
        /* GS_TCP_RS_PAYLOAD */
        if (avail > 0) {
            size_t take = (avail < c->rleft) ? avail : (size_t)c->rleft;

            if (c->rdst != NULL) {
                memcpy(c->rdst, c->rbuf + c->rpos, take);
                c->rdst += take;
            }
            c->rpos += take;
            c->rleft -= take;
            if (c->rleft == 0) {
                chunk_done(tp, c);
            }
            continue;
        }
        if (c->drained || (budget-- <= 0)) {
            break;
        }
        c->rpos = 0;
        c->rlen = 0;
        if (exact || (c->rleft >= GS_TCP_RBUF_LEN / 2)) {
            /* Large payload: read it in place (no copy). */
            void *dst = (c->rdst != NULL) ? (void *)c->rdst : (void *)tp->scratch;
            size_t cap = (c->rdst != NULL) ? (size_t)c->rleft : GS_TCP_SCRATCH_LEN;

            if (cap > c->rleft) {
                cap = (size_t)c->rleft;
            }
            if (!do_recv(tp, c, dst, cap, &n)) {
                return;
            }
            if (c->rdst != NULL) {
                c->rdst += n;
            }
            c->rleft -= (uint64_t)n;
            if (c->rleft == 0) {
                chunk_done(tp, c);
            }
        } else {
            if (!do_recv(tp, c, c->rbuf, GS_TCP_RBUF_LEN, &n)) {
                return;
            }
            c->rlen = (size_t)n;
        }
    }
    /* Whole frames may still sit in rbuf; epoll would not report them. */
    if ((c->fd >= 0) && (p->fail_status == GS_OK) && (c->rstate != GS_TCP_RS_PARKED) &&
        (((c->rstate == GS_TCP_RS_HDR) && (c->rlen - c->rpos >= GS_TCP_FRAME_HDR_LEN)) ||
         ((c->rstate == GS_TCP_RS_PAYLOAD) && (c->rlen > c->rpos)) || !c->drained)) {
        kick(tp, c);
    }
}

void gs__tcp_free_messages(gs__tp_t *tp)
{
    for (int p = 0; p < tp->size; p++) {
        if (p == tp->rank) {
            continue;
        }
        while (tp->peers[p].active != NULL) {
            gs__tcp_msg_free(tp, tp->peers[p].active);
        }
    }
    while (tp->unexp.head != NULL) {
        gs__tcp_msg_free(tp, (gs__tcp_inmsg_t *)tp->unexp.head);
    }
    gs__match_free(&tp->unexp);
    gs__htab_free(&tp->active);
}
