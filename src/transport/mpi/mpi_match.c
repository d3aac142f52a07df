/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Matching in the MPI transport: request sets (MPI requests that complete
 * as a whole), request completion, orphaned MPI requests, the matching of
 * arrived headers against posted receives, and the unexpected queue.
 *
 * The receiver probes headers with MPI_Improbe(MPI_ANY_SOURCE, tag 1) and
 * receives them with MPI_Imrecv, in order per sender (mpi_progress.c). A
 * header is matched against the posted receives (oldest first); the payload
 * is then received with MPI_Irecv(sender, tag 2) straight into the user's
 * buffer, or into a heap copy when no receive is posted yet (the unexpected
 * list). Because the chunk receives from one sender are posted in header
 * order, and MPI does not let messages with the same source and tag
 * overtake each other, the k-th chunk receive always gets the k-th chunk:
 * no sequence numbers are needed in MPI tags (seq in the header is only
 * checked). A mismatch or a truncation drains the chunks with zero-length
 * receives (MPI reports MPI_ERR_TRUNCATE and drops the bytes), so the
 * buffer is never written.
 */
#include "transport/mpi/mpi_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "core/msg_limit.h"

int gs__mpi_reqset_alloc(mpi_reqset_t *rs, size_t n)
{
    rs->n = 0;
    rs->mr = rs->inline_mr;
    if (n > MPI_INLINE_REQS) {
        rs->mr = malloc(n * sizeof(MPI_Request));
        if (rs->mr == NULL) {
            return -1;
        }
    }
    for (size_t i = 0; i < n; i++) {
        rs->mr[i] = MPI_REQUEST_NULL;
    }
    rs->n = (int)n;
    return 0;
}

void gs__mpi_reqset_free(mpi_reqset_t *rs)
{
    if ((rs->mr != NULL) && (rs->mr != rs->inline_mr)) {
        free(rs->mr);
    }
    rs->mr = rs->inline_mr;
    rs->n = 0;
}

/* Test every request of rs. Returns 1 when all are done; *err_out gets the
 * first MPI error (MPI_ERR_TRUNCATE is ignored when @p drain). */
int gs__mpi_reqset_test(mpi_reqset_t *rs, int drain, int *err_out)
{
    int all = 1;

    for (int i = 0; i < rs->n; i++) {
        MPI_Status st;
        int flag = 0;
        int ret;

        if (rs->mr[i] == MPI_REQUEST_NULL) {
            continue;
        }
        ret = MPI_Test(&rs->mr[i], &flag, &st);
        if (ret != MPI_SUCCESS) {
            int cls = MPI_ERR_OTHER;

            MPI_Error_class(ret, &cls);
            if (!(drain && (cls == MPI_ERR_TRUNCATE)) && (*err_out == MPI_SUCCESS)) {
                *err_out = ret;
            }
            rs->mr[i] = MPI_REQUEST_NULL;
            continue;
        }
        if (!flag) {
            all = 0;
        }
    }
    return all;
}

void gs__mpi_list_remove(gs__tp_req_t **head, gs__tp_req_t *r)
{
    for (gs__tp_req_t **p = head; *p != NULL; p = &(*p)->next) {
        if (*p == r) {
            *p = r->next;
            r->next = NULL;
            return;
        }
    }
}

void gs__mpi_list_append(gs__tp_req_t **head, gs__tp_req_t *r)
{
    gs__tp_req_t **p = head;

    while (*p != NULL) {
        p = &(*p)->next;
    }
    r->next = NULL;
    *p = r;
}

void gs__mpi_req_complete(gs__tp_t *tp, gs__tp_req_t *r, gs_status_t status, const char *fmt, ...)
{
    r->state = REQ_DONE;
    r->comp.status = status;
    if ((status != GS_OK) && (fmt != NULL)) {
        va_list ap;

        va_start(ap, fmt);
        (void)vsnprintf(r->why, sizeof(r->why), fmt, ap);
        va_end(ap);
    }
    if ((status == GS_OK) && (tp->counters != NULL)) {
        if (r->is_send) {
            gs__counter_add(&tp->counters->bytes_sent, r->comp.nbytes);
            gs__counter_add(&tp->counters->msgs_sent, 1);
        } else {
            gs__counter_add(&tp->counters->bytes_received, r->comp.nbytes);
            gs__counter_add(&tp->counters->msgs_received, 1);
        }
    }
    tp->completions++;
}

void gs__mpi_orphan_add(gs__tp_t *tp, mpi_reqset_t *rs, void *to_free)
{
    mpi_orphan_t *o = calloc(1, sizeof(*o));

    if (o == NULL) {
        /* Nobody can wait for them: let MPI finish them on its own. */
        for (int i = 0; i < rs->n; i++) {
            if (rs->mr[i] != MPI_REQUEST_NULL) {
                MPI_Request_free(&rs->mr[i]);
            }
        }
        gs__mpi_reqset_free(rs);
        free(to_free);
        return;
    }
    o->rs = *rs;
    if (rs->mr == rs->inline_mr) {
        o->rs.mr = o->rs.inline_mr;
    }
    rs->mr = rs->inline_mr;
    rs->n = 0;
    o->to_free = to_free;
    o->next = tp->orphans;
    tp->orphans = o;
}

