/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Gradient bucketing, the step half: gs_bucketer_ready (any thread),
 * starting buckets strictly in bucket order, gs_bucketer_wait (copy out,
 * first error, the missing-tensor check) and the rebuild after the first
 * step from rank 0's broadcast ready order.
 *
 * Concurrency. ready() is lock-free except when its tensor completes a
 * bucket: each tensor has a "marked" flag (an atomic exchange catches a
 * second mark), each bucket a countdown of unmarked tensors, and the
 * thread whose decrement reaches zero takes the bucketer's mutex and
 * starts every complete bucket from the first unstarted one on, stopping
 * at the first incomplete one. So buckets start in index order on every
 * rank (the collective ordering rule), a complete bucket blocked behind an
 * incomplete one is started by whichever ready() completes the blocker,
 * and no bucket can be forgotten: the countdown that reaches zero always
 * runs the launch loop after it. A tensor of a bucket that is not reduced
 * in place is copied into the fusion buffer by the ready() that marks it,
 * before the countdown (whose acquire-release order publishes the copy to
 * the thread that starts the bucket): the copies run in parallel on the
 * hook threads, outside the lock.
 *
 * What it does not do: wait for a tensor nobody marked. wait() refuses a
 * step with unmarked tensors and names them, instead of blocking.
 */
#include "bucket/bucketer.h"

#include "core/clock.h"
#include "core/log.h"

#include <stdio.h>
#include <string.h>

/* Ids listed in the "not marked ready" sentence before "and N more". */
#define BKT_MISSING_LISTED 32

void gs__bucketer_step_reset(gs_bucketer_t b)
{
    bkt_plan_t *p = b->plan;

    for (size_t id = 0; id < b->reg.n; id++) {
        atomic_store_explicit(&b->step.ready[id], 0, memory_order_relaxed);
    }
    for (size_t i = 0; i < p->nbuckets; i++) {
        atomic_store_explicit(&p->buckets[i].pending, p->first[i + 1] - p->first[i],
                              memory_order_relaxed);
        p->buckets[i].launch_status = GS_OK;
    }
    atomic_store_explicit(&b->step.claimed, 0, memory_order_relaxed);
    atomic_store_explicit(&b->step.first_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&b->step.last_ns, 0, memory_order_relaxed);
    b->step.next_launch = 0;
    b->step.next_reap = 0;
    b->step.launch_err = GS_OK;
    b->step.launch_msg[0] = '\0';
    b->step.reap_err = GS_OK;
    b->step.reap_msg[0] = '\0';
    atomic_store_explicit(&b->step.marked, 0, memory_order_release);
}

/* The first ready(): close registration, form the first grouping (reverse order). */
static gs_status_t bkt_build(gs_bucketer_t b)
{
    bkt_plan_t *plan = NULL;
    gs_status_t status;

    pthread_mutex_lock(&b->mu);
    if (atomic_load_explicit(&b->built, memory_order_acquire)) {
        pthread_mutex_unlock(&b->mu);
        return GS_OK;
    }
    status = gs__bucketer_step_alloc(b);
    if (status == GS_OK) {
        gs__bplan_reverse_order(b->scratch, b->reg.n);
        status = gs__bucketer_plan_create(b, b->scratch, &plan);
    }
    if (status == GS_OK) {
        b->plan = plan;
        /* Device buckets must stay contiguous id ranges: never regrouped. */
        if ((b->cfg.rebuild < 0) || b->reg.device) {
            b->cfg.rebuild = !b->reg.device;
        }
        gs__bucketer_step_reset(b);
        GS_INFO(COLL,
                "bucketer: %zu tensors (%llu bytes) in %zu buckets, %zu in place, %llu bytes "
                "of fusion buffers",
                b->reg.n, (unsigned long long)b->reg.bytes, plan->nbuckets, plan->inplace,
                (unsigned long long)plan->fusion_bytes);
        atomic_store_explicit(&b->built, 1, memory_order_release);
    } else {
        gs__bucketer_step_free(b);
    }
    pthread_mutex_unlock(&b->mu);
    return status;
}

