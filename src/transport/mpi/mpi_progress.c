/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Progress of the MPI transport: polling of header probes and receives
 * (in probe order), active sends and chunk receives, unexpected payloads
 * and orphans; the progress slot and gs__mpi_tp_wait (for the native
 * collectives). These are the transport's only loops, each bounded by the
 * caller's deadline, with a yield/sleep back-off when nothing moves.
 */
#include "transport/mpi/mpi_internal.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/error.h"

static void poll_headers(gs__tp_t *tp)
{
    /* Probe new headers (bounded, so one busy sender cannot starve the rest). */
    for (int i = 0; i < 64; i++) {
        MPI_Message msg;
        MPI_Status st;
        mpi_hdrq_t *q;
        int flag = 0;
        int count = 0;

        if (MPI_Improbe(MPI_ANY_SOURCE, GS_MPI_TAG_HDR, tp->comm, &flag, &msg, &st) !=
            MPI_SUCCESS) {
            break;
        }
        if (!flag) {
            break;
        }
        MPI_Get_count(&st, MPI_BYTE, &count);
        if ((count < 0) || (count > MPI_HDR_BYTES + MPI_INLINE_MAX)) {
            count = 0; /* hostile size: receive nothing (MPI_ERR_TRUNCATE), then fail */
        }
        q = malloc(sizeof(*q) + (size_t)(count > 0 ? count : 1));
        if (q == NULL) {
            MPI_Request drop;
            MPI_Imrecv(NULL, 0, MPI_BYTE, &msg, &drop);
            MPI_Request_free(&drop);
            gs__mpi_peer_fail(tp, st.MPI_SOURCE, GS_ERR_NO_MEMORY, "out of memory for a header");
            continue;
        }
        q->next = NULL;
        q->src = st.MPI_SOURCE;
        q->count = count;
        MPI_Imrecv(q->buf, count, MPI_BYTE, &msg, &q->mr);
        {
            mpi_hdrq_t **p = &tp->hdrq;
            while (*p != NULL) {
                p = &(*p)->next;
            }
            *p = q;
        }
    }
    /* Handle arrived headers in probe order. */
    while (tp->hdrq != NULL) {
        mpi_hdrq_t *q = tp->hdrq;
        char why[MPI_WHY_MAX];
        mpi_hdr_t h;
        MPI_Status st;
        int flag = 0;
        int ret = MPI_Test(&q->mr, &flag, &st);

        if ((ret == MPI_SUCCESS) && !flag) {
            break;
        }
        tp->hdrq = q->next;
        if (tp->peer_err[q->src] != GS_OK) {
            free(q);
            continue;
        }
        if (ret != MPI_SUCCESS) {
            gs__mpi_peer_fail(tp, q->src, GS_ERR_PEER_FAILED, gs__mpi_errstr(ret));
        } else if (gs__mpi_hdr_decode(q->buf, q->count, tp->recv_seq[q->src], &h, why,
                                      sizeof(why)) != GS_OK) {
            char msg[MPI_WHY_MAX + 40];
            (void)snprintf(msg, sizeof(msg), "protocol error: %s", why);
            gs__mpi_peer_fail(tp, q->src, GS_ERR_PROTOCOL, msg);
        } else {
            gs__mpi_deliver_header(tp, q->src, &h, q->buf + MPI_HDR_BYTES);
        }
        free(q);
    }
}

static void poll_active(gs__tp_t *tp)
{
    for (gs__tp_req_t *r = tp->active; r != NULL;) {
        gs__tp_req_t *next = r->next;
        int err = MPI_SUCCESS;

        /* Receives bound to an unexpected message are polled with it. */
        if ((r->state == REQ_ACTIVE) && gs__mpi_reqset_test(&r->rs, 0, &err)) {
            gs__mpi_list_remove(&tp->active, r);
            gs__mpi_reqset_free(&r->rs);
            if (err != MPI_SUCCESS) {
                gs__mpi_req_complete(tp, r, GS_ERR_PEER_FAILED, "%s rank %d failed in MPI: %s",
                                     r->is_send ? "sending to" : "receiving from", r->peer,
                                     gs__mpi_errstr(err));
            } else {
                gs__mpi_req_complete(tp, r, GS_OK, NULL);
            }
        }
        r = next;
    }
}

