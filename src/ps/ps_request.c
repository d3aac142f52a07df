/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Completion of the parameter server's requests: gs_ps_wait, gs_ps_test,
 * gs_ps_waitall and the finishing that gs_ps_destroy does. A sub-request is
 * done once its header left, its answer came (from the server thread for a
 * shard this rank serves, from rx for a remote one: the ACK or REPLY is
 * checked here against what was asked, as hostile bytes), and its payload
 * send or values receive completed. Every wait is bounded: the server
 * answers or fails within the deadline; twice the deadline without an
 * answer fails the handle. Posting is in ps_client.c.
 */
#include "ps/ps_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"

/* ====================================================================== */
/* Completion                                                             */
/* ====================================================================== */

/* Finish one gs request of a sub (blocking or not); INPROGRESS while pending. */
static gs_status_t step_req(gs__ps_sub_t *sub, gs_request_t *r, int block, const char *what)
{
    gs_status_t status;

    if (*r == GS_REQUEST_NULL) {
        return GS_OK;
    }
    status = block ? gs_wait(r) : gs_test(r);
    if (status == GS_INPROGRESS) {
        return status;
    }
    if (status != GS_OK) {
        char msg[GS_ERROR_MSG_MAX];

        snprintf(msg, sizeof(msg), "%s server rank %d: %s", what, sub->server_rank,
                 gs__error_get());
        gs__ps_sub_error(sub, status, msg);
    }
    return GS_OK;
}

/* Check the server's ACK or REPLY once it arrived. */
static void check_answer(const struct gs_ps_request *req, gs__ps_sub_t *sub, int nranks)
{
    const gs__ps_key_t *k = req->key;
    gs__ps_msg_t m;
    char why[200];
    char msg[GS_ERROR_MSG_MAX];
    const uint8_t want = req->is_pull ? GS_PS_MSG_REPLY : GS_PS_MSG_ACK;

    if (gs__ps_msg_decode(sub->rep, GS_PS_MSG_BYTES, nranks, &m, why, sizeof(why)) != GS_OK) {
        snprintf(msg, sizeof(msg), "server rank %d sent a bad answer: %s", sub->server_rank, why);
        gs__ps_sub_error(sub, GS_ERR_PROTOCOL, msg);
        return;
    }
    if ((m.type != want) || (m.src != sub->server_rank) || (m.seq != sub->seq) ||
        (m.key != k->key) || (m.shard != sub->shard) ||
        (m.offset != k->ranges[sub->shard].offset) || (m.count != k->ranges[sub->shard].count) ||
        (m.dtype != (uint8_t)k->dtype)) {
        snprintf(msg, sizeof(msg),
                 "server rank %d answered %s %u for key %llu shard %u from rank %d, which is not "
                 "what was asked",
                 sub->server_rank, gs__ps_msg_type_name(m.type), (unsigned)m.seq,
                 (unsigned long long)m.key, (unsigned)m.shard, (int)m.src);
        gs__ps_sub_error(sub, GS_ERR_PROTOCOL, msg);
        return;
    }
    if (m.status != GS_OK) {
        snprintf(msg, sizeof(msg), "server rank %d: %s", sub->server_rank, m.text);
        gs__ps_sub_error(sub, (gs_status_t)m.status, msg);
    }
}

/* A remote sub whose answer will not come (the handle failed, or twice the
 * deadline passed): take it out of the table unless rx is handing it over
 * right now. done_mu held on entry and exit. */
static void remote_give_up(gs_ps_t ps, gs__ps_sub_t *sub, int timed_out)
{
    int removed;

    pthread_mutex_unlock(&ps->done_mu);
    pthread_mutex_lock(&ps->cl.pend_mu);
    removed = gs__ps_pend_unlink_locked(ps, sub);
    pthread_mutex_unlock(&ps->cl.pend_mu);
    if (removed && timed_out && (atomic_load(&ps->error) == GS_OK)) {
        char msg[GS_ERROR_MSG_MAX];

        snprintf(msg, sizeof(msg),
                 "server rank %d did not answer within twice the deadline (%d ms)",
                 sub->server_rank, 2 * ps->cfg.timeout_ms);
        gs__ps_fail(ps, GS_ERR_TIMEOUT, msg, 1);
    }
    pthread_mutex_lock(&ps->done_mu);
    if (removed) {
        pthread_mutex_lock(&ps->err_mu);
        sub->lc.status = (gs_status_t)atomic_load(&ps->error);
        snprintf(sub->lc.errmsg, sizeof(sub->lc.errmsg), "%s", ps->errmsg);
        pthread_mutex_unlock(&ps->err_mu);
        sub->lc.done = 1;
    }
}