/* Post zero-length receives for the n chunks that follow a refused header:
 * MPI drops their bytes (MPI_ERR_TRUNCATE, ignored) and the order of the
 * sender's later chunks is kept. */
static void drain_chunks(gs__tp_t *tp, int src, uint32_t n)
{
    mpi_reqset_t rs;

    if (n == 0) {
        return;
    }
    if (gs__mpi_reqset_alloc(&rs, n) != 0) {
        gs__error_set(GS_ERR_NO_MEMORY, "mpi: out of memory draining a message from rank %d", src);
        tp->peer_err[src] = GS_ERR_NO_MEMORY;
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        MPI_Irecv(NULL, 0, MPI_BYTE, src, GS_MPI_TAG_DATA, tp->comm, &rs.mr[i]);
    }
    gs__mpi_orphan_add(tp, &rs, NULL);
}

/* Post the chunk receives of a len-byte payload from src into dst. */
static int post_chunks(gs__tp_t *tp, int src, void *dst, size_t len, mpi_reqset_t *rs)
{
    const size_t n = gs__mpi_chunk_count(len);

    if (gs__mpi_reqset_alloc(rs, n) != 0) {
        return MPI_ERR_NO_MEM;
    }
    for (size_t i = 0; i < n; i++) {
        const size_t off = i * MPI_CHUNK_MAX;
        const size_t part = (len - off < MPI_CHUNK_MAX) ? len - off : MPI_CHUNK_MAX;
        const int ret = MPI_Irecv((char *)dst + off, (int)part, MPI_BYTE, src, GS_MPI_TAG_DATA,
                                  tp->comm, &rs->mr[i]);
        if (ret != MPI_SUCCESS) {
            return ret;
        }
    }
    tp->recv_seq[src] += (uint32_t)n;
    return MPI_SUCCESS;
}

/* ---------------------------------------------------------------------- */
/* Matching                                                               */
/* ---------------------------------------------------------------------- */

/* Apply the mismatch and truncation rules (gs__match_bind) to receive r
 * and a message with header h from src. Returns 1 when r was completed
 * with an error. */
int gs__mpi_refuse(gs__tp_t *tp, gs__tp_req_t *r, int src, const mpi_hdr_t *h)
{
    char why[GS_MATCH_WHY_MAX];
    const gs_status_t st = gs__match_bind(r->tag, r->len, src, h->tag, h->len, why, sizeof(why));

    r->comp.peer = src;
    r->comp.tag = h->tag;
    if (st == GS_OK) {
        return 0;
    }
    gs__mpi_req_complete(tp, r, st, "%s", why);
    return 1;
}

/* What an unexpected message is charged covers what holding it takes. */
_Static_assert(sizeof(mpi_msg_t) + 2 * sizeof(size_t) + GS_MATCH_ENTRY_OVERHEAD <= MPI_MSG_COST,
               "MPI_MSG_COST covers a message, its allocator overhead and its match keys");

