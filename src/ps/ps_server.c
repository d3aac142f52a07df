/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The server thread of the parameter server: the only thread that reads or
 * writes shard state. It runs the queued ops in order (pushes, pulls and
 * clocks from remote workers, queued by ps_rx.c, and from this rank's own
 * worker, queued by ps_client.c), applies the update rule, parks pulls
 * whose round is not ready and answers them when it is or when half the
 * deadline has passed, and sends the heartbeats that keep the other ranks'
 * any-source receives inside their deadline.
 *
 * BSP: pushes of the shard's current round are summed into the shard's
 * accumulator; a push of a later round (a worker ahead that did not pull)
 * waits in the shard's deferred list, holding its payload as it was
 * received (a compressed one is decoded when its round opens, so a codec
 * cannot make a kept push larger than what was sent), at most
 * GS_PS_BSP_MAX_AHEAD per worker and shard (ps_consistency.h says why that
 * never refuses a worker that pulls); past it the push is refused with
 * GS_ERR_INVALID_USAGE. When every worker pushed the round or moved past
 * it, the rule is applied once with the sum, the round advances and the
 * deferred pushes of the new round are added. SSP and ASP apply every push
 * as it comes.
 *
 * Limits (ps_limits.h): a remote request counts against its worker's
 * GS_PS_MAX_INFLIGHT until it is answered (the count drops before the
 * answer leaves); a push that rx queued without staging its payload is
 * staged here, when its turn comes (the receive posted and, for a large
 * one, the CTS sent). The queue and the staging buffers are ps_queue.c's.
 *
 * The values of a shard are sent to remote pullers straight from shard
 * memory; every send that reads them completes before they change
 * (wsends), so a puller never sees a torn update.
 *
 * This file deliberately does not receive control messages (ps_rx.c) and
 * does not choose placements (ps_shard.c).
 */
#include "ps/ps_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/dtype.h"
#include "core/log.h"

/* ====================================================================== */
/* Sends                                                                  */
/* ====================================================================== */

gs_status_t gs__ps_sends_wait(gs__ps_send_t **list)
{
    gs_status_t first = GS_OK;
    char msg[GS_ERROR_MSG_MAX] = "";

    while (*list != NULL) {
        gs__ps_send_t *s = *list;
        const gs_status_t status = gs_wait(&s->req);

        if ((status != GS_OK) && (first == GS_OK)) {
            first = status;
            snprintf(msg, sizeof(msg), "%s", gs__error_get());
        }
        *list = s->next;
        free(s);
    }
    if (first != GS_OK) {
        gs__error_copy_in(msg);
    }
    return first;
}

/* Release the sends of @p list that have finished; the first error. */
static gs_status_t sends_reap(gs__ps_send_t **list)
{
    gs_status_t first = GS_OK;

    while (*list != NULL) {
        gs__ps_send_t *s = *list;
        const gs_status_t status = gs_test(&s->req);

        if (status == GS_INPROGRESS) {
            list = &s->next;
            continue;
        }
        if ((status != GS_OK) && (first == GS_OK)) {
            first = status;
        }
        *list = s->next;
        free(s);
    }
    return first;
}

/* A failure of this rank's side that ends the parameter server. */
static void srv_fatal(gs_ps_t ps, gs_status_t status, const char *what)
{
    char msg[GS_ERROR_MSG_MAX];

    snprintf(msg, sizeof(msg), "parameter server rank %d: %s: %s", ps->rank, what, gs__error_get());
    gs__ps_fail(ps, status, msg, status != GS_ERR_PEER_FAILED);
}

static int failed(gs_ps_t ps)
{
    return atomic_load(&ps->error) != GS_OK;
}

/* Send a control message (the buffer lives in the tracked send). */
static void send_ctrl(gs_ps_t ps, int dst, uint32_t tag, const gs__ps_msg_t *m)
{
    gs__ps_send_t *s = calloc(1, sizeof(*s));
    gs_status_t status;

    if (s == NULL) {
        gs__error_set(GS_ERR_NO_MEMORY, "out of memory");
        srv_fatal(ps, GS_ERR_NO_MEMORY, "sending an answer");
        return;
    }
    gs__ps_msg_encode(m, s->msg);
    status = gs_isend(ps->comm, s->msg, GS_PS_MSG_BYTES, GS_DTYPE_U8, dst, tag, &s->req);
    if (status != GS_OK) {
        free(s);
        srv_fatal(ps, status, "sending to a worker");
        return;
    }
    s->next = ps->srv.sends;
    ps->srv.sends = s;
}