void gs__mpi_poll_messages(gs__tp_t *tp)
{
    /* Unexpected payloads still arriving (only those: the held ones that
     * are whole cost nothing here), and receives bound to them. */
    for (mpi_msg_t *m = tp->filling; m != NULL;) {
        mpi_msg_t *next = m->fnext;
        int err = MPI_SUCCESS;
        if (gs__mpi_reqset_test(&m->rs, 0, &err)) {
            gs__mpi_reqset_free(&m->rs);
            gs__mpi_msg_filled(tp, m); /* whole now, and still held */
            if (err != MPI_SUCCESS) {
                gs__mpi_peer_fail(tp, m->src, GS_ERR_PEER_FAILED, gs__mpi_errstr(err));
            }
        }
        m = next;
    }
    for (gs__tp_req_t *r = tp->active; r != NULL;) {
        gs__tp_req_t *next = r->next;
        if (r->state == REQ_MSG) {
            mpi_msg_t *m = r->msg;
            int err = MPI_SUCCESS;
            if ((m->rs.n == 0) || gs__mpi_reqset_test(&m->rs, 0, &err)) {
                gs__mpi_list_remove(&tp->active, r);
                r->msg = NULL;
                if (err != MPI_SUCCESS) {
                    gs__mpi_req_complete(tp, r, GS_ERR_PEER_FAILED,
                                         "receiving from rank %d failed: %s", m->src,
                                         gs__mpi_errstr(err));
                } else {
                    if (m->h.len > 0) {
                        memcpy(r->buf, m->data, (size_t)m->h.len);
                    }
                    gs__mpi_req_complete(tp, r, GS_OK, NULL);
                }
                gs__mpi_msg_free(tp, m);
            }
        }
        r = next;
    }
    for (mpi_orphan_t **p = &tp->orphans; *p != NULL;) {
        mpi_orphan_t *o = *p;
        int err = MPI_SUCCESS;
        if (gs__mpi_reqset_test(&o->rs, 1, &err)) {
            *p = o->next;
            gs__mpi_reqset_free(&o->rs);
            free(o->to_free);
            free(o);
        } else {
            p = &o->next;
        }
    }
}

void gs__mpi_poll_once(gs__tp_t *tp)
{
    poll_headers(tp);
    poll_active(tp);
    gs__mpi_poll_messages(tp);
}

void gs__mpi_nap(uint64_t idle_ns)
{
    struct timespec ts;

    if (idle_ns < 50000) {
        sched_yield();
        return;
    }
    ts.tv_sec = 0;
    ts.tv_nsec = (idle_ns < 5000000) ? 20000 : 200000;
    nanosleep(&ts, NULL);
}

gs_status_t gs__mpi_tp_progress(gs__tp_t *tp, uint64_t deadline_ns)
{
    const uint64_t start = gs__now_ns();
    const int before = tp->completions;

    for (;;) {
        uint64_t now;

        if (atomic_load(&tp->aborted)) {
            return gs__error_set(GS_ERR_ABORTED, "mpi: the transport was aborted");
        }
        if (tp->connected) {
            gs__mpi_poll_once(tp);
        }
        if (tp->completions != before) {
            return GS_OK;
        }
        if (atomic_exchange(&tp->woken, 0)) {
            return GS_OK;
        }
        now = gs__now_ns();
        if (now >= deadline_ns) {
            return GS_OK;
        }
        gs__mpi_nap(now - start);
    }
}

gs_status_t gs__mpi_tp_wait(gs__tp_t *tp, MPI_Request *mreq, uint64_t deadline_ns, const char *what)
{
    const uint64_t start = gs__now_ns();

    for (;;) {
        MPI_Status st;
        int flag = 0;
        int ret;
        uint64_t now;

        ret = MPI_Test(mreq, &flag, &st);
        if (ret != MPI_SUCCESS) {
            return gs__error_set(GS_ERR_PEER_FAILED, "mpi: %s failed: %s", what,
                                 gs__mpi_errstr(ret));
        }
        if (flag) {
            return GS_OK;
        }
        if (atomic_load(&tp->aborted)) {
            MPI_Request_free(mreq);
            return gs__error_set(GS_ERR_ABORTED, "mpi: %s: the transport was aborted", what);
        }
        now = gs__now_ns();
        if (now >= deadline_ns) {
            MPI_Request_free(mreq);
            return gs__error_set(GS_ERR_TIMEOUT,
                                 "mpi: %s on rank %d did not complete before the deadline "
                                 "(a rank is missing or slow)",
                                 what, tp->rank);
        }
        gs__mpi_nap(now - start);
    }
}