/* Start bucket i (caller holds mu). An empty bucket needs no collective. */
static void bkt_launch(gs_bucketer_t b, size_t i)
{
    bkt_bucket_t *bk = &b->plan->buckets[i];
    gs_allreduce_opts_t o = GS_ALLREDUCE_OPTS_INIT;
    gs_status_t status;

    if (b->step.launch_err != GS_OK) {
        /* Starting later buckets after a failed one would desynchronise the ranks' order. */
        bk->launch_status = b->step.launch_err;
        return;
    }
    if (bk->count == 0) {
        return;
    }
    o.algo = b->cfg.algo;
    o.codec = b->cfg.use_codec ? &b->cfg.codec : NULL;
    o.ef = bk->ef;
    o.stream = b->cfg.stream;
    status = gs_iallreduce_ex(b->comm, bk->base, bk->base, bk->count, bk->dtype, b->cfg.op, &o,
                              &bk->req);
    if (status != GS_OK) {
        bk->launch_status = status;
        b->step.launch_err = status;
        snprintf(b->step.launch_msg, sizeof(b->step.launch_msg), "bucket %zu did not start: %s", i,
                 gs__error_get());
    }
}

static void bkt_copy_out(gs_bucketer_t b, size_t i)
{
    const bkt_plan_t *p = b->plan;
    const bkt_bucket_t *bk = &p->buckets[i];

    if (bk->fusion == NULL) {
        return;
    }
    for (size_t k = p->first[i]; k < p->first[i + 1]; k++) {
        const uint32_t id = p->members[k];

        if (b->reg.t[id].count > 0) {
            memcpy(b->reg.ptr[id], (const char *)bk->fusion + p->offset_of[id] * bk->esize,
                   b->reg.t[id].count * bk->esize);
        }
    }
}

/*
 * Release the buckets that have finished, in order (caller holds mu), and
 * return one past the last one released: the caller copies them out after
 * unlocking, so the copy-out of early buckets overlaps the rest of the
 * backward pass instead of adding to wait().
 */
static size_t bkt_reap(gs_bucketer_t b)
{
    bkt_plan_t *p = b->plan;

    while (b->step.next_reap < b->step.next_launch) {
        const size_t i = b->step.next_reap;
        bkt_bucket_t *bk = &p->buckets[i];
        gs_status_t st;

        if (bk->launch_status != GS_OK) {
            break; /* wait() reports it */
        }
        st = gs_test(&bk->req);
        if (st == GS_INPROGRESS) {
            break;
        }
        bk->status = st;
        if ((st != GS_OK) && (b->step.reap_err == GS_OK)) {
            b->step.reap_err = st;
            snprintf(b->step.reap_msg, sizeof(b->step.reap_msg), "bucket %zu of %zu: %s", i,
                     p->nbuckets, gs__error_get());
        }
        b->step.next_reap++;
    }
    return b->step.next_reap;
}

/* Start every complete bucket from the first unstarted one on, in order; copy out finished ones. */
static void bkt_launch_ready(gs_bucketer_t b)
{
    bkt_plan_t *p = b->plan;
    size_t reap_from, reap_to;

    pthread_mutex_lock(&b->mu);
    while ((b->step.next_launch < p->nbuckets) &&
           (atomic_load_explicit(&p->buckets[b->step.next_launch].pending, memory_order_acquire) ==
            0)) {
        bkt_launch(b, b->step.next_launch);
        b->step.next_launch++;
    }
    reap_from = b->step.next_reap;
    reap_to = bkt_reap(b);
    pthread_mutex_unlock(&b->mu);
    for (size_t i = reap_from; i < reap_to; i++) {
        if (p->buckets[i].status == GS_OK) {
            bkt_copy_out(b, i);
        }
    }
}

