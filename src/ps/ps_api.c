/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lifetime of a parameter server: creation (the two private communicators,
 * the options agreed between ranks, the threads), the collective shutdown,
 * gs_ps_info and the sticky error. Options are in ps_opts.c, keys in
 * ps_register.c, pushes and pulls in ps_client.c and ps_request.c, the
 * threads in ps_rx.c and ps_server.c.
 *
 * Shutdown, and why it is collective: when a rank closes its private
 * communicator the others' transports see it leave and fail their
 * any-source receives. So every rank first says BYE to every other rank
 * (after its own requests are complete), its receive thread ends once it
 * has heard BYE from everyone, and a barrier then makes sure nobody is
 * still receiving before the communicators are closed. A rank that is done
 * early keeps serving the others meanwhile.
 */
#include "ps/ps_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

/* ====================================================================== */
/* Sticky error                                                           */
/* ====================================================================== */

void gs__ps_fail(gs_ps_t ps, gs_status_t status, const char *msg, int abort_comm)
{
    int first = 0;

    pthread_mutex_lock(&ps->err_mu);
    if (atomic_load(&ps->error) == GS_OK) {
        snprintf(ps->errmsg, sizeof(ps->errmsg), "%s", msg);
        atomic_store(&ps->error, status);
        first = 1;
    }
    pthread_mutex_unlock(&ps->err_mu);
    if (first) {
        GS_INFO(PS, "parameter server on rank %d failed: %s", ps->rank, msg);
    }
    if (abort_comm) {
        (void)gs_comm_abort(ps->comm);
    }
    pthread_mutex_lock(&ps->q_mu);
    pthread_cond_broadcast(&ps->q_cv);
    pthread_mutex_unlock(&ps->q_mu);
    pthread_mutex_lock(&ps->done_mu);
    pthread_cond_broadcast(&ps->done_cv);
    pthread_mutex_unlock(&ps->done_mu);
}

gs_status_t gs__ps_sticky(gs_ps_t ps)
{
    const gs_status_t status = (gs_status_t)atomic_load(&ps->error);

    if (status != GS_OK) {
        pthread_mutex_lock(&ps->err_mu);
        gs__error_copy_in(ps->errmsg);
        pthread_mutex_unlock(&ps->err_mu);
    }
    return status;
}

/* ====================================================================== */
/* Create                                                                 */
/* ====================================================================== */

static void ps_free(gs_ps_t ps)
{
    gs__ps_send_t *s;

    gs__ps_registry_free(ps);
    while ((s = ps->cl.sends) != NULL) {
        ps->cl.sends = s->next;
        free(s);
    }
    free(ps->leave_op);
    free(ps->srv.wclock);
    free(ps->srv.dec);
    free(ps->srv.scratch);
    free(ps->srv.gbuf);
    free(ps->cl.inflight);
    free(ps->held.reqs);
    free(ps->held.staged_bytes);
    free(ps->held.staged_ops);
    free(ps->held.q_clock);
    pthread_rwlock_destroy(&ps->reg.lock);
    pthread_mutex_destroy(&ps->cl.mu);
    pthread_mutex_destroy(&ps->cl.rndv_mu);
    pthread_mutex_destroy(&ps->cl.pend_mu);
    pthread_mutex_destroy(&ps->err_mu);
    pthread_mutex_destroy(&ps->q_mu);
    pthread_cond_destroy(&ps->q_cv);
    pthread_mutex_destroy(&ps->done_mu);
    pthread_cond_destroy(&ps->done_cv);
    pthread_mutex_destroy(&ps->pool_mu);
    free(ps);
}

