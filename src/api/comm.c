/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Communicator lifetime: init (configuration, transport, rendezvous,
 * connections, worker), destroy, abort, split, queries and counters, and
 * the worker-side task runner that applies the sticky-error rule.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/comm_boot.h"
#include "api/comm_impl.h"
#include "api/comm_stats.h"
#include "api/comm_watch.h"
#include "api/comm_recorder.h"
#ifdef GS_WITH_CUDA
#include "algo/sched/algo_dev.h"
#endif
#include "core/bootstrap.h"
#include "core/clock.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/host.h"
#include "core/log.h"
#include "core/msg_limit.h"

#define COMM_WORLD_ID 0x776f726c64ull /* "world" */

#define API_NAME_ROW(_kind, _public, _name, _api) [_kind] = _api,
static const char *const api_names[GS_COLL_KIND_COUNT] = {GS_COLL_KIND_MAP(API_NAME_ROW)};
#undef API_NAME_ROW

void gs__comm_fail(gs_comm_t comm, gs_status_t status, const char *msg)
{
    pthread_mutex_lock(&comm->err.mu);
    if (atomic_load(&comm->err.status) == GS_OK) {
        snprintf(comm->err.msg, sizeof(comm->err.msg), "%s", msg);
        atomic_store(&comm->err.status, status);
    }
    pthread_mutex_unlock(&comm->err.mu);
}

static int comm_error_is_sticky(gs_coll_kind_t kind, gs_status_t status)
{
    const gs_status_scope_t scope = gs_status_scope(status);

    if ((kind == GS_COLL_SEND || kind == GS_COLL_RECV) &&
        (status == GS_ERR_MISMATCH || status == GS_ERR_TRUNCATED)) {
        return 0; /* the message was consumed whole; the streams are intact */
    }
    return (scope == GS_SCOPE_PEER) || (scope == GS_SCOPE_COMM) || (scope == GS_SCOPE_INTERNAL);
}

/* gs_recv_status (GS_DESC_F_RECV_UPTO): report what arrived (source, tag,
 * count) in d->status when set. A byte length that is not whole elements
 * is GS_ERR_MISMATCH. */
static gs_status_t comm_p2p_status(const gs_coll_desc_t *d, int source, size_t nbytes)
{
    const size_t esize = gs__dtype_size(d->dtype);

    if ((nbytes % esize) != 0) {
        return gs__error_set(GS_ERR_MISMATCH,
                             "gs_recv_status: rank %d sent %zu bytes (tag %u), not a whole "
                             "number of %zu-byte %s elements",
                             source, nbytes, d->tag, esize, gs__dtype_name(d->dtype));
    }
    if (d->status != NULL) {
        d->status->source = source;
        d->status->tag = d->tag;
        d->status->count = nbytes / esize;
    }
    return GS_OK;
}

gs_status_t gs__comm_run_task(gs__task_t *task, void *ctx)
{
    struct gs_request *req = (struct gs_request *)task;
    gs_comm_t comm = (gs_comm_t)ctx;
    gs_coll_desc_t *d = &req->desc;
    const gs_status_t sticky = (gs_status_t)atomic_load(&comm->err.status);
    gs_status_t status;
    uint64_t t0;
    uint64_t t1;

    if (sticky != GS_OK) {
        pthread_mutex_lock(&comm->err.mu);
        gs__error_copy_in(comm->err.msg);
        pthread_mutex_unlock(&comm->err.mu);
        gs__comm_stats_op_done(comm, d, sticky, 0);
        return sticky;
    }
    comm->actx.opname = api_names[d->kind];
    if (((d->kind == GS_COLL_SEND) || (d->kind == GS_COLL_RECV)) && (d->mem == GS_MEM_HOST)) {
        /* Post and leave in flight: the worker tests it from now on. */
        status = gs__p2p_post(&comm->actx, d, &req->p2p);
        if (status == GS_OK) {
            req->p2p_deadline = gs__now_ns() + comm->actx.timeout_ns;
            return GS_INPROGRESS;
        }
        gs__comm_stats_op_done(comm, d, status, 0);
        return status;
    }
    if ((d->kind != GS_COLL_SEND) && (d->kind != GS_COLL_RECV)) {
        comm->actx.seq = comm->coll_seq++; /* device point-to-point (NCCL) takes none */
    }
    /* Time blocked while only point-to-point work was in flight is not this collective's. */
    comm->actx.wait_pending_ns = 0;
    t0 = gs__now_ns();
    status = GS_OK;
    if ((d->kind != GS_COLL_SEND) && (d->kind != GS_COLL_RECV)) {
        gs__algo_op_begin(&comm->actx, d, t0); /* fingerprint and flight recorder */
    }
#ifdef GS_WITH_CUDA
    if (d->mem == GS_MEM_DEVICE) {
        status = gs__comm_dev_ready(comm, d);
    }
#endif
    if (status == GS_OK) {
        status = gs__algo_run(&comm->sel, &comm->actx, d);
    }
#ifdef GS_WITH_CUDA
    if (status == GS_INPROGRESS) {
        /* A non-blocking device call enqueued on its stream: the worker
         * tests its event from now on (gs__comm_test_task). */
        req->p2p_deadline = gs__now_ns() + comm->actx.timeout_ns;
        comm->dev_inflight++;
        if (comm->actx.cur != NULL) { /* the recorder shows it left in flight */
            gs__algo_op_end(&comm->actx, d, GS_INPROGRESS, gs__now_ns());
        }
        return GS_INPROGRESS;
    }
#endif
    if ((status == GS_OK) && (d->kind == GS_COLL_RECV) && (d->flags & GS_DESC_F_RECV_UPTO)) {
        /* Device buffers (NCCL): a named peer and exactly count elements. */
        status = comm_p2p_status(d, d->root, d->count * gs__dtype_size(d->dtype));
    }
    t1 = gs__now_ns();
    if (comm->actx.cur != NULL) {
        gs__algo_op_end(&comm->actx, d, status, t1);
    }
    gs__counter_add(&comm->counters.busy_ns, t1 - t0);
    gs__comm_stats_op_done(comm, d, status, t1 - t0);
    if ((status != GS_OK) && comm_error_is_sticky(d->kind, status)) {
        gs__comm_fail(comm, status, gs__error_get());
    }
    gs__comm_stats_tick(comm, t1);
    return status;
}