/* Send a fixed message (heartbeat, bye) to every other rank. */
static void send_all(gs_ps_t ps, const uint8_t *msg)
{
    for (int r = 0; (r < ps->nranks) && !failed(ps); r++) {
        gs__ps_send_t *s;
        gs_status_t status;

        if (r == ps->rank) {
            continue;
        }
        s = calloc(1, sizeof(*s));
        if (s == NULL) {
            gs__error_set(GS_ERR_NO_MEMORY, "out of memory");
            srv_fatal(ps, GS_ERR_NO_MEMORY, "sending a heartbeat");
            return;
        }
        memcpy(s->msg, msg, GS_PS_MSG_BYTES);
        status = gs_isend(ps->comm, s->msg, GS_PS_MSG_BYTES, GS_DTYPE_U8, r,
                          gs__ps_tag(GS_PS_TAG_KIND_CTRL, 0), &s->req);
        if (status != GS_OK) {
            free(s);
            srv_fatal(ps, status, "sending a heartbeat");
            return;
        }
        s->next = ps->srv.sends;
        ps->srv.sends = s;
    }
}

/* Before the values of @p sh change: every send reading them is done. */
static void shard_quiesce(gs_ps_t ps, gs__ps_shard_t *sh)
{
    const gs_status_t status = gs__ps_sends_wait(&sh->wsends);

    if (status != GS_OK) {
        srv_fatal(ps, status, "sending values to a worker");
    }
}

/* ====================================================================== */
/* Answers                                                                */
/* ====================================================================== */

static void complete_local(gs_ps_t ps, gs__ps_op_t *op, gs_status_t status, const char *text);

/* Complete a local op with the sticky error and its sentence. */
static void complete_failed(gs_ps_t ps, gs__ps_op_t *op)
{
    char msg[GS_ERROR_MSG_MAX];
    gs_status_t status;

    pthread_mutex_lock(&ps->err_mu);
    status = (gs_status_t)atomic_load(&ps->error);
    snprintf(msg, sizeof(msg), "%s", ps->errmsg);
    pthread_mutex_unlock(&ps->err_mu);
    complete_local(ps, op, status, msg);
}

static void complete_local(gs_ps_t ps, gs__ps_op_t *op, gs_status_t status, const char *text)
{
    gs__ps_local_t *lc = op->local;

    if (lc == NULL) {
        return;
    }
    pthread_mutex_lock(&ps->done_mu);
    lc->status = status;
    if (status != GS_OK) {
        snprintf(lc->errmsg, sizeof(lc->errmsg), "%s", text);
    }
    lc->done = 1;
    pthread_cond_broadcast(&ps->done_cv);
    pthread_mutex_unlock(&ps->done_mu);
    op->local = NULL;
}

static void answer_msg(gs_ps_t ps, const gs__ps_op_t *op, uint8_t type, gs_status_t status,
                       const char *text, gs__ps_msg_t *m)
{
    const gs__ps_shard_t *sh = op->shard;

    memset(m, 0, sizeof(*m));
    m->type = type;
    m->src = ps->rank;
    m->seq = op->seq;
    m->dtype = (uint8_t)sh->key->dtype;
    m->key = sh->key->key;
    m->shard = sh->index;
    m->offset = sh->offset;
    m->count = sh->count;
    m->status = (int32_t)status;
    m->clock = (ps->cfg.consistency == GS_PS_BSP) ? sh->round : op->clock;
    if (status != GS_OK) {
        snprintf(m->text, sizeof(m->text), "%s", (text[0] != '\0') ? text : gs_strerror(status));
    }
}

/* A remote request is answered: it stops counting against its worker's
 * limit. Called before the answer leaves, so that this server never counts
 * more than the worker, which holds the slot until the answer arrives. */
static void op_settle(gs_ps_t ps, gs__ps_op_t *op)
{
    if (op->counted) {
        op->counted = 0;
        (void)atomic_fetch_sub(&ps->held.reqs[op->worker], 1u);
    }
}

/* The server thread is done with the payload rx staged for @p op: the
 * worker may have another push staged. */
static void op_unstage(gs_ps_t ps, gs__ps_op_t *op)
{
    if (op->charge > 0) {
        (void)atomic_fetch_sub(&ps->held.staged_bytes[op->worker], op->charge);
        (void)atomic_fetch_sub(&ps->held.staged_ops[op->worker], 1u);
        op->charge = 0;
    }
}

