/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The parameter server's queue of ops (rx and this rank's worker put, the
 * server thread takes) and its staging buffers for push payloads. Queueing
 * merges a worker's consecutive CLOCK ops while they wait, so that a flood
 * of clocks costs one op; a staging buffer has the capacity of what its
 * push announced (gs__ps_stage_cap()), from a per-shard pool that keeps at
 * most one buffer per worker. ps_limits.h has the bounds and why.
 *
 * This file does not decide when a push is staged (ps_rx.c, ps_server.c)
 * and never touches shard values.
 */
#include "ps/ps_impl.h"

#include <stdlib.h>

/* A worker's push, pull, clock or bye: what held.q_clock follows. */
static int op_of_worker(const gs__ps_op_t *op)
{
    return (op->worker >= 0) && ((op->type == GS_PS_OP_PUSH) || (op->type == GS_PS_OP_PULL) ||
                                 (op->type == GS_PS_OP_CLOCK) || (op->type == GS_PS_OP_BYE));
}

void gs__ps_enqueue(gs_ps_t ps, gs__ps_op_t *op)
{
    if (op == NULL) {
        return;
    }
    op->next = NULL;
    pthread_mutex_lock(&ps->q_mu);
    if (op_of_worker(op)) {
        gs__ps_op_t **last = &ps->held.q_clock[op->worker];

        if (op->type != GS_PS_OP_CLOCK) {
            *last = NULL;
        } else if ((*last != NULL) && (op->clock == (*last)->clock_to + 1)) {
            /* Nothing of this worker between the two: one op moves its
             * clock over both, so clocks cost no memory however fast they
             * come. */
            (*last)->clock_to = op->clock;
            pthread_mutex_unlock(&ps->q_mu);
            free(op);
            return;
        } else {
            op->clock_to = op->clock;
            *last = op;
        }
    }
    if (ps->q_tail != NULL) {
        ps->q_tail->next = op;
    } else {
        ps->q_head = op;
    }
    ps->q_tail = op;
    pthread_cond_signal(&ps->q_cv);
    pthread_mutex_unlock(&ps->q_mu);
}

gs__ps_op_t *gs__ps_dequeue_locked(gs_ps_t ps)
{
    gs__ps_op_t *op = ps->q_head;

    if (op == NULL) {
        return NULL;
    }
    ps->q_head = op->next;
    if (ps->q_head == NULL) {
        ps->q_tail = NULL;
    }
    if (op_of_worker(op) && (ps->held.q_clock[op->worker] == op)) {
        ps->held.q_clock[op->worker] = NULL; /* taken: merge no more into it */
    }
    return op;
}

void gs__ps_queue_discard(gs_ps_t ps)
{
    gs__ps_op_t *op;

    pthread_mutex_lock(&ps->q_mu);
    op = ps->q_head;
    ps->q_head = NULL;
    ps->q_tail = NULL;
    for (int w = 0; w < ps->roles.nworkers; w++) {
        ps->held.q_clock[w] = NULL;
    }
    pthread_mutex_unlock(&ps->q_mu);
    while (op != NULL) {
        gs__ps_op_t *next = op->next;

        (void)gs_wait(&op->data_req); /* GS_OK for GS_REQUEST_NULL; bounded otherwise */
        if ((op->buf != NULL) && (op->shard != NULL)) {
            gs__ps_buf_put(ps, op->shard, op->buf);
        }
        free(op);
        op = next;
    }
}

gs__ps_buf_t *gs__ps_buf_get(gs_ps_t ps, gs__ps_shard_t *shard, size_t need)
{
    const size_t cap = gs__ps_stage_cap(need, shard->wire_cap);
    gs__ps_buf_t *b = NULL;

    pthread_mutex_lock(&ps->pool_mu);
    for (gs__ps_buf_t **pp = &shard->pool; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->cap == cap) {
            b = *pp;
            *pp = b->next;
            shard->pool_bytes -= b->cap;
            shard->pool_n--;
            break;
        }
    }
    pthread_mutex_unlock(&ps->pool_mu);
    if (b != NULL) {
        return b;
    }
    b = calloc(1, sizeof(*b));
    if (b == NULL) {
        return NULL;
    }
    b->data = malloc(cap);
    if (b->data == NULL) {
        free(b);
        return NULL;
    }
    b->cap = cap;
    return b;
}

void gs__ps_buf_put(gs_ps_t ps, gs__ps_shard_t *shard, gs__ps_buf_t *buf)
{
    const unsigned max_n = (ps->roles.nworkers > 0) ? (unsigned)ps->roles.nworkers : 1u;
    const size_t max_bytes = (size_t)max_n * shard->wire_cap;
    int pooled = 0;

    if (buf == NULL) {
        return;
    }
    pthread_mutex_lock(&ps->pool_mu);
    if ((shard->pool_n < max_n) && (buf->cap <= max_bytes - shard->pool_bytes)) {
        buf->next = shard->pool;
        shard->pool = buf;
        shard->pool_bytes += buf->cap;
        shard->pool_n++;
        pooled = 1;
    }
    pthread_mutex_unlock(&ps->pool_mu);
    if (!pooled) {
        free(buf->data);
        free(buf);
    }
}