#ifdef GS_WITH_CUDA
/* The test of a non-blocking device call in flight: its event, NCCL's
 * errors, the deadline and a destroy that will not wait for it. */
static gs_status_t comm_dev_test(gs_comm_t comm, struct gs_request *req)
{
    gs_coll_desc_t *d = &req->desc;
    gs_status_t status = gs__dev_test(&comm->actx, d);
    uint64_t now;

    if ((status == GS_INPROGRESS) && atomic_load(&comm->destroying)) {
        gs__dev_forget(&comm->actx, d);
        status = gs__error_set(GS_ERR_ABORTED,
                               "%s: the communicator was destroyed while this device operation "
                               "was pending",
                               api_names[d->kind]);
    }
    now = gs__now_ns();
    if ((status == GS_INPROGRESS) && (now >= req->p2p_deadline)) {
        gs__dev_abort(&comm->actx);
        gs__dev_forget(&comm->actx, d);
        status = gs__error_set(GS_ERR_TIMEOUT,
                               "%s: rank %d: the device operation did not finish within %d ms "
                               "(NCCL aborted; destroy the communicator)",
                               api_names[d->kind], comm->rank, comm->cfg.timeout_ms);
    }
    if (status == GS_INPROGRESS) {
        return status;
    }
    if ((status == GS_OK) && (d->kind == GS_COLL_RECV) && (d->flags & GS_DESC_F_RECV_UPTO)) {
        status = comm_p2p_status(d, d->root, d->count * gs__dtype_size(d->dtype));
    }
    comm->dev_inflight--;
    gs__comm_stats_op_done(comm, d, status, now - (req->p2p_deadline - comm->actx.timeout_ns));
    if ((status != GS_OK) && comm_error_is_sticky(d->kind, status)) {
        gs__comm_fail(comm, status, gs__error_get());
    }
    gs__comm_stats_tick(comm, now);
    return status;
}
#endif