gs_status_t gs_bucketer_ready(gs_bucketer_t b, size_t id)
{
    bkt_plan_t *p;
    bkt_bucket_t *bk;
    size_t slot;
    gs_status_t status;

    if (b == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_bucketer_ready: bucketer is NULL");
    }
    if (b->dead != GS_OK) {
        return gs__error_set(b->dead,
                             "gs_bucketer_ready: the bucketer is unusable after an earlier "
                             "error (%s); destroy it",
                             gs_status_name(b->dead));
    }
    if (id >= b->reg.n) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_bucketer_ready: unknown tensor id %zu (%zu tensors registered)",
                             id, b->reg.n);
    }
    if (!atomic_load_explicit(&b->built, memory_order_acquire)) {
        status = bkt_build(b);
        if (status != GS_OK) {
            return status;
        }
    }
    if (atomic_exchange_explicit(&b->step.ready[id], 1, memory_order_acq_rel) != 0) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_bucketer_ready: tensor %zu was already marked ready in this "
                             "step",
                             id);
    }
    p = b->plan;
    bk = &p->buckets[p->bucket_of[id]];
    if ((bk->fusion != NULL) && (b->reg.t[id].count > 0)) {
        memcpy((char *)bk->fusion + p->offset_of[id] * bk->esize, b->reg.ptr[id],
               b->reg.t[id].count * bk->esize);
    }
    slot = atomic_fetch_add_explicit(&b->step.claimed, 1, memory_order_relaxed);
    b->step.order[slot] = (uint32_t)id;
    if (slot == 0) {
        atomic_store_explicit(&b->step.first_ns, gs__now_ns(), memory_order_relaxed);
    }
    if (slot + 1 == b->reg.n) {
        atomic_store_explicit(&b->step.last_ns, gs__now_ns(), memory_order_relaxed);
    }
    atomic_fetch_add_explicit(&b->step.marked, 1, memory_order_release);
    if (atomic_fetch_sub_explicit(&bk->pending, 1, memory_order_acq_rel) == 1) {
        bkt_launch_ready(b);
    }
    return GS_OK;
}

/* The "not marked ready" error: name the ids (the first BKT_MISSING_LISTED of them). */
static gs_status_t bkt_missing_error(gs_bucketer_t b, size_t marked)
{
    char list[BKT_MISSING_LISTED * 12 + 32];
    size_t used = 0, listed = 0, missing = b->reg.n - marked, started;

    list[0] = '\0';
    for (size_t id = 0; (id < b->reg.n) && (listed < BKT_MISSING_LISTED); id++) {
        if ((b->step.ready == NULL) ||
            (atomic_load_explicit(&b->step.ready[id], memory_order_acquire) == 0)) {
            used +=
                (size_t)snprintf(list + used, sizeof(list) - used, "%s%zu", listed ? ", " : "", id);
            listed++;
        }
    }
    if (missing > listed) {
        snprintf(list + used, sizeof(list) - used, " and %zu more", missing - listed);
    }
    pthread_mutex_lock(&b->mu);
    started = (b->plan != NULL) ? b->step.next_launch : 0;
    pthread_mutex_unlock(&b->mu);
    return gs__error_set(GS_ERR_INVALID_ARG,
                         "gs_bucketer_wait: %zu of %zu tensors were not marked ready in this "
                         "step: %s; %zu of %zu buckets have started. Nothing was changed: mark "
                         "them with gs_bucketer_ready() and call gs_bucketer_wait() again",
                         missing, b->reg.n, list, started,
                         (b->plan != NULL) ? b->plan->nbuckets : 0);
}

/*
 * End of the first step: rank 0's ready order, broadcast, regroups the
 * buckets on every rank alike. Every rank computes the new grouping from
 * the same bytes, so the ranks agree without another message.
 */