static void answer_push(gs_ps_t ps, gs__ps_op_t *op, gs_status_t status, const char *text)
{
    gs__ps_msg_t m;

    op_settle(ps, op);
    if (op->local != NULL) {
        complete_local(ps, op, status, text);
        return;
    }
    if (failed(ps) || (op->src == ps->rank)) {
        return;
    }
    answer_msg(ps, op, GS_PS_MSG_ACK, status, text, &m);
    send_ctrl(ps, op->src, gs__ps_tag(GS_PS_TAG_KIND_CTRL, 0), &m);
}

static void answer_pull(gs_ps_t ps, gs__ps_op_t *op, gs_status_t status, const char *text)
{
    gs__ps_shard_t *sh = op->shard;
    gs__ps_send_t *s;
    gs__ps_msg_t m;
    gs_status_t st;

    op_settle(ps, op);
    if (op->local != NULL) {
        if (status == GS_OK) {
            memcpy(op->out, sh->w, sh->bytes);
        }
        complete_local(ps, op, status, text);
        return;
    }
    if (failed(ps)) {
        return;
    }
    answer_msg(ps, op, GS_PS_MSG_REPLY, status, text, &m);
    send_ctrl(ps, op->src, gs__ps_tag(GS_PS_TAG_KIND_CTRL, 0), &m);
    /* The worker posted the values' receive: they go also on error. */
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        gs__error_set(GS_ERR_NO_MEMORY, "out of memory");
        srv_fatal(ps, GS_ERR_NO_MEMORY, "answering a pull");
        return;
    }
    st = gs_isend(ps->comm, sh->w, sh->bytes, GS_DTYPE_U8, op->src,
                  gs__ps_tag(GS_PS_TAG_KIND_PULL_DATA, op->seq), &s->req);
    if (st != GS_OK) {
        free(s);
        srv_fatal(ps, st, "answering a pull");
        return;
    }
    s->next = sh->wsends;
    sh->wsends = s;
}

/* Answer a pull whose round is ready: its values, or the error of the BSP
 * round it waited for when the callback refused that round. */
static void answer_ready(gs_ps_t ps, gs__ps_op_t *op)
{
    const gs__ps_shard_t *sh = op->shard;

    if ((sh->err_status != GS_OK) && (ps->cfg.consistency == GS_PS_BSP) &&
        (gs__ps_pull_round(op->clock, op->pushed) == sh->err_round)) {
        answer_pull(ps, op, sh->err_status, sh->err_text);
        return;
    }
    answer_pull(ps, op, GS_OK, "");
}

/* ====================================================================== */
/* Consistency                                                            */
/* ====================================================================== */

/* -1 when the pull may be answered, else the first worker holding it. */
static int pull_blocker(const gs_ps_t ps, const gs__ps_op_t *op)
{
    const gs__ps_shard_t *sh = op->shard;
    const int64_t r = gs__ps_pull_round(op->clock, op->pushed);

    switch (ps->cfg.consistency) {
    case GS_PS_BSP:
        if (sh->round > r) {
            return -1;
        }
        {
            const int b =
                gs__ps_bsp_blocker(sh->pushed, ps->srv.wclock, ps->roles.nworkers, sh->round);
            return (b >= 0) ? b : 0;
        }
    case GS_PS_SSP:
        return gs__ps_ssp_blocker(sh->pushed_clock, ps->srv.wclock, ps->roles.nworkers,
                                  r - ps->cfg.staleness);
    default:
        return -1;
    }
}

/* "worker ranks 2, 5 have neither pushed ... " for a pull that waited too long. */
static void describe_blockers(const gs_ps_t ps, const gs__ps_op_t *op, char *out, size_t len)
{
    const gs__ps_shard_t *sh = op->shard;
    const int64_t r = gs__ps_pull_round(op->clock, op->pushed);
    const int64_t need = (ps->cfg.consistency == GS_PS_BSP) ? sh->round : r - ps->cfg.staleness;
    size_t used;
    int n = 0;

    used = (size_t)snprintf(out, len, "pull of key %llu (clock %lld) waited %d ms for worker ranks",
                            (unsigned long long)sh->key->key, (long long)op->clock,
                            ps->cfg.timeout_ms / 2);
    for (int w = 0; (w < ps->roles.nworkers) && (used < len); w++) {
        const int holds = (ps->cfg.consistency == GS_PS_BSP)
                              ? ((sh->pushed[w] == 0) && (ps->srv.wclock[w] <= need))
                              : !gs__ps_worker_done(sh->pushed_clock[w], ps->srv.wclock[w], need);

        if (holds) {
            used += (size_t)snprintf(out + used, len - used, "%s %d", (n > 0) ? "," : "",
                                     gs__ps_worker_rank(&ps->roles, w));
            n++;
        }
    }
    if (used < len) {
        snprintf(out + used, len - used, " to push round %lld or pass it (%s)", (long long)need,
                 (ps->cfg.consistency == GS_PS_BSP) ? "BSP" : "SSP");
    }
}