gs_status_t gs__comm_test_task(gs__task_t *task, void *ctx)
{
    struct gs_request *req = (struct gs_request *)task;
    gs_comm_t comm = (gs_comm_t)ctx;
    const gs_coll_desc_t *d = &req->desc;
    const size_t expect = (d->kind == GS_COLL_RECV) ? d->count * gs__dtype_size(d->dtype) : 0;
    const int upto = (d->kind == GS_COLL_RECV) && (d->flags & GS_DESC_F_RECV_UPTO);
    gs_status_t status;
    uint64_t now;
    int done = 0;

    comm->actx.opname = upto ? "gs_recv_status" : api_names[d->kind];
#ifdef GS_WITH_CUDA
    if (d->mem == GS_MEM_DEVICE) {
        return comm_dev_test(comm, req);
    }
#endif
    if (upto) {
        /* At most count elements: the transport fails a longer message with
         * GS_ERR_TRUNCATED and reports a shorter one's length. */
        size_t nbytes = 0;

        status = gs__algo_check_len(&comm->actx, &req->p2p, &done, &nbytes);
        if (done && (status == GS_OK)) {
            status = comm_p2p_status(d, req->p2p.peer, nbytes);
        }
    } else {
        status = gs__algo_check(&comm->actx, &req->p2p, expect, &done);
    }
    if (!done && atomic_load(&comm->destroying)) {
        /* Nobody will complete it now: do not hold gs_comm_destroy hostage. */
        gs__algo_release_all(&comm->actx, &req->p2p, 1);
        done = 1;
        status = gs__error_set(GS_ERR_ABORTED,
                               "%s: the communicator was destroyed while this operation (peer "
                               "%d, tag %u) was pending",
                               api_names[d->kind], d->root, d->tag);
    }
    if (!done) {
        char who[32];

        if (gs__now_ns() < req->p2p_deadline) {
            return GS_INPROGRESS;
        }
        gs__algo_release_all(&comm->actx, &req->p2p, 1);
        if (d->root == GS_ANY_SOURCE) {
            snprintf(who, sizeof(who), "any rank");
        } else {
            snprintf(who, sizeof(who), "rank %d", d->root);
        }
        status = gs__error_set(GS_ERR_TIMEOUT,
                               "%s: rank %d timed out after %d ms waiting to %s %s (tag %u)",
                               comm->actx.opname, comm->rank, comm->cfg.timeout_ms,
                               d->kind == GS_COLL_SEND ? "send to" : "receive from", who, d->tag);
    }
    now = gs__now_ns();
    /* The request was posted one timeout before its deadline. */
    gs__comm_stats_op_done(comm, d, status, now - (req->p2p_deadline - comm->actx.timeout_ns));
    if ((status != GS_OK) && comm_error_is_sticky(d->kind, status)) {
        gs__comm_fail(comm, status, gs__error_get());
    }
    gs__comm_stats_tick(comm, now);
    return status;
}

static void comm_worker_idle(void *ctx, uint64_t wait_ns)
{
    gs_comm_t comm = (gs_comm_t)ctx;
    const uint64_t t0 = gs__now_ns();
    uint64_t t1;

    /* A device call's completion raises nothing the transport waits on:
     * while one is in flight, look again every 50 us. */
    if ((comm->dev_inflight > 0) && (wait_ns > 50000u)) {
        wait_ns = 50000u;
    }
    /* Errors surface through the requests' own tests. */
    (void)gs__tp_progress(&comm->tr, t0 + wait_ns);
    /* Only point-to-point work is in flight: the wait is charged to the peer
     * whose request completes next (algo_ctx.c). */
    t1 = gs__now_ns();
    comm->actx.wait_pending_ns += t1 - t0;
    gs__comm_stats_tick(comm, t1);
}

/* The worker's heartbeat tick while it has nothing to do: one non-blocking
 * progress pass (the transport beats and checks its peers' silence). */
static void comm_worker_tick(void *ctx)
{
    gs_comm_t comm = (gs_comm_t)ctx;

    (void)gs__tp_progress(&comm->tr, 0);
}

static void comm_worker_wake(void *ctx)
{
    gs_comm_t comm = (gs_comm_t)ctx;

    gs__tp_wake(&comm->tr);
}

gs_comm_t gs__comm_alloc(void)
{
    gs_comm_t comm = calloc(1, sizeof(*comm));

    if (comm == NULL) {
        gs__error_set(GS_ERR_NO_MEMORY, "gs_comm_init: out of memory");
        return NULL;
    }
    pthread_mutex_init(&comm->err.mu, NULL);
    atomic_init(&comm->err.status, GS_OK);
    atomic_init(&comm->split_seq, 0);
    atomic_init(&comm->destroying, 0);
    return comm;
}

void gs__comm_free(gs_comm_t comm)
{
    gs__comm_stats_free(comm);
    gs__comm_recorder_free(comm);
#ifdef GS_WITH_CUDA
    (void)gs__dev_free(&comm->actx, atomic_load(&comm->err.status) != GS_OK);
#endif
    gs__algo_ctx_fini(&comm->actx);
    pthread_mutex_destroy(&comm->err.mu);
    free(comm);
}

/* The log settings a caller gave as gs_config_t fields (process-wide, from
 * this communicator on; environment-only values were read by log.c). */