/* A header from src arrived (payload inline at data, or chunks to follow). */
void gs__mpi_deliver_header(gs__tp_t *tp, int src, const mpi_hdr_t *h, const unsigned char *data)
{
    const uint32_t nchunks = (h->flags & MPI_FLAG_INLINE) ? 0 : h->nchunks;
    gs__tp_req_t *r = tp->posted;
    char why[GS_MATCH_WHY_MAX];
    mpi_msg_t *m;
    int ret;

    /* Before anything is allocated or posted for it (GS_MAX_MESSAGE_BYTES). */
    if (h->len > tp->max_msg) {
        (void)snprintf(why, sizeof(why),
                       "announced a message of %llu bytes, over the limit of %llu bytes "
                       "(GS_MAX_MESSAGE_BYTES)",
                       (unsigned long long)h->len, (unsigned long long)tp->max_msg);
        drain_chunks(tp, src, nchunks);
        tp->recv_seq[src] += nchunks;
        gs__mpi_peer_fail(tp, src, GS_ERR_PROTOCOL, why);
        return;
    }
    while ((r != NULL) && !gs__match_accepts(r->peer, r->tag, src, h->tag)) {
        r = r->next;
    }
    if (r != NULL) {
        gs__mpi_list_remove(&tp->posted, r);
        if (gs__mpi_refuse(tp, r, src, h)) {
            drain_chunks(tp, src, nchunks);
            tp->recv_seq[src] += nchunks;
            return;
        }
        r->comp.nbytes = (size_t)h->len;
        if (nchunks == 0) {
            if (h->len > 0) {
                memcpy(r->buf, data, (size_t)h->len);
            }
            gs__mpi_req_complete(tp, r, GS_OK, NULL);
            return;
        }
        ret = post_chunks(tp, src, r->buf, (size_t)h->len, &r->rs);
        if (ret != MPI_SUCCESS) {
            tp->peer_err[src] = GS_ERR_PEER_FAILED;
            gs__mpi_req_complete(tp, r, GS_ERR_PEER_FAILED, "receiving from rank %d failed: %s",
                                 src, gs__mpi_errstr(ret));
            return;
        }
        r->state = REQ_ACTIVE;
        gs__mpi_list_append(&tp->active, r);
        return;
    }
    /* Unexpected: keep a copy until a receive matches, within the bounds
     * on what peers can make us hold (mpi_internal.h), written so that
     * nothing can wrap. */
    if (!gs__match_budget_fits(&tp->held, MPI_MSG_COST, h->len, h->len, why, sizeof(why))) {
        drain_chunks(tp, src, nchunks);
        tp->recv_seq[src] += nchunks;
        gs__mpi_peer_fail(tp, src, GS_ERR_PROTOCOL, why);
        return;
    }
    m = calloc(1, sizeof(*m));
    if ((m != NULL) && (h->len > 0)) {
        /* Zeroed: MPI does not say that a chunk receive got all of its
         * bytes (a shorter chunk completes it), so what a short chunk leaves
         * unwritten must not be old heap. */
        m->data = calloc(1, (size_t)h->len);
    }
    if ((m == NULL) || ((h->len > 0) && (m->data == NULL))) {
        free(m);
        tp->peer_err[src] = GS_ERR_NO_MEMORY;
        gs__error_set(GS_ERR_NO_MEMORY, "mpi: no memory for a %llu-byte message from rank %d",
                      (unsigned long long)h->len, src);
        drain_chunks(tp, src, nchunks);
        tp->recv_seq[src] += nchunks;
        return;
    }
    if (gs__match_add(&tp->unexp, &m->ue, src, h->tag & GS_TP_TAG_MATCH_MASK) != GS_OK) {
        free(m->data);
        free(m);
        tp->peer_err[src] = GS_ERR_NO_MEMORY;
        gs__error_set(GS_ERR_NO_MEMORY, "mpi: no memory to hold a message from rank %d", src);
        drain_chunks(tp, src, nchunks);
        tp->recv_seq[src] += nchunks;
        return;
    }
    m->src = src;
    m->h = *h;
    m->charged = MPI_MSG_COST + h->len;
    gs__match_budget_charge(&tp->held, m->charged);
    m->rs.mr = m->rs.inline_mr;
    if (nchunks == 0) {
        if (h->len > 0) {
            memcpy(m->data, data, (size_t)h->len);
        }
    } else {
        ret = post_chunks(tp, src, m->data, (size_t)h->len, &m->rs);
        if (ret != MPI_SUCCESS) {
            tp->peer_err[src] = GS_ERR_PEER_FAILED;
        }
        if (m->rs.n > 0) {
            m->filling = 1;
            m->fprev = NULL;
            m->fnext = tp->filling;
            if (tp->filling != NULL) {
                tp->filling->fprev = m;
            }
            tp->filling = m;
        }
    }
    tp->completions++; /* progress returns: a probe may be waiting for it */
}

void gs__mpi_msg_filled(gs__tp_t *tp, mpi_msg_t *m)
{
    if (m->filling) {
        if (m->fprev != NULL) {
            m->fprev->fnext = m->fnext;
        } else {
            tp->filling = m->fnext;
        }
        if (m->fnext != NULL) {
            m->fnext->fprev = m->fprev;
        }
        m->fnext = NULL;
        m->fprev = NULL;
        m->filling = 0;
    }
}

void gs__mpi_msg_unhold(gs__tp_t *tp, mpi_msg_t *m)
{
    gs__match_remove(&tp->unexp, &m->ue);
    gs__mpi_msg_filled(tp, m);
}

void gs__mpi_msg_free(gs__tp_t *tp, mpi_msg_t *m)
{
    gs__mpi_msg_unhold(tp, m);
    gs__match_budget_release(&tp->held, m->charged, 1);
    gs__mpi_reqset_free(&m->rs);
    free(m->data);
    free(m);
}

/* Fail a peer: every posted or later request involving it fails. */
void gs__mpi_peer_fail(gs__tp_t *tp, int src, gs_status_t status, const char *why)
{
    if (tp->peer_err[src] == GS_OK) {
        tp->peer_err[src] = status;
        GS_WARN("mpi: rank %d failed: %s", src, why);
    }
    for (gs__tp_req_t *r = tp->posted; r != NULL;) {
        gs__tp_req_t *next = r->next;
        if (r->peer == src) {
            gs__mpi_list_remove(&tp->posted, r);
            r->comp.peer = src;
            gs__mpi_req_complete(tp, r, status, "rank %d: %s", src, why);
        }
        r = next;
    }
}