static void recheck_parked(gs_ps_t ps)
{
    gs__ps_op_t **pp = &ps->srv.parked;

    while (*pp != NULL) {
        gs__ps_op_t *op = *pp;

        if (pull_blocker(ps, op) >= 0) {
            pp = &op->next;
            continue;
        }
        *pp = op->next;
        answer_ready(ps, op);
        free(op);
    }
}

/* Answer the parked pulls whose deadline passed; returns the next deadline. */
static uint64_t expire_parked(gs_ps_t ps, uint64_t now)
{
    gs__ps_op_t **pp = &ps->srv.parked;
    uint64_t next = UINT64_MAX;

    while (*pp != NULL) {
        gs__ps_op_t *op = *pp;
        char text[GS_PS_MSG_TEXT_MAX];

        if (op->deadline_ns > now) {
            if (op->deadline_ns < next) {
                next = op->deadline_ns;
            }
            pp = &op->next;
            continue;
        }
        *pp = op->next;
        describe_blockers(ps, op, text, sizeof(text));
        GS_INFO(PS, "rank %d: %s", ps->rank, text);
        answer_pull(ps, op, GS_ERR_TIMEOUT, text);
        free(op);
    }
    return next;
}

/* ====================================================================== */
/* Pushes                                                                 */
/* ====================================================================== */

/* The gradient of a push in the accumulator type (no copy for f32, f64). */
static const void *as_acc(gs_ps_t ps, const gs__ps_shard_t *sh, const void *data)
{
    const gs_dtype_t dt = sh->key->dtype;
    const size_t need = sh->count * sizeof(float);

    if ((dt == GS_DTYPE_F32) || (dt == GS_DTYPE_F64)) {
        return data;
    }
    if (ps->srv.gbuf_cap < need) {
        void *nb = realloc(ps->srv.gbuf, need);

        if (nb == NULL) {
            return NULL;
        }
        ps->srv.gbuf = nb;
        ps->srv.gbuf_cap = need;
    }
    gs__ps_accumulate(dt, ps->srv.gbuf, data, sh->count, 1);
    return ps->srv.gbuf;
}

/* Decode a compressed push into srv.dec; NULL (text set) when malformed. */
static const void *decode_push(gs_ps_t ps, const gs__ps_shard_t *sh, const void *payload,
                               size_t len, gs_status_t *status_out, char *text, size_t tlen)
{
    const gs_dtype_t dt = sh->key->dtype;
    size_t ssz = 0;
    gs_status_t status;

    status = gs_codec_scratch_size(&ps->cfg.codec, sh->count, dt, &ssz);
    if ((status == GS_OK) && (ps->srv.scratch_cap < ssz)) {
        void *nb = realloc(ps->srv.scratch, ssz);

        status = (nb == NULL) ? GS_ERR_NO_MEMORY : GS_OK;
        if (nb != NULL) {
            ps->srv.scratch = nb;
            ps->srv.scratch_cap = ssz;
        }
    }
    if ((status == GS_OK) && (ps->srv.dec_cap < sh->bytes)) {
        void *nb = realloc(ps->srv.dec, sh->bytes);

        status = (nb == NULL) ? GS_ERR_NO_MEMORY : GS_OK;
        if (nb != NULL) {
            ps->srv.dec = nb;
            ps->srv.dec_cap = sh->bytes;
        }
    }
    if (status == GS_OK) {
        status = gs_codec_decode(&ps->cfg.codec, payload, len, sh->count, dt, ps->srv.scratch, ssz,
                                 ps->srv.dec);
    }
    if (status != GS_OK) {
        snprintf(text, tlen, "could not decode the compressed push of key %llu shard %u: %s",
                 (unsigned long long)sh->key->key, (unsigned)sh->index,
                 (status == GS_ERR_NO_MEMORY) ? "out of memory" : gs__error_get());
        *status_out = status;
        return NULL;
    }
    return ps->srv.dec;
}