static gs_status_t comm_apply_log(const gs__cfg_t *cfg)
{
    const char *set[3] = {NULL, NULL, NULL};
    static const char *const names[3] = {"GS_DEBUG", "GS_DEBUG_SUBSYS", "GS_DEBUG_FILE"};
    const char *vals[3] = {cfg->debug, cfg->debug_subsys, cfg->debug_file};
    char why[GS_ERROR_MSG_MAX];
    int any = 0;

    for (int i = 0; i < gs__cfg_num_knobs(); i++) {
        for (int k = 0; k < 3; k++) {
            if ((strcmp(gs__cfg_knob_name(i), names[k]) == 0) &&
                (cfg->source[i] == GS_CFG_SRC_CALLER)) {
                set[k] = vals[k];
                any = 1;
            }
        }
    }
    if (any && (gs__log_configure(set[0], set[1], set[2], why, sizeof(why)) != 0)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_comm_init: cfg: %s", why);
    }
    return GS_OK;
}

/* Create the transport instance of comm (rank, size, ids and cfg set). */
gs_status_t gs__comm_transport_init(gs_comm_t comm)
{
    gs_tp_params_t params;
    gs_status_t status;

    status = comm_apply_log(&comm->cfg);
    if (status != GS_OK) {
        return status;
    }
    status = gs__auth_init(&comm->auth, comm->cfg.auth_token, comm->cfg.auth_token_file);
    if (status != GS_OK) {
        return status;
    }

    /* GS_TRANSPORT=nccl: host buffers over TCP, device buffers over NCCL. */
    status = gs__transport_lookup(
        (strcmp(comm->cfg.transport, "nccl") == 0) ? "tcp" : comm->cfg.transport, &comm->tr.ops);
    if (status != GS_OK) {
        return status;
    }
    if (comm->cfg.tls && !gs__tp_has_cap(&comm->tr, GS_TP_CAP_TLS)) {
        return gs__error_set(GS_ERR_UNSUPPORTED,
                             "GS_TLS=1 encrypts the TCP transport, and GS_TRANSPORT=%s hands "
                             "every byte to its own library: use GS_TRANSPORT=tcp, or that "
                             "library's own encryption (docs/security.md)",
                             gs__tp_name(&comm->tr));
    }
    memset(&params, 0, sizeof(params));
    params.rank = comm->rank;
    params.size = comm->size;
    params.job_id = comm->job_id;
    params.comm_id = comm->comm_id;
    params.cfg = &comm->cfg; /* each transport reads its own settings from it */
    params.counters = &comm->counters;
    params.auth = &comm->auth;
    (void)gs__max_message_parse(comm->cfg.max_message_bytes, &params.max_message_bytes);
    return gs__tp_init(&comm->tr, &params);
}

/* Connect, set up the algorithm context and start the worker. */
/* The model parameters the user set explicitly, which GS_TUNE=probe keeps. */
static unsigned comm_probe_keep(const gs__cfg_t *cfg)
{
    static const struct {
        const char *env;
        unsigned bit;
    } knobs[] = {
        {"GS_ALGO_ALPHA_US", GS_PROBE_KEEP_ALPHA},
        {"GS_ALGO_BETA_MBPS", GS_PROBE_KEEP_BETA},
        {"GS_ALGO_GAMMA_MBPS", GS_PROBE_KEEP_GAMMA},
        {"GS_ALGO_INTRA_ALPHA_US", GS_PROBE_KEEP_INTRA_ALPHA},
        {"GS_ALGO_INTRA_BETA_MBPS", GS_PROBE_KEEP_INTRA_BETA},
    };
    unsigned keep = 0;
    int i;
    size_t k;

    for (i = 0; i < gs__cfg_num_knobs(); i++) {
        for (k = 0; k < sizeof(knobs) / sizeof(knobs[0]); k++) {
            if ((strcmp(gs__cfg_knob_name(i), knobs[k].env) == 0) &&
                (cfg->source[i] != GS_CFG_SRC_DEFAULT)) {
                keep |= knobs[k].bit;
            }
        }
    }
    return keep;
}

