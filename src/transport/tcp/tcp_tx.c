/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TCP data path, send half, run by the worker thread only: per-socket
 * send queues written through the connection's byte pipe (tcp_pipe.h:
 * header and payload gathered, many frames per call), completing a send
 * once its last frame is out, and cancelling a send (taking its frames off
 * the queues and telling the receiver with a SKIP frame, or finishing it
 * from a private copy while down). It does not cut messages into frames or
 * pick their sockets (tcp_isend in tcp_transport.c), read anything
 * (tcp_rx.c) or decide what a failed write means beyond failing the peer
 * (tcp_fail.c).
 */
#include "transport/tcp/tcp_conn.h"

#include "core/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

/* ---------------------------------------------------------------------- */
/* Send side                                                              */
/* ---------------------------------------------------------------------- */

static void frame_written(gs__tp_t *tp, gs__tcp_frame_t *f)
{
    struct gs__tp_req *req = f->req;

    if (f->owned) {
        free(f);
        return;
    }
    if ((req != NULL) && (--req->frames_left == 0)) {
        gs__tcp_req_complete(tp, req, GS_OK, NULL);
    }
}

static void send_error(gs__tp_t *tp, gs__tcp_conn_t *c, int err)
{
    char why[GS_TCP_REASON_MAX];

    snprintf(why, sizeof(why), "sending failed: %s", strerror(err));
    if (gs__tcp_rail_fail(tp, c, why)) {
        return; /* another rail of the pair carries on */
    }
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

void gs__tcp_conn_flush(gs__tp_t *tp, gs__tcp_conn_t *c)
{
    int budget = GS_TCP_IO_BUDGET;
    bool wrote = false;
    uint64_t total = 0;

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
        total += (uint64_t)n;
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
            c->wbytes += take;
            if (f->sent == GS_TCP_FRAME_HDR_LEN + f->payload_len) {
                c->sq_head = f->next;
                if (c->sq_head == NULL) {
                    c->sq_tail = NULL;
                }
                if (!gs__tcp_retain(tp, c, f, c->wbytes)) {
                    frame_written(tp, f);
                }
            }
        }
        if (short_write) {
            break; /* the socket buffer is full; EPOLLOUT will say when to go on */
        }
    }
    if (total > 0) {
        gs__tcp_rail_wrote(tp, c, total);
    }
    if (wrote && (c->fd >= 0) && (c->pipe->wrote != NULL)) {
        c->pipe->wrote(tp, c);
    }
    gs__tcp_conn_update_events(tp, c);
}

void gs__tcp_conn_queue(gs__tp_t *tp, gs__tcp_conn_t *c, gs__tcp_frame_t *f)
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
    if (f->req != NULL) {
        gs__tcp_rate_start(tp, c);
    }
    if (was_empty) {
        gs__tcp_conn_flush(tp, c); /* latency: try the write now */
    }
}

bool gs__tcp_queue_control(gs__tp_t *tp, gs__tcp_conn_t *c, uint32_t type, uint64_t seq,
                           uint64_t tag)
{
    gs__tcp_frame_t *f = calloc(1, sizeof(*f));
    gs__tcp_frame_hdr_t hdr;

    if (f == NULL) {
        return false;
    }
    memset(&hdr, 0, sizeof(hdr));
    hdr.type = type;
    hdr.seq = seq;
    hdr.tag = tag;
    gs__tcp_frame_encode(&hdr, f->hdr);
    f->owned = true;
    gs__tcp_conn_queue(tp, c, f);
    return true;
}

gs__tcp_frame_t *gs__tcp_frame_copy(const gs__tcp_frame_t *f)
{
    gs__tcp_frame_t *copy = malloc(sizeof(*copy) + (size_t)f->payload_len);

    if (copy == NULL) {
        return NULL;
    }
    memcpy(copy, f, sizeof(*copy));
    if (f->payload_len > 0) {
        memcpy(copy + 1, f->payload, (size_t)f->payload_len);
    }
    copy->payload = (const uint8_t *)(copy + 1);
    copy->req = NULL;
    copy->owned = true;
    return copy;
}

/*
 * While down, a send released mid-wire finishes from a private copy instead
 * of cutting the stream: a cut would look like a crash of this rank to the
 * receiver (which would then blame us, not the rank that failed) and would
 * drop the DOWN frames queued behind it. The data is the caller's, copied
 * before release returns, so the receiver gets exactly what was sent.
 * Returns false when out of memory (the caller cuts the stream).
 */
static bool send_detach(gs__tp_t *tp, struct gs__tp_req *req)
{
    gs__tcp_peer_t *p = &tp->peers[req->peer];

    for (int i = 0; i < p->nconns; i++) {
        gs__tcp_conn_t *c = &p->conns[i];

        for (gs__tcp_frame_t **pp = &c->sq_head; *pp != NULL; pp = &(*pp)->next) {
            gs__tcp_frame_t *f = *pp;
            gs__tcp_frame_t *copy;

            if (f->req != req) {
                continue;
            }
            copy = gs__tcp_frame_copy(f);
            if (copy == NULL) {
                return false; /* frames copied so far are owned and freed with the queue */
            }
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

void gs__tcp_send_cancel(gs__tp_t *tp, struct gs__tp_req *req)
{
    gs__tcp_peer_t *p = &tp->peers[req->peer];
    gs__tcp_conn_t *to = &p->conns[0];

    if (req->waiting) {
        gs__tcp_send_unwait(tp, req); /* never cut into frames: no sequence number */
        return;
    }
    /* Frames written and waiting for their ack are on the wire already:
     * only their resend is lost. */
    req->frames_left -= gs__tcp_unretain_req(tp, req);
    if (req->frames_left == 0) {
        return;
    }
    if (req->on_wire) {
        if ((tp->down_status != GS_OK) && send_detach(tp, req)) {
            return;
        }
        /* A receiver mid-message cannot resynchronise on this stream. */
        gs__tcp_peer_drop(tp, req->peer, GS_ERR_PEER_FAILED,
                          "a send to peer %d was cancelled after part of it was sent", req->peer);
        return;
    }
    for (int i = 0; i < p->nconns; i++) {
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
    /* Tell the receiver this sequence number will never carry data (on a
     * socket of a rail that is up). */
    for (int i = 0; i < p->nconns; i++) {
        if ((p->conns[i].fd >= 0) && p->rails[p->conns[i].rail].up) {
            to = &p->conns[i];
            break;
        }
    }
    if (!gs__tcp_queue_control(tp, to, GS_TCP_FRAME_SKIP, req->seq, 0)) {
        gs__tcp_peer_fail(tp, req->peer, GS_ERR_NO_MEMORY,
                          "out of memory while cancelling a send to peer %d", req->peer);
    }
}