static gs_ps_t ps_alloc(void)
{
    gs_ps_t ps = calloc(1, sizeof(*ps));
    pthread_condattr_t ca;

    if (ps == NULL) {
        return NULL;
    }
    pthread_rwlock_init(&ps->reg.lock, NULL);
    pthread_mutex_init(&ps->cl.mu, NULL);
    pthread_mutex_init(&ps->cl.rndv_mu, NULL);
    pthread_mutex_init(&ps->cl.pend_mu, NULL);
    pthread_mutex_init(&ps->err_mu, NULL);
    pthread_mutex_init(&ps->q_mu, NULL);
    pthread_mutex_init(&ps->done_mu, NULL);
    pthread_mutex_init(&ps->pool_mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ps->q_cv, &ca);
    pthread_cond_init(&ps->done_cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&ps->error, GS_OK);
    atomic_init(&ps->leaving, 0);
    atomic_init(&ps->cl.clock, 0);
    atomic_init(&ps->cl.seq, 0);
    return ps;
}

/* The per-worker and per-rank counters of the limits (ps_limits.h). */
static gs_status_t limits_alloc(gs_ps_t ps)
{
    const size_t nw = (size_t)ps->roles.nworkers;
    const size_t nr = (size_t)ps->nranks;

    ps->cl.inflight = malloc(nr * sizeof(*ps->cl.inflight));
    ps->held.reqs = malloc(nw * sizeof(*ps->held.reqs));
    ps->held.staged_bytes = malloc(nw * sizeof(*ps->held.staged_bytes));
    ps->held.staged_ops = malloc(nw * sizeof(*ps->held.staged_ops));
    ps->held.q_clock = calloc(nw, sizeof(*ps->held.q_clock));
    if ((ps->cl.inflight == NULL) || (ps->held.reqs == NULL) || (ps->held.staged_bytes == NULL) ||
        (ps->held.staged_ops == NULL) || (ps->held.q_clock == NULL)) {
        return gs__error_set(GS_ERR_NO_MEMORY, "gs_ps_create: out of memory");
    }
    for (size_t r = 0; r < nr; r++) {
        atomic_init(&ps->cl.inflight[r], 0u);
    }
    for (size_t w = 0; w < nw; w++) {
        atomic_init(&ps->held.reqs[w], 0u);
        atomic_init(&ps->held.staged_bytes[w], (size_t)0);
        atomic_init(&ps->held.staged_ops[w], 0u);
    }
    return GS_OK;
}

static void msg_fixed(gs_ps_t ps, gs__ps_msg_type_t type, uint8_t *out)
{
    gs__ps_msg_t m;

    memset(&m, 0, sizeof(m));
    m.type = (uint8_t)type;
    m.src = ps->rank;
    gs__ps_msg_encode(&m, out);
}