gs_status_t gs__comm_start(gs_comm_t comm, char (*addrs)[GS_SOCK_ADDR_MAX], const uint64_t *hosts)
{
    const gs_algo_ctx_params_t ap = {
        .tr = &comm->tr,
        .diag = &gs__algo_diag_ops, /* diagnosis hooks into the waits */
        .rank = comm->rank,
        .size = comm->size,
        .timeout_ns = (uint64_t)comm->cfg.timeout_ms * 1000000ull,
        .slice_bytes = (size_t)comm->cfg.slice_bytes,
        .comp_corrupt = gs__cfg_comp_test_corrupt(&comm->cfg) + 1, /* -1 (unset): 0, off */
        .host_ids = hosts,
    };
    gs__worker_hooks_t hooks;
    gs_status_t status;

    status = gs__algo_ctx_init(&comm->actx, &ap);
    if (status != GS_OK) {
        return status;
    }
    GS_INFO(INIT, "rank %d: %d host(s), local rank %d of %d on this host", comm->rank,
            comm->actx.hosts.nhosts, comm->actx.hosts.local_rank, comm->actx.hosts.local_size);
    status = gs__tp_connect(&comm->tr, addrs, gs__deadline_after_ms(comm->cfg.timeout_ms));
    if (status != GS_OK) {
        return status;
    }
    gs__algo_model_init(&comm->sel.model, comm->cfg.algo_alpha_us, comm->cfg.algo_beta_mbps,
                        comm->cfg.algo_gamma_mbps);
    gs__algo_model_set_intra(&comm->sel.model, comm->cfg.algo_intra_alpha_us,
                             comm->cfg.algo_intra_beta_mbps);
    if ((comm->actx.hosts.nhosts == 1) && (comm->size > 1) && gs__tp_has_shm_peers(&comm->tr)) {
        status = gs__algo_model_agree_local(&comm->actx, &comm->sel.model,
                                            gs__tp_shm_peers(&comm->tr) == comm->size - 1,
                                            (double)comm->cfg.shm_bytes);
        if (status != GS_OK) {
            return status;
        }
    }
    /* GS_TUNE=auto: the defaults describe one machine, so a job across
     * hosts measures its links. */
    if ((strcmp(comm->cfg.tune, "probe") == 0) ||
        ((strcmp(comm->cfg.tune, "auto") == 0) && (comm->actx.hosts.nhosts > 1))) {
        status = gs__algo_probe(&comm->actx, &comm->sel.model, comm_probe_keep(&comm->cfg));
        if (status != GS_OK) {
            return status;
        }
    }
    status = gs__comm_stats_setup(comm);
    if (status != GS_OK) {
        return status;
    }
    status = gs__comm_recorder_setup(comm); /* flight recorder, GS_DUMP_SIGNAL */
    if (status != GS_OK) {
        return status;
    }
    memset(&hooks, 0, sizeof(hooks));
    hooks.idle = comm_worker_idle;
    hooks.wake = gs__tp_has_wake(&comm->tr) ? comm_worker_wake : NULL;
    if ((comm->cfg.heartbeat_ms > 0) && gs__tp_has_cap(&comm->tr, GS_TP_CAP_HEARTBEAT)) {
        /* A little more often than the transport's quarter-interval clock,
         * so that no tick of it is skipped (docs/design.md, "Heartbeats"). */
        hooks.tick = comm_worker_tick;
        hooks.tick_ns = (uint64_t)comm->cfg.heartbeat_ms * 200000ull;
    }
    return gs__worker_start(&comm->worker, comm, &hooks);
}

static gs_status_t comm_init_watched(gs_comm_t *comm_out, const gs_config_t *cfg, int launcher_env,
                                     gs__boot_exchange_fn_t exchange, gs__init_watch_t *watch);

static gs_status_t comm_init(gs_comm_t *comm_out, const gs_config_t *cfg, int launcher_env,
                             gs__boot_exchange_fn_t exchange)
{
    gs__init_watch_t watch;
    gs_comm_t comm = GS_COMM_NULL;
    gs_status_t status;

    if (comm_out == NULL) {
        gs__log_init();
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_comm_init: comm_out is NULL");
    }
    gs__init_watch_start(&watch, cfg);
    status = comm_init_watched(&comm, cfg, launcher_env, exchange, &watch);
    if (gs__init_watch_stop(&watch) && (status == GS_OK)) {
        /* Set after the last step looked: honour it all the same. */
        (void)gs_comm_destroy(comm);
        status = gs__init_watch_aborted();
    }
    if (status == GS_OK) {
        *comm_out = comm;
    }
    return status;
}

