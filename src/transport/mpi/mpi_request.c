/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Request calls of the MPI transport: isend (header, inline payload or
 * chunks), irecv (from the unexpected queue, or posted for a header to
 * come), probe (the unexpected queue), test and req_release. A request
 * whose peer or transport already failed completes at once with that
 * error.
 */
#include "transport/mpi/mpi_internal.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static gs_status_t req_new(gs__tp_t *tp, int is_send, int peer, uint64_t tag, void *buf, size_t len,
                           gs__tp_req_t **req_out)
{
    gs__tp_req_t *r = NULL;

    if ((peer >= tp->size) || (peer < (is_send ? 0 : GS_ANY_SOURCE)) ||
        ((buf == NULL) && (len > 0))) {
        return gs__error_set(GS_ERR_INVALID_ARG, "mpi: %s rank %d of %d with %zu bytes",
                             is_send ? "send to" : "receive from", peer, tp->size, len);
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "mpi: out of memory for a request");
    }
    r->is_send = is_send;
    r->peer = peer;
    r->tag = tag;
    r->buf = buf;
    r->len = len;
    r->rs.mr = r->rs.inline_mr;
    r->comp.peer = peer;
    r->comp.tag = tag;
    *req_out = r;
    return GS_OK;
}

/* Fail r at once when the transport or its peer already failed. */
static int req_precheck(gs__tp_t *tp, gs__tp_req_t *r)
{
    if (atomic_load(&tp->aborted)) {
        gs__mpi_req_complete(tp, r, GS_ERR_ABORTED, "the transport was aborted");
        return 1;
    }
    if ((r->peer >= 0) && (tp->peer_err[r->peer] != GS_OK)) {
        gs__mpi_req_complete(tp, r, tp->peer_err[r->peer], "rank %d failed earlier", r->peer);
        return 1;
    }
    if (!tp->connected) {
        gs__mpi_req_complete(tp, r, GS_ERR_INVALID_USAGE, "the transport is not connected");
        return 1;
    }
    return 0;
}

gs_status_t gs__mpi_tp_isend(gs__tp_t *tp, int peer, uint64_t tag, const void *buf, size_t len,
                             gs__tp_req_t **req_out)
{
    mpi_hdr_t h;
    gs__tp_req_t *r = NULL;
    gs_status_t status;
    const int inl = (len <= MPI_INLINE_MAX);
    int ret;

    status = req_new(tp, 1, peer, tag, (void *)buf, len, &r);
    if (status != GS_OK) {
        return status;
    }
    *req_out = r;
    r->comp.nbytes = len;
    if (req_precheck(tp, r)) {
        return GS_OK;
    }
    memset(&h, 0, sizeof(h));
    h.tag = tag;
    h.len = len;
    h.flags = inl ? MPI_FLAG_INLINE : 0;
    h.nchunks = inl ? 0 : (uint32_t)gs__mpi_chunk_count(len);
    h.seq = inl ? 0 : tp->send_seq[peer];
    r->sbuf = malloc(MPI_HDR_BYTES + (inl ? len : 0));
    if ((r->sbuf == NULL) || (gs__mpi_reqset_alloc(&r->rs, 1 + (size_t)h.nchunks) != 0)) {
        gs__mpi_req_complete(tp, r, GS_ERR_NO_MEMORY, "out of memory for a %zu-byte send", len);
        return GS_OK;
    }
    gs__mpi_hdr_encode(r->sbuf, &h);
    if (inl && (len > 0)) {
        memcpy(r->sbuf + MPI_HDR_BYTES, buf, len);
    }
    ret = MPI_Isend(r->sbuf, MPI_HDR_BYTES + (inl ? (int)len : 0), MPI_BYTE, peer, GS_MPI_TAG_HDR,
                    tp->comm, &r->rs.mr[0]);
    for (uint32_t i = 0; (ret == MPI_SUCCESS) && (i < h.nchunks); i++) {
        const size_t off = (size_t)i * MPI_CHUNK_MAX;
        const size_t part = (len - off < MPI_CHUNK_MAX) ? len - off : MPI_CHUNK_MAX;
        ret = MPI_Isend((const char *)buf + off, (int)part, MPI_BYTE, peer, GS_MPI_TAG_DATA,
                        tp->comm, &r->rs.mr[1 + i]);
    }
    tp->send_seq[peer] += h.nchunks;
    if (ret != MPI_SUCCESS) {
        /* Requests already started finish on their own. */
        gs__mpi_orphan_add(tp, &r->rs, NULL);
        tp->peer_err[peer] = GS_ERR_PEER_FAILED;
        gs__mpi_req_complete(tp, r, GS_ERR_PEER_FAILED, "MPI_Isend to rank %d failed: %s", peer,
                             gs__mpi_errstr(ret));
        return GS_OK;
    }
    r->state = REQ_ACTIVE;
    gs__mpi_list_append(&tp->active, r);
    return GS_OK;
}