static int all_left(const gs_ps_t ps)
{
    for (int w = 0; w < ps->roles.nworkers; w++) {
        if (ps->srv.wclock[w] != GS_PS_CLOCK_LEFT) {
            return 0;
        }
    }
    return 1;
}

/* Add a push kept for a later round to that round, now open: decode it
 * (it is kept as received) and sum it. */
static void bsp_add_kept(gs_ps_t ps, gs__ps_shard_t *sh, gs__ps_op_t *op)
{
    const void *data = op->buf->data;
    gs_status_t status = GS_OK;
    char text[GS_PS_MSG_TEXT_MAX] = "";

    if (op->compressed) {
        data = decode_push(ps, sh, data, op->nbytes, &status, text, sizeof(text));
    }
    if (data != NULL) {
        gs__ps_accumulate(sh->key->dtype, sh->acc, data, sh->count, !sh->acc_has);
        sh->acc_has = 1;
    } else {
        /* It was decoded once when it came, and the buffers it needs are
         * there since: not expected. The round goes on without it, and the
         * pulls that wait for the round get the error. */
        sh->err_status = status;
        sh->err_round = sh->round;
        snprintf(sh->err_text, sizeof(sh->err_text),
                 "round %lld of key %llu: worker rank %d: %.96s", (long long)sh->round,
                 (unsigned long long)sh->key->key, op->src, text);
    }
    sh->pushed[op->worker] = 1;
    sh->kept[op->worker]--;
    gs__ps_buf_put(ps, sh, op->buf);
    free(op);
}

/* Apply the round and advance it while it is complete (BSP). */
static void bsp_advance(gs_ps_t ps, gs__ps_shard_t *sh)
{
    const gs_dtype_t dt = sh->key->dtype;

    while (gs__ps_bsp_blocker(sh->pushed, ps->srv.wclock, ps->roles.nworkers, sh->round) < 0) {
        gs__ps_op_t **pp;

        if (!sh->acc_has && (sh->deferred_head == NULL) && all_left(ps)) {
            break; /* every worker left: nothing more will come */
        }

        if (sh->acc_has) {
            gs_status_t status;

            shard_quiesce(ps, sh);
            status = gs__ps_apply(&ps->cfg.rule, sh->key->key, sh->offset, dt, sh->w, sh->acc,
                                  sh->count, &sh->opt);
            if (status != GS_OK) {
                /* The callback refused the round: the pulls that wait for this
                 * round get its error; the shard stays as the callback left it. */
                sh->err_status = status;
                sh->err_round = sh->round;
                snprintf(sh->err_text, sizeof(sh->err_text), "round %lld of key %llu: %s",
                         (long long)sh->round, (unsigned long long)sh->key->key, gs__error_get());
            }
        }
        sh->round++;
        sh->acc_has = 0;
        memset(sh->pushed, 0, (size_t)ps->roles.nworkers);
        /* Pushes that were ahead and belong to the new round. */
        pp = &sh->deferred_head;
        sh->deferred_tail = NULL;
        while (*pp != NULL) {
            gs__ps_op_t *op = *pp;

            if (op->clock != sh->round) {
                sh->deferred_tail = op;
                pp = &op->next;
                continue;
            }
            *pp = op->next;
            bsp_add_kept(ps, sh, op);
        }
    }
}

/* Keep a push of a later round as it was received (op->nbytes bytes, a
 * codec payload when compressed); a local push is copied, since the
 * caller's buffer is the caller's again once the push is answered. */
static int bsp_defer(gs_ps_t ps, gs__ps_shard_t *sh, gs__ps_op_t *op)
{
    if (op->buf == NULL) {
        gs__ps_buf_t *b = gs__ps_buf_get(ps, sh, op->nbytes);

        if (b == NULL) {
            return -1;
        }
        memcpy(b->data, op->data, op->nbytes);
        op->buf = b;
    }
    op->data = NULL;
    sh->kept[op->worker]++;
    op->next = NULL;
    if (sh->deferred_tail != NULL) {
        sh->deferred_tail->next = op;
    } else {
        sh->deferred_head = op;
    }
    sh->deferred_tail = op;
    return 0;
}

/* Post the payload receive of a push rx queued without staging it (its
 * worker had as much staged as allowed) and clear a large one to send.
 * Fails the parameter server when that is impossible. */