static gs_status_t comm_init_watched(gs_comm_t *comm_out, const gs_config_t *cfg, int launcher_env,
                                     gs__boot_exchange_fn_t exchange, gs__init_watch_t *watch)
{
    char my_addr[GS_SOCK_ADDR_MAX];
    char(*addrs)[GS_SOCK_ADDR_MAX] = NULL;
    uint64_t *hosts = NULL;
    uint64_t nonce = 0;
    gs_comm_t comm;
    gs_status_t status;

    gs__log_init();
    if (comm_out == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_comm_init: comm_out is NULL");
    }
    comm = gs__comm_alloc();
    if (comm == NULL) {
        return GS_ERR_NO_MEMORY;
    }
    status = gs__cfg_resolve(cfg, launcher_env, &comm->cfg);
    if (status == GS_OK) {
        status = gs__algo_policy_parse(comm->cfg.algo, &comm->sel.policy);
    }
    if (status != GS_OK) {
        gs__comm_free(comm);
        return status;
    }
    gs__cfg_warn_unknown_env();
    gs__log_set_rank(comm->cfg.rank);
    comm->rank = comm->cfg.rank;
    comm->size = comm->cfg.world_size;
    comm->comm_id = COMM_WORLD_ID;
    comm->job_id = gs__hash64(comm->cfg.job_id, strlen(comm->cfg.job_id), 0);
    comm->job_id = gs__hash64(comm->cfg.master_addr, strlen(comm->cfg.master_addr),
                              comm->job_id ^ (uint64_t)comm->cfg.master_port);

    status = gs__comm_transport_init(comm);
    if (status != GS_OK) {
        gs__comm_free(comm);
        return status;
    }
    gs__init_watch_arm(watch, comm);
    addrs = calloc((size_t)comm->size, GS_SOCK_ADDR_MAX);
    hosts = calloc((size_t)comm->size, sizeof(*hosts));
    if ((addrs == NULL) || (hosts == NULL)) {
        status = gs__error_set(GS_ERR_NO_MEMORY, "gs_comm_init: out of memory for %d addresses",
                               comm->size);
        goto err_finalize;
    }
    status = gs__tp_get_address(&comm->tr, my_addr, sizeof(my_addr));
    if ((status == GS_OK) && gs__init_watch_tripped(watch)) {
        status = gs__init_watch_aborted();
    }
    if (status == GS_OK) {
        status = exchange(&comm->cfg, &comm->auth, watch->started ? watch->flag : NULL, my_addr,
                          addrs, hosts, &nonce);
    }
    if ((status != GS_OK) && (status != GS_ERR_ABORTED) && gs__init_watch_tripped(watch)) {
        status = gs__init_watch_aborted(); /* the step failed because of the abort */
    }
    if ((status == GS_OK) && gs__init_watch_tripped(watch)) {
        status = gs__init_watch_aborted();
    }
    if (status == GS_OK) {
        status = gs__comm_start(comm, addrs, hosts);
    }
    if ((status != GS_OK) && (status != GS_ERR_ABORTED) && gs__init_watch_tripped(watch)) {
        status = gs__init_watch_aborted();
    }
    if (status != GS_OK) {
        goto err_finalize;
    }
    free(addrs);
    free(hosts);
    GS_INFO(INIT, "communicator ready: rank %d of %d, transport %s, address %s", comm->rank,
            comm->size, gs__tp_name(&comm->tr), my_addr);
    *comm_out = comm;
    return GS_OK;

err_finalize:
    free(addrs);
    free(hosts);
    gs__init_watch_disarm(watch);
    gs__tp_finalize(&comm->tr);
    gs__comm_free(comm);
    return status;
}

gs_status_t gs_comm_init(gs_comm_t *comm_out, const gs_config_t *cfg)
{
    return comm_init(comm_out, cfg, 0, gs__bootstrap_exchange);
}

/* gs_comm_init_env's bootstrap providers are comm_boot.c's table. */
gs_status_t gs__comm_init_exchange(gs_comm_t *comm_out, const gs_config_t *cfg,
                                   const gs__cfg_t *rcfg, const gs__comm_boot_t *self)
{
    (void)rcfg;
    return comm_init(comm_out, cfg, 1, self->exchange);
}

gs_status_t gs_comm_destroy(gs_comm_t comm)
{
    gs_transport_t tr;
    gs_status_t status;

    if (comm == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_comm_destroy: comm is NULL");
    }
    /* Queued operations still run (they have deadlines); point-to-point
     * operations left in flight are cancelled with GS_ERR_ABORTED. */
    atomic_store(&comm->destroying, 1);
    gs__worker_stop(&comm->worker);
    if (comm->cfg.stats_file[0] != '\0') {
        gs__comm_stats_emit(comm, gs__now_ns(), 1);
    }
    /* A gs_comm_abort() overlapping this destroy (it may cut short the wait
     * for queued operations above) holds err.mu while it touches the
     * transport: take the instance away under it before freeing it. */
    pthread_mutex_lock(&comm->err.mu);
    tr = comm->tr;
    comm->tr.tp = NULL;
    pthread_mutex_unlock(&comm->err.mu);
    status = gs__tp_finalize(&tr);
    gs__comm_free(comm);
    return status;
}

gs_status_t gs_comm_abort(gs_comm_t comm)
{
    if (comm == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_comm_abort: comm is NULL");
    }
    gs__comm_fail(comm, GS_ERR_ABORTED, "the communicator was aborted by gs_comm_abort()");
#ifdef GS_WITH_CUDA
    gs__dev_abort(&comm->actx);
#endif
    /* Under err.mu: a gs_comm_destroy() running meanwhile frees the
     * transport only after taking it away under the same lock. */
    pthread_mutex_lock(&comm->err.mu);
    if (comm->tr.tp != NULL) {
        (void)gs__tp_abort(&comm->tr);
    }
    pthread_mutex_unlock(&comm->err.mu);
    return GS_OK;
}

