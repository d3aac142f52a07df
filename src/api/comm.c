/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Communicator lifetime: init (configuration, transport, bootstrap,
 * connections, worker), destroy, abort, queries and counters. The worker's
 * side (the executor and its sticky-error rule) is comm_exec.c; split and
 * dup are comm_split.c, shrink comm_shrink.c.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
#include "core/error.h"
#include "core/log.h"
#include "core/msg_limit.h"

#define COMM_WORLD_ID 0x776f726c64ull /* "world" */

gs_comm_t gs__comm_alloc(void)
{
    gs_comm_t comm = calloc(1, sizeof(*comm));

    if (comm == NULL) {
        gs__error_set(GS_ERR_NO_MEMORY, "gs_comm_init: out of memory");
        return NULL;
    }
    pthread_mutex_init(&comm->err.mu, NULL);
    pthread_mutex_init(&comm->grow.mu, NULL);
    comm->grow.fd = -1;
    atomic_init(&comm->err.status, GS_OK);
    atomic_init(&comm->split_seq, 0);
    atomic_init(&comm->destroying, 0);
    return comm;
}

/*
 * The layers a communicator builds, each with one init and one fini (the
 * finis run in reverse order):
 *   transport  gs__comm_transport_init (gs__tp_init); gs__tp_finalize, in
 *              gs__comm_free, or in gs_comm_destroy under err.mu
 *   algo ctx   gs__algo_ctx_init (gs__comm_start); gs__algo_ctx_fini
 *   selection  the policy at resolution (gs__algo_policy_parse), the cost
 *              model in comm_select_start; nothing to free
 *   device     on the first device call (comm_cuda.c); gs__dev_free
 *   stats and recorder  gs__comm_stats_setup, gs__comm_recorder_setup;
 *              gs__comm_stats_free, gs__comm_recorder_free
 *   worker     gs__worker_start; gs__worker_stop (gs_comm_destroy)
 */