/*
 * Wait until @p sub is answered (by the server thread for a local sub, by
 * rx for a remote one); 1 once it is, 0 while not (non-blocking). The
 * server thread bounds each of its own waits, so twice the deadline
 * without an answer means something is stuck: the handle fails (which
 * makes every party answer at once). A local op is always answered by the
 * server thread, which still writes into the sub, so it is waited for;
 * a remote one is given up once the handle has failed.
 */
static int sub_wait_answer(gs_ps_t ps, gs__ps_sub_t *sub, int block, uint64_t timeout_ns)
{
    const uint64_t dl = gs__now_ns() + 2 * timeout_ns;
    int expired = 0;
    int done;

    pthread_mutex_lock(&ps->done_mu);
    while (!sub->lc.done) {
        const int failed = atomic_load(&ps->error) != GS_OK;
        struct timespec ts;
        uint64_t wake;

        if (!sub->local && (failed || expired)) {
            remote_give_up(ps, sub, expired);
            if (sub->lc.done) {
                break;
            }
        }
        if (!block) {
            break;
        }
        if (expired && sub->local) {
            pthread_cond_wait(&ps->done_cv, &ps->done_mu);
            continue;
        }
        /* Look at the handle's health now and then: a failure wakes done_cv
         * too, but only once. */
        wake = gs__now_ns() + 100000000ull;
        wake = (wake < dl) ? wake : dl;
        ts.tv_sec = (time_t)(wake / 1000000000ull);
        ts.tv_nsec = (long)(wake % 1000000000ull);
        if ((pthread_cond_timedwait(&ps->done_cv, &ps->done_mu, &ts) != 0) &&
            (gs__now_ns() >= dl) && !expired) {
            expired = 1;
            if (sub->local) {
                pthread_mutex_unlock(&ps->done_mu);
                gs__ps_fail(ps, GS_ERR_TIMEOUT,
                            "this rank's server thread did not answer within twice the deadline",
                            1);
                pthread_mutex_lock(&ps->done_mu);
            }
        }
    }
    done = sub->lc.done;
    pthread_mutex_unlock(&ps->done_mu);
    return done;
}

/* Advance one sub; GS_INPROGRESS while some piece is pending. */
static gs_status_t sub_step(gs_ps_t ps, const struct gs_ps_request *req, gs__ps_sub_t *sub,
                            int block, uint64_t timeout_ns)
{
    if (sub->finished) {
        return GS_OK;
    }
    if ((step_req(sub, &sub->hdr_req, block, "sending to") == GS_INPROGRESS) && !block) {
        return GS_INPROGRESS;
    }
    if (!sub->answered) {
        if (!sub_wait_answer(ps, sub, block, timeout_ns)) {
            return GS_INPROGRESS;
        }
        sub->answered = 1;
        if (sub->lc.status != GS_OK) {
            gs__ps_sub_error(sub, sub->lc.status, sub->lc.errmsg);
        } else if (!sub->local) {
            check_answer(req, sub, ps->nranks);
        }
    }
    if (sub->rndv) {
        /* The server answers only once it has the payload, so its send was
         * posted by now, unless the request failed: then no CTS will come. */
        pthread_mutex_lock(&ps->cl.rndv_mu);
        gs__ps_rndv_unlink_locked(ps, sub);
        sub->rndv = 0;
        pthread_mutex_unlock(&ps->cl.rndv_mu);
    }
    if ((step_req(sub, &sub->data_send, block, "sending to") == GS_INPROGRESS) && !block) {
        return GS_INPROGRESS;
    }
    if ((step_req(sub, &sub->data_req, block, "receiving from") == GS_INPROGRESS) && !block) {
        return GS_INPROGRESS;
    }
    sub->finished = 1;
    return GS_OK;
}

