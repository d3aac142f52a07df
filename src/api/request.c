/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Completing requests: gs_wait, gs_test and their forms over arrays
 * (gs_waitall, gs_waitany, gs_testall). A request is a task of its
 * communicator's worker; it is finished when the worker marks it done, and
 * released (error text carried to the caller's thread, memory freed, handle
 * set to GS_REQUEST_NULL) by whichever of these calls reports it. Nothing
 * here drives a transport: the workers do, and every task they run is
 * bounded by its communicator's deadline, so every wait here returns.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/coll_impl.h"
#include "api/comm_impl.h"
#include "core/error.h"

/* gs_waitany over several communicators: sleep between looks, from
 * REQUEST_NAP_MIN_NS doubling up to REQUEST_NAP_MAX_NS (no worker signals
 * a waiter of another communicator). */
#define REQUEST_NAP_MIN_NS 10000L
#define REQUEST_NAP_MAX_NS 1000000L

gs_status_t gs__request_release(gs_request_t *req)
{
    struct gs_request *r = *req;
    const gs_status_t status = r->task.status;

    if (status != GS_OK) {
        gs__error_copy_in(r->task.errmsg);
    }
    free(r);
    *req = GS_REQUEST_NULL;
    return status;
}

gs_status_t gs_wait(gs_request_t *req)
{
    if (req == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_wait: req is NULL");
    }
    if (*req == GS_REQUEST_NULL) {
        return GS_OK;
    }
    gs__worker_wait(&(*req)->comm->worker, &(*req)->task);
    return gs__request_release(req);
}

gs_status_t gs_test(gs_request_t *req)
{
    if (req == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_test: req is NULL");
    }
    if (*req == GS_REQUEST_NULL) {
        return GS_OK;
    }
    if (!gs__task_done(&(*req)->task)) {
        return GS_INPROGRESS;
    }
    return gs__request_release(req);
}

gs_status_t gs_waitall(size_t n, gs_request_t *reqs)
{
    gs__error_first_t first = {GS_OK, ""};

    if ((reqs == NULL) && (n > 0)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_waitall: reqs is NULL but n is %zu", n);
    }
    for (size_t i = 0; i < n; i++) {
        gs__error_first_keep(&first, gs_wait(&reqs[i]));
    }
    return gs__error_first_end(&first);
}

/* The first finished request of reqs[0..n), -1 when none has finished. */
static long request_first_done(size_t n, const gs_request_t *reqs)
{
    for (size_t i = 0; i < n; i++) {
        if ((reqs[i] != GS_REQUEST_NULL) && gs__task_done(&reqs[i]->task)) {
            return (long)i;
        }
    }
    return -1;
}

/* The worker every live request of reqs shares, or NULL when they are on
 * several communicators (or there is none). */
static gs__worker_t *request_common_worker(size_t n, const gs_request_t *reqs)
{
    gs__worker_t *w = NULL;

    for (size_t i = 0; i < n; i++) {
        if (reqs[i] == GS_REQUEST_NULL) {
            continue;
        }
        if ((w != NULL) && (w != &reqs[i]->comm->worker)) {
            return NULL;
        }
        w = &reqs[i]->comm->worker;
    }
    return w;
}

gs_status_t gs_waitany(size_t n, gs_request_t *reqs, int *index_out)
{
    gs__worker_t *w;
    long nap_ns = REQUEST_NAP_MIN_NS;
    long idx;
    int live = 0;

    if (((reqs == NULL) && (n > 0)) || (index_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_waitany: %s is NULL",
                             (index_out == NULL) ? "index_out" : "reqs");
    }
    if (n > (size_t)INT32_MAX) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_waitany: n is %zu; the index is an int", n);
    }
    for (size_t i = 0; i < n; i++) {
        live += (reqs[i] != GS_REQUEST_NULL);
    }
    if (live == 0) {
        *index_out = -1;
        return GS_OK;
    }
    /* NOTE: a request may outlive its communicator (gs_comm_destroy
     * finishes it first): look at comm only while something is pending. */
    idx = request_first_done(n, reqs);
    w = (idx < 0) ? request_common_worker(n, reqs) : NULL;
    if ((idx < 0) && (w != NULL)) {
        /* One communicator: its worker broadcasts cv_done (under mu) when
         * any task finishes, so sleep on that and look again. */
        pthread_mutex_lock(&w->mu);
        while ((idx = request_first_done(n, reqs)) < 0) {
            pthread_cond_wait(&w->cv_done, &w->mu);
        }
        pthread_mutex_unlock(&w->mu);
    }
    while (idx < 0) {
        /* Several communicators: short sleeps, growing, never a busy spin. */
        struct timespec ts = {0, nap_ns};

        while ((nanosleep(&ts, &ts) != 0) && (errno == EINTR)) {
        }
        nap_ns = (nap_ns * 2 < REQUEST_NAP_MAX_NS) ? nap_ns * 2 : REQUEST_NAP_MAX_NS;
        idx = request_first_done(n, reqs);
    }
    *index_out = (int)idx;
    return gs__request_release(&reqs[idx]);
}

gs_status_t gs_testall(size_t n, gs_request_t *reqs)
{
    if ((reqs == NULL) && (n > 0)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_testall: reqs is NULL but n is %zu", n);
    }
    for (size_t i = 0; i < n; i++) {
        if ((reqs[i] != GS_REQUEST_NULL) && !gs__task_done(&reqs[i]->task)) {
            return GS_INPROGRESS;
        }
    }
    return gs_waitall(n, reqs); /* every one finished: releases without waiting */
}