gs_status_t gs_comm_rank(gs_comm_t comm, int *rank_out)
{
    if ((comm == NULL) || (rank_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_comm_rank: %s is NULL",
                             comm == NULL ? "comm" : "rank_out");
    }
    *rank_out = comm->rank;
    return GS_OK;
}

gs_status_t gs_comm_size(gs_comm_t comm, int *size_out)
{
    if ((comm == NULL) || (size_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_comm_size: %s is NULL",
                             comm == NULL ? "comm" : "size_out");
    }
    *size_out = comm->size;
    return GS_OK;
}

gs_status_t gs_comm_get_async_error(gs_comm_t comm, gs_status_t *error_out)
{
    if ((comm == NULL) || (error_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_comm_get_async_error: %s is NULL",
                             comm == NULL ? "comm" : "error_out");
    }
    *error_out = (gs_status_t)atomic_load(&comm->err.status);
    return GS_OK;
}

gs_status_t gs_comm_counters(gs_comm_t comm, gs_counters_t *counters_out)
{
    gs_counters_t c;

    if ((comm == NULL) || (counters_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_comm_counters: %s is NULL",
                             comm == NULL ? "comm" : "counters_out");
    }
    if (counters_out->size < sizeof(size_t)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_comm_counters: counters_out->size is %zu; set it to "
                             "sizeof(gs_counters_t)",
                             counters_out->size);
    }
    memset(&c, 0, sizeof(c));
    c.size = counters_out->size < sizeof(c) ? counters_out->size : sizeof(c);
    c.bytes_sent = atomic_load(&comm->counters.bytes_sent);
    c.bytes_received = atomic_load(&comm->counters.bytes_received);
    c.msgs_sent = atomic_load(&comm->counters.msgs_sent);
    c.msgs_received = atomic_load(&comm->counters.msgs_received);
    c.ops_completed = atomic_load(&comm->counters.ops_completed);
    c.ops_failed = atomic_load(&comm->counters.ops_failed);
    c.busy_ns = atomic_load(&comm->counters.busy_ns);
    memcpy(counters_out, &c, c.size);
    counters_out->size = c.size;
    return GS_OK;
}

/* ---------------------------------------------------------------------- */
/* Split                                                                  */
/* ---------------------------------------------------------------------- */

typedef struct split_member {
    int key;
    int parent_rank;
} split_member_t;

static int split_member_cmp(const void *a, const void *b)
{
    const split_member_t *x = (const split_member_t *)a;
    const split_member_t *y = (const split_member_t *)b;

    if (x->key != y->key) {
        return (x->key < y->key) ? -1 : 1;
    }
    return (x->parent_rank < y->parent_rank) ? -1 : (x->parent_rank > y->parent_rank);
}

/*
 * Two all-gathers over the parent: first (color, key) so that every rank
 * knows its group, rank and size; then, once each child transport listens,
 * the transport addresses. Ranks whose transport failed to start publish an
 * empty address, which fails their group's connect quickly instead of
 * letting it wait for the deadline.
 */