void gs__comm_free(gs_comm_t comm)
{
    if (comm->tr.tp != NULL) {
        (void)gs__tp_finalize(&comm->tr); /* a communicator that did not start */
    }
    gs__comm_stats_free(comm);
    gs__comm_recorder_free(comm);
#ifdef GS_WITH_CUDA
    (void)gs__dev_free(&comm->actx, atomic_load(&comm->err.status) != GS_OK);
#endif
    gs__algo_ctx_fini(&comm->actx);
    if (comm->grow.fd >= 0) {
        (void)close(comm->grow.fd);
    }
    pthread_mutex_destroy(&comm->grow.mu);
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

    for (int k = 0; k < 3; k++) {
        if (gs__cfg_source_of(cfg, names[k]) == GS_CFG_SRC_CALLER) {
            set[k] = vals[k];
            any = 1;
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
    gs__tp_params_t params;
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

    for (size_t k = 0; k < sizeof(knobs) / sizeof(knobs[0]); k++) {
        if (gs__cfg_source_of(cfg, knobs[k].env) != GS_CFG_SRC_DEFAULT) {
            keep |= knobs[k].bit;
        }
    }
    return keep;
}

/* Selection's cost model, once connected: the defaults with the caller's
 * GS_ALGO_* values, the local links every rank agrees on, and the probe
 * (GS_TUNE). Collective. Returns GS_OK or the failing step's status. (The
 * selection layer has no init of its own yet; this is where it goes.) */
static gs_status_t comm_select_start(gs_comm_t comm)
{
    gs_status_t status;

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
    /* Ranks that share a host get a host segment (ctx->shm): with every rank on
     * one host the collectives that gain from it run there; across hosts the
     * hierarchical all-reduce runs its phases inside each host there. */
    comm->sel.shm_design = 0;
    if (strcmp(comm->cfg.shm_design, "auto") != 0) {
        const int design = gs__shm_design_parse(comm->cfg.shm_design);
        if (design < 0) {
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "GS_SHM_DESIGN=\"%.64s\" is not known; use auto (the default), "
                                 "one-round, chunked or single-copy",
                                 comm->cfg.shm_design);
        }
        comm->sel.shm_design = design + 1;
    }
    /* Not under TLS: every byte between ranks goes through it (docs/security.md). */
    if ((comm->actx.hosts.nhosts >= 1) && (comm->actx.hosts.max_local >= 2) && comm->cfg.shm &&
        !comm->cfg.tls && gs__tp_has_peer_failed(&comm->tr) && gs__tp_has_shm_peers(&comm->tr)) {
        const gs__algo_shm_params_t sp = {
            .job_id = comm->job_id,
            .comm_id = comm->comm_id,
            .slot_bytes = (size_t)comm->cfg.shm_slot_bytes,
            .cma = comm->cfg.shm_cma,
            .cma_deny = gs__cfg_shm_test_cma_deny(&comm->cfg) == 1,
        };
        status = gs__algo_shm_setup(&comm->actx, &sp);
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
    return GS_OK;
}

gs_status_t gs__comm_start(gs_comm_t comm, char (*addrs)[GS_SOCK_ADDR_MAX], const uint64_t *hosts)
{
    const gs__algo_ctx_params_t ap = {
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
    status = gs__tp_connect(&comm->tr, addrs, hosts, gs__deadline_after_ms(comm->cfg.timeout_ms));
    if (status != GS_OK) {
        return status;
    }
    status = comm_select_start(comm);
    if (status != GS_OK) {
        return status;
    }
    status = gs__comm_stats_setup(comm);
    if (status != GS_OK) {
        return status;
    }
    status = gs__comm_recorder_setup(comm); /* flight recorder, GS_DUMP_SIGNAL */
    if (status != GS_OK) {
        return status;
    }
    gs__comm_worker_hooks(comm, &hooks);
    return gs__worker_start(&comm->worker, comm, &hooks);
}

static gs_status_t comm_init_watched(gs_comm_t *comm_out, const gs_config_t *cfg, int launcher_env,
                                     gs__boot_exchange_fn_t exchange, const gs__comm_join_t *join,
                                     gs__init_watch_t *watch);

static gs_status_t comm_init(gs_comm_t *comm_out, const gs_config_t *cfg, int launcher_env,
                             gs__boot_exchange_fn_t exchange, const gs__comm_join_t *join)
{
    gs__init_watch_t watch;
    gs_comm_t comm = GS_COMM_NULL;
    gs_status_t status;

    if (comm_out == NULL) {
        gs__log_init();
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_comm_init: comm_out is NULL");
    }
    gs__init_watch_start(&watch, cfg);
    status = comm_init_watched(&comm, cfg, launcher_env, exchange, join, &watch);
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
                                     gs__boot_exchange_fn_t exchange, const gs__comm_join_t *join,
                                     gs__init_watch_t *watch)
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
    if (join != NULL) {
        comm->job_id = join->job_id; /* the job's, whatever this rank's rendezvous settings */
        comm->comm_id = join->comm_id;
    }

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
        const volatile int *flag = watch->started ? watch->flag : NULL;

        status = (join != NULL)
                     ? join->exchange(join, &comm->cfg, &comm->auth, flag, my_addr, addrs, hosts)
                     : exchange(&comm->cfg, &comm->auth, flag, my_addr, addrs, hosts, &nonce);
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
    gs__comm_free(comm);
    return status;
}

gs_status_t gs_comm_init(gs_comm_t *comm_out, const gs_config_t *cfg)
{
    return comm_init(comm_out, cfg, 0, gs__bootstrap_exchange, NULL);
}

gs_status_t gs__comm_init_join(gs_comm_t *comm_out, const gs_config_t *cfg,
                               const gs__comm_join_t *join)
{
    /* The join's exchange runs instead; the rendezvous's is there only so that the
     * provider's slot is never NULL. */
    return comm_init(comm_out, cfg, 0, gs__bootstrap_exchange, join);
}

/* gs_comm_init_env's bootstrap providers are comm_boot.c's table. */
gs_status_t gs__comm_init_exchange(gs_comm_t *comm_out, const gs_config_t *cfg,
                                   const gs__cfg_t *rcfg, const gs__comm_boot_t *self)
{
    (void)rcfg;
    return comm_init(comm_out, cfg, 1, self->exchange, NULL);
}

gs_status_t gs_comm_destroy(gs_comm_t comm)
{
    gs__transport_t tr;
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

gs_status_t gs_comm_revoke(gs_comm_t comm)
{
    char msg[96];

    if (comm == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_comm_revoke: comm is NULL");
    }
    (void)snprintf(msg, sizeof(msg), "rank %d revoked the communicator (gs_comm_revoke)",
                   comm->rank);
    gs__comm_fail(comm, GS_ERR_REVOKED, msg);
    pthread_mutex_lock(&comm->err.mu);
    if (comm->tr.tp != NULL) {
        /* The transport tells the others and fails what is pending here;
         * one that cannot (MPI) is aborted, which fails it here only. */
        (void)(gs__tp_has_revoke(&comm->tr) ? gs__tp_revoke(&comm->tr) : gs__tp_abort(&comm->tr));
    }
    pthread_mutex_unlock(&comm->err.mu);
    gs__worker_poke(&comm->worker); /* an idle worker tells the others now, not at its tick */
#ifdef GS_WITH_CUDA
    gs__dev_abort(&comm->actx);
#endif
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