static void srv_stage(gs_ps_t ps, gs__ps_op_t *op)
{
    const gs__ps_shard_t *sh = op->shard;
    gs__ps_msg_t m;
    gs_status_t status;

    op->buf = gs__ps_buf_get(ps, op->shard, op->nbytes);
    if (op->buf == NULL) {
        gs__error_set(GS_ERR_NO_MEMORY, "out of memory for a push of %zu bytes from rank %d",
                      op->nbytes, op->src);
        srv_fatal(ps, GS_ERR_NO_MEMORY, "staging a push");
        return;
    }
    status = gs_irecv(ps->comm, op->buf->data, op->nbytes, GS_DTYPE_U8, op->src,
                      gs__ps_tag(GS_PS_TAG_KIND_PUSH_DATA, op->seq), &op->data_req);
    if (status != GS_OK) {
        srv_fatal(ps, status, "posting the receive of a push");
        return;
    }
    if (op->rndv) {
        memset(&m, 0, sizeof(m));
        m.type = GS_PS_MSG_CTS;
        m.src = ps->rank;
        m.seq = op->seq;
        m.dtype = (uint8_t)sh->key->dtype;
        m.key = sh->key->key;
        m.shard = sh->index;
        m.offset = sh->offset;
        m.count = sh->count;
        m.nbytes = op->nbytes;
        send_ctrl(ps, op->src, gs__ps_tag(GS_PS_TAG_KIND_CTRL, 0), &m);
    }
}

/* Another push of worker @p w kept for round @p clock: a second push. */
static int kept_has(const gs__ps_shard_t *sh, int w, int64_t clock)
{
    for (const gs__ps_op_t *o = sh->deferred_head; o != NULL; o = o->next) {
        if ((o->worker == w) && (o->clock == clock)) {
            return 1;
        }
    }
    return 0;
}

/* Wait for a remote push's payload; GS_OK, or the status to answer with. */
static gs_status_t wait_payload(gs_ps_t ps, gs__ps_op_t *op, char *text, size_t tlen)
{
    const gs_status_t status = gs_wait(&op->data_req);

    if (status == GS_OK) {
        return GS_OK;
    }
    snprintf(text, tlen, "receiving the push of key %llu from rank %d: %s",
             (unsigned long long)op->shard->key->key, op->src, gs__error_get());
    if ((status != GS_ERR_MISMATCH) && (status != GS_ERR_TRUNCATED)) {
        gs__error_copy_in(text);
        srv_fatal(ps, status, "receiving a push");
    }
    return status;
}

static void srv_push(gs_ps_t ps, gs__ps_op_t *op)
{
    gs__ps_shard_t *sh = op->shard;
    const void *data = op->data;
    const int w = op->worker;
    gs_status_t status = GS_OK;
    char text[GS_PS_MSG_TEXT_MAX] = "";
    int kept = 0;

    if (op->local == NULL) {
        if ((op->buf == NULL) && !failed(ps)) {
            srv_stage(ps, op);
        }
        if (op->buf != NULL) {
            /* Also after a failure: the posted receive must end before its
             * buffer goes back to the pool. */
            status = wait_payload(ps, op, text, sizeof(text));
            data = op->buf->data;
        }
    }
    if (failed(ps)) {
        complete_failed(ps, op);
        goto out;
    }
    if ((status == GS_OK) && op->compressed) {
        data = decode_push(ps, sh, data, op->nbytes, &status, text, sizeof(text));
    }
    if ((status == GS_OK) && (ps->cfg.consistency != GS_PS_ASP) &&
        (op->clock != ps->srv.wclock[w])) {
        status = GS_ERR_INVALID_USAGE;
        snprintf(text, sizeof(text),
                 "push of key %llu in clock %lld reached the server when worker rank %d was at "
                 "clock %lld (start a clock's pushes before its gs_ps_clock())",
                 (unsigned long long)sh->key->key, (long long)op->clock, op->src,
                 (long long)ps->srv.wclock[w]);
    }
    if (status != GS_OK) {
        answer_push(ps, op, status, text);
        goto out;
    }
    if (ps->cfg.consistency == GS_PS_BSP) {
        const int same = (op->clock > sh->round) && kept_has(sh, w, op->clock);

        switch (gs__ps_bsp_push_kind(op->clock, sh->round, sh->pushed[w], sh->kept[w], same)) {
        case GS_PS_BSP_TWICE:
            snprintf(text, sizeof(text), "second push of key %llu in round %lld by worker rank %d",
                     (unsigned long long)sh->key->key, (long long)op->clock, op->src);
            answer_push(ps, op, GS_ERR_INVALID_USAGE, text);
            goto out;
        case GS_PS_BSP_AHEAD:
            /* Nothing changes: the round completes without this push once
             * the worker clocks past it. */
            snprintf(text, sizeof(text),
                     "BSP: worker rank %d pushed key %llu for round %lld while round %lld is open "
                     "and %d later rounds are kept (limit %d); pull in every clock to wait for "
                     "the other workers",
                     op->src, (unsigned long long)sh->key->key, (long long)op->clock,
                     (long long)sh->round, (int)sh->kept[w], GS_PS_BSP_MAX_AHEAD);
            answer_push(ps, op, GS_ERR_INVALID_USAGE, text);
            goto out;
        case GS_PS_BSP_KEEP:
            if (bsp_defer(ps, sh, op) != 0) {
                snprintf(text, sizeof(text), "out of memory keeping a push of a later round");
                answer_push(ps, op, GS_ERR_NO_MEMORY, text);
                goto out;
            }
            kept = 1;
            answer_push(ps, op, GS_OK, "");
            goto out;
        default:
            break;
        }
        gs__ps_accumulate(sh->key->dtype, sh->acc, data, sh->count, !sh->acc_has);
        sh->acc_has = 1;
        sh->pushed[w] = 1;
        answer_push(ps, op, GS_OK, "");
        bsp_advance(ps, sh);
    } else {
        const void *g = as_acc(ps, sh, data);

        if (g == NULL) {
            answer_push(ps, op, GS_ERR_NO_MEMORY, "out of memory widening a half push");
            goto out;
        }
        shard_quiesce(ps, sh);
        status = gs__ps_apply(&ps->cfg.rule, sh->key->key, sh->offset, sh->key->dtype, sh->w, g,
                              sh->count, &sh->opt);
        if (status != GS_OK) {
            snprintf(text, sizeof(text), "%s", gs__error_get());
            answer_push(ps, op, status, text);
            goto out;
        }
        if (op->clock > sh->pushed_clock[w]) {
            sh->pushed_clock[w] = op->clock;
        }
        answer_push(ps, op, GS_OK, "");
    }
    recheck_parked(ps);
out:
    op_unstage(ps, op);
    if (!kept) {
        gs__ps_buf_put(ps, sh, op->buf);
        free(op);
    }
}