/* Agree on the options: every rank learns every rank's digest. */
gs_status_t gs_ps_create(gs_comm_t comm, const gs_ps_opts_t *opts, gs_ps_t *ps_out)
{
    gs_ps_t ps;
    gs_status_t status;
    gs_status_t local;
    char saved[GS_ERROR_MSG_MAX];
    int ret;

    if ((comm == GS_COMM_NULL) || (ps_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_ps_create: %s is NULL",
                             (comm == GS_COMM_NULL) ? "comm" : "ps_out");
    }
    ps = ps_alloc();
    if (ps == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "gs_ps_create: out of memory");
    }
    /* Two duplicates: the threads' point-to-point traffic never waits in a
     * communicator's queue behind a collective (registration, shutdown) that
     * needs another rank which itself waits for that traffic. */
    status = gs_comm_split(comm, 0, 0, &ps->comm);
    if (status != GS_OK) {
        ps_free(ps);
        return status;
    }
    status = gs_comm_split(comm, 0, 0, &ps->ccomm);
    if (status != GS_OK) {
        snprintf(saved, sizeof(saved), "%s", gs__error_get());
        (void)gs_comm_destroy(ps->comm);
        ps_free(ps);
        gs__error_copy_in(saved);
        return status;
    }
    (void)gs_comm_rank(ps->comm, &ps->rank);
    (void)gs_comm_size(ps->comm, &ps->nranks);
    /* Options are resolved on every rank, and a bad one is reported to all. */
    local = gs__ps_cfg_resolve(opts, ps->nranks, &ps->cfg);
    snprintf(saved, sizeof(saved), "%s", gs__error_get());
    status = gs__ps_cfg_agree(ps, local == GS_OK, saved);
    if (status != GS_OK) {
        goto err_comm;
    }
    (void)gs__ps_roles_init(&ps->roles, ps->nranks, ps->cfg.servers);
    ps->worker = gs__ps_worker_of(&ps->roles, ps->rank);
    ps->server = gs__ps_server_of(&ps->roles, ps->rank);
    ps->reg.placer.nservers = ps->roles.nservers;
    ps->reg.placer.split_bytes = ps->cfg.split_bytes;
    ps->reg.placer.load = calloc((size_t)ps->roles.nservers, sizeof(uint64_t));
    ps->srv.wclock = calloc((size_t)ps->roles.nworkers, sizeof(int64_t));
    ps->leave_op = calloc(1, sizeof(*ps->leave_op));
    if (ps->leave_op != NULL) {
        ps->leave_op->type = GS_PS_OP_LEAVE;
    }
    if ((ps->reg.placer.load == NULL) || (ps->srv.wclock == NULL) || (ps->leave_op == NULL)) {
        status = gs__error_set(GS_ERR_NO_MEMORY, "gs_ps_create: out of memory");
        goto err_comm;
    }
    status = limits_alloc(ps);
    if (status != GS_OK) {
        goto err_comm;
    }
    msg_fixed(ps, GS_PS_MSG_HEARTBEAT, ps->srv.hb_msg);
    msg_fixed(ps, GS_PS_MSG_BYE, ps->srv.bye_msg);

    ret = pthread_create(&ps->srv_thread, NULL, gs__ps_server_main, ps);
    if (ret != 0) {
        status = gs__error_set(GS_ERR_SYSTEM, "gs_ps_create: cannot start the service thread: %s",
                               strerror(ret));
        goto err_comm;
    }
    ps->srv_started = 1;
    if (ps->nranks > 1) {
        ret = pthread_create(&ps->rx_thread, NULL, gs__ps_rx_main, ps);
        if (ret != 0) {
            status = gs__error_set(
                GS_ERR_SYSTEM, "gs_ps_create: cannot start the receive thread: %s", strerror(ret));
            goto err_threads;
        }
        ps->rx_started = 1;
    }
    GS_INFO(PS,
            "parameter server on rank %d: %s, %d workers, %d servers (%s), %s, rule %d, "
            "codec %s, timeout %d ms",
            ps->rank,
            (ps->cfg.consistency == GS_PS_BSP)   ? "BSP"
            : (ps->cfg.consistency == GS_PS_SSP) ? "SSP"
                                                 : "ASP",
            ps->roles.nworkers, ps->roles.nservers, ps->roles.colocated ? "colocated" : "dedicated",
            (ps->worker >= 0) ? ((ps->server >= 0) ? "worker and server" : "worker") : "server",
            (int)ps->cfg.rule.rule, ps->cfg.has_codec ? "on" : "off", ps->cfg.timeout_ms);
    *ps_out = ps;
    return GS_OK;

err_threads:
    gs__ps_fail(ps, status, gs__error_get(), 1);
    gs__ps_enqueue(ps, ps->leave_op);
    ps->leave_op = NULL;
    pthread_join(ps->srv_thread, NULL);
err_comm:
    snprintf(saved, sizeof(saved), "%s", gs__error_get());
    (void)gs_comm_destroy(ps->ccomm);
    (void)gs_comm_destroy(ps->comm);
    ps_free(ps);
    gs__error_copy_in(saved);
    return status;
}

/* ====================================================================== */
/* Destroy, info                                                          */
/* ====================================================================== */