static gs_status_t comm_split(const char *fn, gs_comm_t comm, int color, int key,
                              gs_comm_t *newcomm_out)
{
    int32_t mine[2];
    int32_t *ck = NULL;
    char(*all_addrs)[GS_SOCK_ADDR_MAX] = NULL;
    char(*addrs)[GS_SOCK_ADDR_MAX] = NULL;
    uint64_t *hosts = NULL;
    char my_addr[GS_SOCK_ADDR_MAX];
    split_member_t *members = NULL;
    gs_comm_t child = NULL;
    gs_status_t status;
    gs_status_t local = GS_OK;
    uint32_t seq;
    int n = 0;

    if ((comm == NULL) || (newcomm_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: %s is NULL", fn,
                             comm == NULL ? "comm" : "newcomm_out");
    }
    seq = atomic_fetch_add(&comm->split_seq, 1);
    mine[0] = (color < 0) ? -1 : color;
    mine[1] = key;
    ck = malloc((size_t)comm->size * sizeof(mine));
    all_addrs = calloc((size_t)comm->size, GS_SOCK_ADDR_MAX);
    members = malloc((size_t)comm->size * sizeof(*members));
    if ((ck == NULL) || (all_addrs == NULL) || (members == NULL)) {
        status = gs__error_set(GS_ERR_NO_MEMORY, "%s: out of memory", fn);
        goto out; /* the other ranks will fail on their deadline */
    }
    status = gs_allgather(comm, mine, ck, 2, GS_DTYPE_I32);
    if (status != GS_OK) {
        goto out;
    }
    memset(my_addr, 0, sizeof(my_addr));
    if (mine[0] >= 0) {
        for (int r = 0; r < comm->size; r++) {
            if (ck[2 * r] == mine[0]) {
                members[n].key = ck[2 * r + 1];
                members[n].parent_rank = r;
                n++;
            }
        }
        qsort(members, (size_t)n, sizeof(*members), split_member_cmp);
        child = gs__comm_alloc();
        if (child == NULL) {
            local = GS_ERR_NO_MEMORY;
        } else {
            child->cfg = comm->cfg;
            child->sel.policy = comm->sel.policy;
            child->job_id = comm->job_id;
            child->comm_id =
                gs__hash64(&mine[0], sizeof(mine[0]), comm->comm_id ^ ((uint64_t)seq << 32));
            child->size = n;
            for (int i = 0; i < n; i++) {
                if (members[i].parent_rank == comm->rank) {
                    child->rank = i;
                }
            }
            child->cfg.rank = child->rank;
            child->cfg.world_size = n;
            local = gs__comm_transport_init(child);
            if (local == GS_OK) {
                local = gs__tp_get_address(&child->tr, my_addr, sizeof(my_addr));
            }
            if (local != GS_OK) {
                my_addr[0] = '\0';
            }
        }
    }
    /* Everyone takes part in the second exchange, even after a local error. */
    status = gs_allgather(comm, my_addr, all_addrs, GS_SOCK_ADDR_MAX, GS_DTYPE_U8);
#ifdef GS_WITH_CUDA
    /* A parent with NCCL splits its NCCL communicator too (every parent
     * rank takes part, as ncclCommSplit needs). */
    if (status == GS_OK) {
        status = gs__comm_dev_split(comm, (local == GS_OK) ? child : NULL, mine[0], key);
    }
#endif
    if ((status != GS_OK) || (mine[0] < 0)) {
        goto out;
    }
    if (local != GS_OK) {
        status = local;
        goto out;
    }
    addrs = calloc((size_t)n, GS_SOCK_ADDR_MAX);
    hosts = calloc((size_t)n, sizeof(*hosts));
    if ((addrs == NULL) || (hosts == NULL)) {
        status = gs__error_set(GS_ERR_NO_MEMORY, "%s: out of memory", fn);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        /* The parent's host table already knows every member's host. */
        hosts[i] = (comm->actx.hosts.ids != NULL) ? comm->actx.hosts.ids[members[i].parent_rank]
                                                  : (uint64_t)members[i].parent_rank + 1;
        memcpy(addrs[i], all_addrs[members[i].parent_rank], GS_SOCK_ADDR_MAX);
        addrs[i][GS_SOCK_ADDR_MAX - 1] = '\0';
        if (addrs[i][0] == '\0') {
            status = gs__error_set(GS_ERR_PEER_FAILED,
                                   "%s: rank %d (parent rank %d) could not create its endpoint "
                                   "for color %d",
                                   fn, i, members[i].parent_rank, mine[0]);
            goto out;
        }
    }
    status = gs__comm_start(child, addrs, hosts);
out:
    if ((status == GS_OK) && (local == GS_OK) && (child != NULL)) {
        GS_INFO(INIT, "split: color %d rank %d of %d", mine[0], child->rank, child->size);
        *newcomm_out = child;
    } else if (status == GS_OK) {
        *newcomm_out = GS_COMM_NULL; /* color < 0 */
    } else if (child != NULL) {
        if (child->tr.tp != NULL) {
            gs__tp_finalize(&child->tr);
        }
        gs__comm_free(child);
    }
    free(ck);
    free(all_addrs);
    free(members);
    free(addrs);
    free(hosts);
    return status;
}

gs_status_t gs_comm_split(gs_comm_t comm, int color, int key, gs_comm_t *newcomm_out)
{
    return comm_split("gs_comm_split", comm, color, key, newcomm_out);
}

/*
 * A split where every rank passes color 0 and its rank as key: the same
 * ranks in the same order, the parent's resolved configuration, and a
 * transport instance of its own (new connections, a comm id derived from
 * the parent's and its split count), so no message of one can match a
 * receive of the other.
 */
gs_status_t gs_comm_dup(gs_comm_t comm, gs_comm_t *newcomm_out)
{
    if ((comm == NULL) || (newcomm_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_comm_dup: %s is NULL",
                             comm == NULL ? "comm" : "newcomm_out");
    }
    return comm_split("gs_comm_dup", comm, 0, comm->rank, newcomm_out);
}