/* ====================================================================== */
/* Pulls, clocks, goodbyes                                                */
/* ====================================================================== */

static void srv_pull(gs_ps_t ps, gs__ps_op_t *op)
{
    if (failed(ps)) {
        complete_failed(ps, op);
        free(op);
        return;
    }
    if (ps->cfg.consistency == GS_PS_BSP) {
        bsp_advance(ps, op->shard); /* a key registered late catches up with the clocks */
    }
    if (pull_blocker(ps, op) < 0) {
        answer_ready(ps, op);
        free(op);
        return;
    }
    op->deadline_ns = gs__now_ns() + ps->cfg.timeout_ns / 2;
    op->next = ps->srv.parked;
    ps->srv.parked = op;
}

/* Something moved the workers' clocks: rounds may complete, pulls proceed. */
static void clocks_moved(gs_ps_t ps)
{
    if (ps->cfg.consistency == GS_PS_BSP) {
        pthread_rwlock_rdlock(&ps->reg.lock);
        for (size_t i = 0; (i < ps->reg.nserved) && !failed(ps); i++) {
            bsp_advance(ps, ps->reg.served[i]);
        }
        pthread_rwlock_unlock(&ps->reg.lock);
    }
    recheck_parked(ps);
}

static void srv_clock(gs_ps_t ps, gs__ps_op_t *op)
{
    int64_t *wc = &ps->srv.wclock[op->worker];
    const int64_t to = (op->clock_to > op->clock) ? op->clock_to : op->clock; /* merged clocks */

    if (!failed(ps)) {
        if ((*wc == GS_PS_CLOCK_LEFT) || (op->clock != *wc + 1)) {
            gs__error_set(GS_ERR_PROTOCOL, "rank %d announced clock %lld after clock %lld", op->src,
                          (long long)op->clock, (long long)*wc);
            srv_fatal(ps, GS_ERR_PROTOCOL, "a worker's clock");
        } else {
            *wc = to;
            clocks_moved(ps);
        }
    }
    free(op);
}

static void srv_bye(gs_ps_t ps, gs__ps_op_t *op)
{
    const int w = gs__ps_worker_of(&ps->roles, op->src);

    ps->srv.nbye++;
    if ((w >= 0) && !failed(ps)) {
        ps->srv.wclock[w] = GS_PS_CLOCK_LEFT; /* it will not hold anyone back */
        clocks_moved(ps);
    }
    free(op);
}