gs_status_t gs__mpi_tp_probe(gs__tp_t *tp, int peer, uint64_t tag, int *found_out,
                             gs__tp_completion_t *comp_out)
{
    int alive = 0;

    if ((tp == NULL) || (found_out == NULL) || (comp_out == NULL) || (peer >= tp->size) ||
        (peer < GS_ANY_SOURCE) || (peer == tp->rank)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "mpi: probe of rank %d of %d", peer,
                             (tp != NULL) ? tp->size : 0);
    }
    *found_out = 0;
    if (atomic_load(&tp->aborted)) {
        return gs__error_set(GS_ERR_ABORTED, "mpi: the transport was aborted");
    }
    if ((peer >= 0) && (tp->peer_err[peer] != GS_OK)) {
        /* As irecv: a failed peer fails the receive before any lookup. */
        return gs__error_set(tp->peer_err[peer], "mpi: rank %d failed earlier", peer);
    }
    /* Headers are taken off MPI (MPI_Improbe) by progress into the
     * unexpected queue, which is what irecv matches first: the oldest
     * match there is the message the next irecv takes. */
    {
        const mpi_msg_t *m = (const mpi_msg_t *)gs__match_find(
            &tp->unexp, peer, peer == GS_ANY_SOURCE, tag & GS_TP_TAG_MATCH_MASK);

        if (m != NULL) {
            *found_out = 1;
            comp_out->status = GS_OK;
            comp_out->peer = m->src;
            comp_out->tag = m->h.tag;
            comp_out->nbytes = (size_t)m->h.len;
            return GS_OK;
        }
    }
    if (peer >= 0) {
        return GS_OK;
    }
    for (int i = 0; i < tp->size; i++) {
        alive += (i != tp->rank) && (tp->peer_err[i] == GS_OK);
    }
    if ((alive == 0) && (tp->size > 1)) {
        return gs__error_set(GS_ERR_PEER_FAILED, "mpi: every rank failed");
    }
    return GS_OK;
}