static gs_status_t bkt_rebuild(gs_bucketer_t b)
{
    const size_t n = b->reg.n;
    uint32_t *order = b->scratch;
    bkt_plan_t *plan = NULL;
    gs_status_t status;

    if (b->rank == 0) {
        memcpy(order, b->step.order, n * sizeof(*order));
    }
    status = gs_broadcast(b->comm, order, n, GS_DTYPE_I32, 0);
    if (status != GS_OK) {
        return gs__error_wrap(status, "gs_bucketer_wait: broadcast of rank 0's ready order: %s",
                              gs__error_get());
    }
    if (!gs__bplan_is_permutation(order, n, b->seen)) {
        /* Rank 0 regroups and this rank cannot: the ranks no longer agree. */
        b->dead = GS_ERR_PROTOCOL;
        return gs__error_set(GS_ERR_PROTOCOL,
                             "gs_bucketer_wait: the ready order broadcast by rank 0 is not a "
                             "permutation of the %zu tensor ids",
                             n);
    }
    (void)gs__bplan_assign(b->reg.t, n, order, b->cfg.first_bytes, b->cfg.bucket_bytes,
                           b->scratch2);
    if (gs__bplan_same(b->scratch2, b->plan->bucket_of, n)) {
        GS_INFO(COLL, "bucketer: the observed ready order gives the same buckets; kept");
        return GS_OK;
    }
    status = gs__bucketer_plan_create(b, order, &plan);
    if (status != GS_OK) {
        b->dead = status;
        return status;
    }
    gs__bucketer_plan_destroy(b->plan);
    b->plan = plan;
    b->counters.rebuilt = 1;
    GS_INFO(COLL, "bucketer: rebuilt from rank 0's ready order: %zu buckets, %zu in place",
            plan->nbuckets, plan->inplace);
    return GS_OK;
}

gs_status_t gs_bucketer_wait(gs_bucketer_t b)
{
    char msg[GS_ERROR_MSG_MAX];
    gs_status_t first = GS_OK;
    size_t marked;
    uint64_t last_ns, first_ns, end_ns;

    if (b == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_bucketer_wait: bucketer is NULL");
    }
    if (b->dead != GS_OK) {
        return gs__error_set(b->dead,
                             "gs_bucketer_wait: the bucketer is unusable after an earlier "
                             "error (%s); destroy it",
                             gs_status_name(b->dead));
    }
    if (b->reg.n == 0) {
        return GS_OK;
    }
    marked = atomic_load_explicit(&b->built, memory_order_acquire)
                 ? atomic_load_explicit(&b->step.marked, memory_order_acquire)
                 : 0;
    if (marked < b->reg.n) {
        return bkt_missing_error(b, marked);
    }
    bkt_launch_ready(b); /* a no-op unless a ready() raced with its own launch loop */
    msg[0] = '\0';
    for (size_t i = 0; i < b->plan->nbuckets; i++) {
        bkt_bucket_t *bk = &b->plan->buckets[i];
        gs_status_t st = bk->launch_status;

        if (i < b->step.next_reap) {
            /* Finished, and copied out, during the backward pass. */
            st = bk->status;
            if ((st != GS_OK) && (first == GS_OK)) {
                snprintf(msg, sizeof(msg), "gs_bucketer_wait: %.*s", (int)sizeof(msg) - 32,
                         b->step.reap_msg);
            }
        } else if (st == GS_OK) {
            st = gs_wait(&bk->req);
            if (st == GS_OK) {
                bkt_copy_out(b, i);
            } else if (first == GS_OK) {
                snprintf(msg, sizeof(msg), "gs_bucketer_wait: bucket %zu of %zu: %s", i,
                         b->plan->nbuckets, gs__error_get());
            }
        } else if (first == GS_OK) {
            snprintf(msg, sizeof(msg), "gs_bucketer_wait: %.*s", (int)sizeof(msg) - 32,
                     b->step.launch_msg);
        }
        if ((st != GS_OK) && (first == GS_OK)) {
            first = st;
        }
    }
    if ((first == GS_OK) && (b->steps_begun == 0) && (b->cfg.rebuild == 1)) {
        first = bkt_rebuild(b);
        if (first != GS_OK) {
            snprintf(msg, sizeof(msg), "%s", gs__error_get());
        }
    }
    first_ns = atomic_load_explicit(&b->step.first_ns, memory_order_relaxed);
    last_ns = atomic_load_explicit(&b->step.last_ns, memory_order_relaxed);
    gs__bucketer_step_reset(b);
    end_ns = gs__now_ns();
    b->steps_begun++;
    b->counters.steps++;
    b->counters.last_exposed_ns = (end_ns > last_ns) ? end_ns - last_ns : 0;
    b->counters.total_exposed_ns += b->counters.last_exposed_ns;
    b->counters.last_step_ns = (end_ns > first_ns) ? end_ns - first_ns : 0;
    if (first != GS_OK) {
        b->counters.failed_steps++;
        gs__error_copy_in(msg);
    }
    return first;
}