/* The sticky error is set: every local waiter learns it, parked pulls end. */
static void srv_drain_failed(gs_ps_t ps)
{
    gs__ps_op_t *op;

    while ((op = ps->srv.parked) != NULL) {
        ps->srv.parked = op->next;
        complete_failed(ps, op);
        free(op);
    }
}

static void srv_free_deferred(gs_ps_t ps)
{
    pthread_rwlock_rdlock(&ps->reg.lock);
    for (size_t i = 0; i < ps->reg.nserved; i++) {
        gs__ps_shard_t *sh = ps->reg.served[i];
        gs__ps_op_t *op;

        while ((op = sh->deferred_head) != NULL) {
            sh->deferred_head = op->next;
            gs__ps_buf_put(ps, sh, op->buf);
            free(op);
        }
        sh->deferred_tail = NULL;
        memset(sh->kept, 0, (size_t)ps->roles.nworkers);
        (void)gs__ps_sends_wait(&sh->wsends);
    }
    pthread_rwlock_unlock(&ps->reg.lock);
}

static void srv_handle(gs_ps_t ps, gs__ps_op_t *op)
{
    switch (op->type) {
    case GS_PS_OP_PUSH:
        srv_push(ps, op);
        break;
    case GS_PS_OP_PULL:
        srv_pull(ps, op);
        break;
    case GS_PS_OP_CLOCK:
        srv_clock(ps, op);
        break;
    case GS_PS_OP_BYE:
        srv_bye(ps, op);
        break;
    case GS_PS_OP_LEAVE:
        ps->srv.leaving = 1;
        if (!failed(ps)) {
            send_all(ps, ps->srv.bye_msg);
            if ((ps->worker >= 0) && (ps->server >= 0)) {
                ps->srv.wclock[ps->worker] = GS_PS_CLOCK_LEFT;
                clocks_moved(ps);
            }
        }
        free(op);
        break;
    default:
        free(op);
        break;
    }
}

/* ====================================================================== */
/* The thread                                                             */
/* ====================================================================== */

static int may_exit(const gs_ps_t ps)
{
    return ps->srv.leaving && (failed(ps) || (ps->srv.nbye >= ps->nranks - 1));
}

void *gs__ps_server_main(void *arg)
{
    gs_ps_t ps = (gs_ps_t)arg;
    uint64_t next_hb = gs__now_ns() + ps->cfg.heartbeat_ns;
    uint64_t next_parked = UINT64_MAX;

    gs__log_set_rank(ps->rank);
    for (;;) {
        gs__ps_op_t *op = NULL;
        uint64_t now;

        pthread_mutex_lock(&ps->q_mu);
        for (;;) {
            uint64_t wake = (next_parked < next_hb) ? next_parked : next_hb;
            struct timespec ts;

            if (ps->q_head != NULL) {
                op = gs__ps_dequeue_locked(ps);
                break;
            }
            if (may_exit(ps) || (failed(ps) && (ps->srv.parked != NULL))) {
                break;
            }
            now = gs__now_ns();
            if (now >= wake) {
                break;
            }
            ts.tv_sec = (time_t)(wake / 1000000000ull);
            ts.tv_nsec = (long)(wake % 1000000000ull);
            (void)pthread_cond_timedwait(&ps->q_cv, &ps->q_mu, &ts);
        }
        pthread_mutex_unlock(&ps->q_mu);

        if (op != NULL) {
            srv_handle(ps, op);
        }
        now = gs__now_ns();
        if (failed(ps)) {
            srv_drain_failed(ps);
        } else {
            next_parked = expire_parked(ps, now);
            if ((now >= next_hb) && (ps->nranks > 1)) {
                send_all(ps, ps->srv.hb_msg);
            }
        }
        if (now >= next_hb) {
            next_hb = now + ps->cfg.heartbeat_ns;
            const gs_status_t st = sends_reap(&ps->srv.sends);

            if (st != GS_OK) {
                srv_fatal(ps, st, "a send to a peer");
            }
        }
        if ((op == NULL) && may_exit(ps)) {
            pthread_mutex_lock(&ps->q_mu);
            op = ps->q_head;
            pthread_mutex_unlock(&ps->q_mu);
            if (op == NULL) {
                break;
            }
        }
    }
    srv_drain_failed(ps);
    srv_free_deferred(ps);
    (void)gs__ps_sends_wait(&ps->srv.sends);
    return NULL;
}