/* Advance every sub; on completion record the request's status and text. */
static gs_status_t req_step(struct gs_ps_request *req, int block)
{
    gs_ps_t ps = req->ps;
    int pending = 0;

    if (req->finished) {
        return GS_OK;
    }
    for (uint32_t i = 0; i < req->nsubs; i++) {
        if (sub_step(ps, req, &req->subs[i], block, ps->cfg.timeout_ns) == GS_INPROGRESS) {
            pending = 1;
            if (!block) {
                break;
            }
        }
    }
    if (pending) {
        return GS_INPROGRESS;
    }
    req->status = GS_OK;
    for (uint32_t i = 0; i < req->nsubs; i++) {
        gs__ps_sub_t *sub = &req->subs[i];

        if ((sub->status != GS_OK) && (req->status == GS_OK)) {
            req->status = sub->status;
            snprintf(req->errmsg, sizeof(req->errmsg), "%s: key %llu: %.440s",
                     req->is_pull ? "gs_ps_pull" : "gs_ps_push", (unsigned long long)req->key->key,
                     sub->errmsg);
        }
        free(sub->enc);
        sub->enc = NULL;
    }
    req->finished = 1;
    if (!req->is_pull && (req->status == GS_ERR_INVALID_USAGE)) {
        /* A server refused the push (BSP: too many rounds ahead; or it came
         * after the worker's next clock): it is not this clock's push of
         * the key, so a pull of the clock waits for the previous round, not
         * for this worker's own push that never counted, and the key may
         * be pushed again. */
        pthread_mutex_lock(&req->key->mu);
        if (req->key->last_push == req->clock) {
            req->key->last_push = req->prev_push;
        }
        pthread_mutex_unlock(&req->key->mu);
    }
    if ((req->status != GS_OK) && (gs_status_scope(req->status) >= GS_SCOPE_PEER) &&
        (req->status != GS_ERR_TIMEOUT) && (req->status != GS_ERR_PROTOCOL)) {
        /* A rank died or the communicator failed: the handle is done for. */
        gs__ps_fail(ps, req->status, req->errmsg, 0);
    }
    return GS_OK;
}

void gs__ps_request_finish(struct gs_ps_request *req)
{
    (void)req_step(req, 1);
}

/* Hand the result to the caller and free the request. */
static gs_status_t req_release(gs_ps_request_t *req)
{
    struct gs_ps_request *r = *req;
    const gs_status_t status = r->status;

    gs__ps_req_unlink(r);
    if (status != GS_OK) {
        gs__error_copy_in(r->errmsg);
    }
    free(r->subs);
    free(r);
    *req = GS_PS_REQUEST_NULL;
    return status;
}

gs_status_t gs_ps_wait(gs_ps_request_t *req)
{
    if (req == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_ps_wait: req is NULL");
    }
    if (*req == GS_PS_REQUEST_NULL) {
        return GS_OK;
    }
    (void)req_step(*req, 1);
    return req_release(req);
}

gs_status_t gs_ps_test(gs_ps_request_t *req)
{
    if (req == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_ps_test: req is NULL");
    }
    if (*req == GS_PS_REQUEST_NULL) {
        return GS_OK;
    }
    if (req_step(*req, 0) == GS_INPROGRESS) {
        return GS_INPROGRESS;
    }
    return req_release(req);
}

gs_status_t gs_ps_waitall(size_t n, gs_ps_request_t *reqs)
{
    gs__error_first_t first = {GS_OK, ""};

    if ((reqs == NULL) && (n > 0)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_ps_waitall: reqs is NULL but n is %zu", n);
    }
    for (size_t i = 0; i < n; i++) {
        gs__error_first_keep(&first, gs_ps_wait(&reqs[i]));
    }
    return gs__error_first_end(&first);
}