gs_status_t gs_ps_destroy(gs_ps_t ps)
{
    gs_status_t first = GS_OK;
    gs_status_t status;
    gs__ps_op_t *op;
    struct gs_ps_request *req;
    char msg[GS_ERROR_MSG_MAX] = "";

    if (ps == GS_PS_NULL) {
        return GS_OK;
    }
    /* 1. Finish this rank's requests (their handles stay valid). */
    pthread_mutex_lock(&ps->cl.mu);
    while ((req = ps->cl.reqs) != NULL) {
        ps->cl.reqs = req->next;
        req->next = NULL;
        req->prev = NULL;
        pthread_mutex_unlock(&ps->cl.mu);
        gs__ps_request_finish(req);
        req->ps = NULL;
        pthread_mutex_lock(&ps->cl.mu);
    }
    pthread_mutex_unlock(&ps->cl.mu);
    status = gs__ps_sends_wait(&ps->cl.sends);
    if (status != GS_OK) {
        first = status;
        snprintf(msg, sizeof(msg), "%s", gs__error_get());
    }
    /* 2. The service thread says BYE and serves until every rank has. */
    atomic_store(&ps->leaving, 1);
    op = ps->leave_op;
    ps->leave_op = NULL;
    gs__ps_enqueue(ps, op);
    if (ps->srv_started) {
        pthread_join(ps->srv_thread, NULL);
    }
    if (atomic_load(&ps->error) != GS_OK) {
        (void)gs_comm_abort(ps->comm); /* ends the receive thread's wait */
    }
    if (ps->rx_started) {
        pthread_join(ps->rx_thread, NULL);
    }
    gs__ps_queue_discard(ps);
    status = gs__ps_sticky(ps);
    /* 3. Nobody still receives once everyone is past the barrier. */
    if (status == GS_OK) {
        status = gs_barrier(ps->ccomm);
    }
    if ((status != GS_OK) && (first == GS_OK)) {
        first = status;
        snprintf(msg, sizeof(msg), "%s", gs__error_get());
    }
    for (int i = 0; i < 2; i++) {
        status = gs_comm_destroy((i == 0) ? ps->comm : ps->ccomm);
        if ((status != GS_OK) && (first == GS_OK)) {
            first = status;
            snprintf(msg, sizeof(msg), "%s", gs__error_get());
        }
    }
    ps_free(ps);
    if (first != GS_OK) {
        gs__error_copy_in(msg);
    }
    return first;
}

gs_status_t gs_ps_info(gs_ps_t ps, gs_ps_info_t *info_out)
{
    gs_ps_info_t v;

    if ((ps == GS_PS_NULL) || (info_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_ps_info: %s is NULL",
                             (ps == GS_PS_NULL) ? "ps" : "info_out");
    }
    if ((info_out->size < offsetof(gs_ps_info_t, error) + sizeof(info_out->error)) ||
        (info_out->size > (1u << 20))) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_ps_info: info_out->size is %zu (initialise it with "
                             "GS_PS_INFO_INIT)",
                             info_out->size);
    }
    memset(&v, 0, sizeof(v));
    v.size = sizeof(v);
    v.rank = ps->rank;
    v.nranks = ps->nranks;
    v.worker = ps->worker;
    v.nworkers = ps->roles.nworkers;
    v.server = ps->server;
    v.nservers = ps->roles.nservers;
    v.clock = (int64_t)atomic_load(&ps->cl.clock);
    pthread_rwlock_rdlock(&ps->reg.lock);
    v.nkeys = ps->reg.nkeys;
    v.shard_bytes = ps->reg.served_bytes;
    pthread_rwlock_unlock(&ps->reg.lock);
    v.error = (gs_status_t)atomic_load(&ps->error);
    memcpy(info_out, &v, (info_out->size < sizeof(v)) ? info_out->size : sizeof(v));
    info_out->size = (info_out->size < sizeof(v)) ? info_out->size : sizeof(v);
    return GS_OK;
}