gs_status_t gs__mpi_tp_irecv(gs__tp_t *tp, int peer, uint64_t tag, void *buf, size_t len,
                             gs__tp_req_t **req_out)
{
    gs__tp_req_t *r = NULL;
    gs_status_t status;

    status = req_new(tp, 0, peer, tag, buf, len, &r);
    if (status != GS_OK) {
        return status;
    }
    *req_out = r;
    if (req_precheck(tp, r)) {
        return GS_OK;
    }
    /* The oldest unexpected message that matches. */
    {
        mpi_msg_t *m = (mpi_msg_t *)gs__match_find(&tp->unexp, peer, peer == GS_ANY_SOURCE,
                                                   tag & GS_TP_TAG_MATCH_MASK);

        if (m == NULL) {
            goto post;
        }
        gs__mpi_msg_unhold(tp, m); /* bound to r from here: r's progress tests its chunks */
        if (gs__mpi_refuse(tp, r, m->src, &m->h)) {
            if (m->rs.n > 0) {
                gs__mpi_orphan_add(tp, &m->rs, m->data);
                m->data = NULL;
            }
            gs__mpi_msg_free(tp, m);
            return GS_OK;
        }
        r->comp.nbytes = (size_t)m->h.len;
        if (m->rs.n == 0) {
            if (m->h.len > 0) {
                memcpy(buf, m->data, (size_t)m->h.len);
            }
            gs__mpi_msg_free(tp, m);
            gs__mpi_req_complete(tp, r, GS_OK, NULL);
            return GS_OK;
        }
        r->msg = m;
        r->state = REQ_MSG;
        gs__mpi_list_append(&tp->active, r);
        return GS_OK;
    }
post:
    if ((peer == GS_ANY_SOURCE) && (tp->size > 0)) {
        /* An any-source receive fails only when every peer has. */
        int alive = 0;
        for (int i = 0; i < tp->size; i++) {
            alive += (tp->peer_err[i] == GS_OK);
        }
        if (alive == 0) {
            gs__mpi_req_complete(tp, r, GS_ERR_PEER_FAILED, "every rank failed");
            return GS_OK;
        }
    }
    r->state = REQ_POSTED;
    gs__mpi_list_append(&tp->posted, r);
    return GS_OK;
}

gs_status_t gs__mpi_tp_test(gs__tp_t *tp, gs__tp_req_t *req, int *done_out,
                            gs__tp_completion_t *comp_out)
{
    if ((req->state != REQ_DONE) && atomic_load(&tp->aborted)) {
        /* Leave the MPI requests to MPI; the buffers are the caller's. */
        if (req->state == REQ_POSTED) {
            gs__mpi_list_remove(&tp->posted, req);
        } else if (req->state == REQ_ACTIVE) {
            gs__mpi_list_remove(&tp->active, req);
            gs__mpi_orphan_add(tp, &req->rs, NULL);
        } else if (req->state == REQ_MSG) {
            gs__mpi_list_remove(&tp->active, req);
            if (req->msg->rs.n > 0) {
                gs__mpi_orphan_add(tp, &req->msg->rs, req->msg->data);
                req->msg->data = NULL;
            }
            gs__mpi_msg_free(tp, req->msg);
            req->msg = NULL;
        }
        gs__mpi_req_complete(tp, req, GS_ERR_ABORTED, "the transport was aborted");
    }
    if (req->state != REQ_DONE) {
        *done_out = 0;
        return GS_OK;
    }
    *done_out = 1;
    if (comp_out != NULL) {
        *comp_out = req->comp;
    }
    if (req->comp.status != GS_OK) {
        gs__error_copy_in(req->why);
    }
    return GS_OK;
}

static void req_free(gs__tp_req_t *r)
{
    gs__mpi_reqset_free(&r->rs);
    free(r->sbuf);
    free(r);
}

gs_status_t gs__mpi_tp_req_release(gs__tp_t *tp, gs__tp_req_t *req)
{
    if (req == NULL) {
        return GS_OK;
    }
    switch (req->state) {
    case REQ_POSTED:
        gs__mpi_list_remove(&tp->posted, req);
        break;
    case REQ_ACTIVE:
        /* NOTE: MPI cannot take back a matched receive or a started send;
         * they finish in the background into/from the caller's buffer. */
        gs__mpi_list_remove(&tp->active, req);
        for (int i = 0; i < req->rs.n; i++) {
            if ((req->rs.mr[i] != MPI_REQUEST_NULL) && !req->is_send) {
                MPI_Cancel(&req->rs.mr[i]);
            }
        }
        gs__mpi_orphan_add(tp, &req->rs, req->sbuf);
        req->sbuf = NULL;
        break;
    case REQ_MSG:
        gs__mpi_list_remove(&tp->active, req);
        gs__mpi_orphan_add(tp, &req->msg->rs, req->msg->data);
        req->msg->data = NULL;
        gs__mpi_msg_free(tp, req->msg);
        break;
    case REQ_DONE:
        break;
    }
    req_free(req);
    return GS_OK;
}
