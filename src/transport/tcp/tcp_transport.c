/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TCP transport's ops table and its request-level calls: init (listen),
 * get_address, connect (tcp_handshake.c does the work), isend/irecv (cut a
 * message into frames, match or post a receive), test, progress (epoll over
 * every socket plus an eventfd for abort), req_release, abort, finalize.
 * The socket-level state machines live in tcp_tx.c and tcp_rx.c, failure
 * propagation with DOWN frames in tcp_fail.c (see tcp_conn.h), the shared
 * request and message bookkeeping in tcp_conn.c. Everything except
 * abort and wake runs on the one thread that drives the instance.
 */
#include "transport/tcp/tcp_transport.h"

#include "core/clock.h"
#include "core/error.h"
#include "core/host.h"
#include "core/log.h"
#include "core/msg_limit.h"
#include "core/shm_budget.h"
#include "transport/tcp/tcp_conn.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#define TCP_LISTEN_BACKLOG 1024
#define TCP_EPOLL_EVENTS 64
/* GS_TCP_SPIN_US=-1 (the default): how long progress polls before sleeping
 * when every peer is on shared memory (docs/design.md, "Polling"). */
#define TCP_SHM_SPIN_US 100
/* A spin pass that only reads the rings also looks at the sockets and the
 * eventfd (a peer's EOF, a wake) every this many passes. */
#define TCP_SPIN_EPOLL_EVERY 16
/* How long a failed init gives its DOWN reports to leave. */
#define CONNECT_REPORT_MS 500

static const char tcp_abort_reason[] = "the communicator was aborted";

/* master_addr is "host", "host:port" or "[v6]:port"; only the host matters. */
static gs_status_t resolve_route(const char *text, const char *family, gs__sockaddr_t *out)
{
    const char *first = strchr(text, ':');

    if ((text[0] == '[') || ((first != NULL) && (strchr(first + 1, ':') == NULL))) {
        return gs__sock_parse(text, family, out);
    }
    return gs__sock_resolve(text, 0, family, out);
}

static int sock_port(const gs__sockaddr_t *a)
{
    return (a->ss.ss_family == AF_INET6) ? ntohs(((const struct sockaddr_in6 *)&a->ss)->sin6_port)
                                         : ntohs(((const struct sockaddr_in *)&a->ss)->sin_port);
}

/*
 * GS_SOCKET_IFNAME selecting several interfaces (a list, a prefix that
 * several names share, an exclusion: NCCL's reading) makes them rails
 * (docs/design.md, "Several rails per peer"): listen on the wildcard
 * address of their family. One interface (or none named): as before.
 */
static gs_status_t rails_setup(gs__tp_t *tp, const gs__tcp_settings_t *set, gs__sockaddr_t *any)
{
    int n = 0;
    int extra = 0;

    if ((set->ifname == NULL) || (set->ifname[0] == '\0')) {
        return GS_OK;
    }
    if ((gs__tcp_rails_local(set->ifname, set->family, tp->rails, GS_TCP_MAX_RAILS, &n, &extra) !=
         GS_OK) ||
        (n < 2)) {
        gs__error_clear();
        return GS_OK; /* one rail, or none: gs__sock_pick_local says why */
    }
    if ((tp->nsocks * n) > GS_TCP_MAX_SOCKS) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "tcp: %d rails x GS_TCP_NSOCKS=%d is %d sockets per peer, over %d; "
                             "lower GS_TCP_NSOCKS",
                             n, tp->nsocks, n * tp->nsocks, GS_TCP_MAX_SOCKS);
    }
    for (int r = 1; r < n; r++) {
        if (tp->rails[r].addr.ss.ss_family != tp->rails[0].addr.ss.ss_family) {
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "tcp: GS_SOCKET_IFNAME=%s selects interfaces of both address "
                                 "families (%s, %s); set GS_SOCKET_FAMILY=ipv4 or ipv6",
                                 set->ifname, tp->rails[0].ifname, tp->rails[r].ifname);
        }
    }
    if (extra > 0) {
        GS_WARN("tcp: GS_SOCKET_IFNAME=%s selects %d interfaces; the first %d are rails",
                set->ifname, n + extra, n);
    }
    tp->nrails = n;
    tp->max_conns = tp->nsocks * n;
    tp->rail_timeout_ms = (set->heartbeat_ms > 0) ? 3ull * (uint64_t)set->heartbeat_ms : 10000ull;
    memset(any, 0, sizeof(*any));
    any->ss.ss_family = tp->rails[0].addr.ss.ss_family;
    any->len =
        (any->ss.ss_family == AF_INET6) ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    return GS_OK;
}

static void free_instance(gs__tp_t *tp)
{
    gs__tcp_hs_close(tp);
    gs__tcp_shm_free(tp);
    if (tp->peers != NULL) {
        for (int p = 0; p < tp->size; p++) {
            gs__tcp_conn_t *conns = tp->peers[p].conns;

            for (int i = 0; (conns != NULL) && (i < tp->max_conns); i++) {
                gs__tcp_frame_t *f = conns[i].sq_head;

                while (f != NULL) {
                    gs__tcp_frame_t *fnext = f->next;

                    if (f->owned) {
                        free(f);
                    }
                    f = fnext;
                }
                gs__tcp_tls_free(conns[i].ssl);
                if (conns[i].fd >= 0) {
                    close(conns[i].fd);
                }
                free(conns[i].rbuf);
            }
            free(conns);
        }
    }
    if (tp->peers != NULL) {
        gs__tcp_free_messages(tp);
    }
    while (tp->all != NULL) {
        struct gs__tp_req *r = tp->all;

        tp->all = r->all_next;
        free(r->reason_buf);
        free(r);
    }
    free(tp->peers);
    free(tp->hosts);
    free(tp->scratch);
    free(tp->tls_stage);
    gs__tcp_tls_ctx_free(tp->tls_ctx);
    if (tp->listen_fd >= 0) {
        close(tp->listen_fd);
    }
    if (tp->epfd >= 0) {
        close(tp->epfd);
    }
    if (tp->evfd >= 0) {
        close(tp->evfd);
    }
    free(tp);
}

void gs__tcp_settings_read(const gs__cfg_t *cfg, gs__tcp_settings_t *out)
{
    memset(out, 0, sizeof(*out));
    out->nsocks = cfg->tcp_nsocks;
    out->spin_us = cfg->tcp_spin_us;
    out->ifname = cfg->socket_ifname;
    out->rail_balance = cfg->tcp_rail_balance;
    out->family = cfg->socket_family;
    out->master_addr = cfg->master_addr;
    out->host_id = gs__host_id(cfg->host_id);
    out->shm = cfg->shm;
    out->shm_bytes = cfg->shm_bytes;
    out->shm_test_free = gs__cfg_shm_test_free(cfg); /* -1 without test hooks */
    out->shm_max = cfg->shm_max_bytes;
    out->shm_slot_bytes = cfg->shm_slot_bytes;
    out->heartbeat_ms = cfg->heartbeat_ms;
    out->timeout_ms = cfg->timeout_ms;
    out->tls.on = cfg->tls;
    out->tls.cert = cfg->tls_cert;
    out->tls.key = cfg->tls_key;
    out->tls.ca = cfg->tls_ca;
    out->lazy = (strcmp(cfg->connect, "eager") != 0);
}

static gs_status_t tcp_init(const gs__tp_params_t *params, gs__tp_t **tp_out)
{
    gs__tcp_settings_t set;

    if ((params == NULL) || (params->cfg == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "tcp: init needs params with a configuration");
    }
    gs__tcp_settings_read(params->cfg, &set);
    return gs__tcp_init_with(params, &set, tp_out);
}

gs_status_t gs__tcp_init_with(const gs__tp_params_t *params, const gs__tcp_settings_t *set,
                              gs__tp_t **tp_out)
{
    gs__sockaddr_t route;
    gs__sockaddr_t local;
    gs__sockaddr_t any;
    char text[GS_SOCK_ADDR_MAX];
    struct epoll_event ev;
    gs_status_t status;
    gs__tp_t *tp;

    if ((params == NULL) || (set == NULL) || (tp_out == NULL) || (params->size < 1) ||
        (params->rank < 0) || (params->rank >= params->size)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "tcp: init needs params with 0 <= rank < size");
    }
    if ((set->nsocks < 1) || (set->nsocks > GS_TCP_MAX_SOCKS)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "tcp: %d sockets per peer, expected 1..%d",
                             set->nsocks, GS_TCP_MAX_SOCKS);
    }
    tp = calloc(1, sizeof(*tp));
    if (tp == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "tcp: out of memory for the transport");
    }
    tp->rank = params->rank;
    tp->size = params->size;
    tp->nsocks = set->nsocks;
    tp->nrails = 1;
    tp->max_conns = set->nsocks;
    tp->balance_equal = (set->rail_balance != NULL) && (strcmp(set->rail_balance, "equal") == 0);
    tp->spin_us = set->spin_us;
    tp->job_id = params->job_id;
    tp->comm_id = params->comm_id;
    tp->counters = params->counters;
    tp->listen_fd = -1;
    tp->epfd = -1;
    tp->evfd = -1;
    tp->down_rank = -1;
    tp->lazy = (set->lazy != 0);
    tp->link_timeout_ns = (uint64_t)((set->timeout_ms > 0) ? set->timeout_ms : 300000) * 1000000ull;
    tp->hb_ns = (set->heartbeat_ms > 0) ? (uint64_t)set->heartbeat_ms * 1000000ull : 0;
    tp->hb_next_ns = UINT64_MAX; /* armed by connect */
    tp->hb_judge = (tp->hb_ns > 0) && (set->timeout_ms > 0) &&
                   (tp->hb_ns * GS_TCP_HEARTBEAT_MISSES < (uint64_t)set->timeout_ms * 1000000ull);
    tp->host_id = set->host_id;
    tp->shm_offer = (set->shm != 0) && (set->host_id != 0) && (tp->size > 1);
    tp->shm_bytes = (uint64_t)set->shm_bytes;
    if ((tp->shm_bytes < GS_SHM_MIN_BYTES) || (tp->shm_bytes > GS_SHM_MAX_BYTES)) {
        tp->shm_offer = false; /* unset or out of range (in-process tests): TCP only */
    }
    if (gs__shm_budget_parse(set->shm_max, &tp->shm_max_auto, &tp->shm_max) != 0) {
        tp->shm_max_auto = 1; /* config.c refused it already; settings from a test */
    }
    tp->shm_reserve = (set->shm_slot_bytes > 0) ? 2u * (uint64_t)set->shm_slot_bytes : 0;
#ifdef GS_TEST_HOOKS
    tp->shm_test_free = set->shm_test_free;
#else
    tp->shm_test_free = -1; /* GS_SHM_TEST_FREE_BYTES: test hooks only */
#endif
    if (params->auth != NULL) {
        tp->auth = *params->auth;
    }
    tp->max_msg =
        (params->max_message_bytes != 0) ? params->max_message_bytes : GS_MAX_MESSAGE_BYTES_DEFAULT;
    gs__match_budget_init(&tp->held, GS_TCP_UNEXP_MAX, GS_TCP_UNEXP_MAX_MSGS);
    gs__match_init(&tp->unexp);
    gs__htab_init(&tp->active);
    atomic_init(&tp->aborted, 0);
    atomic_init(&tp->revoke_asked, 0);
    tp->revoked_by = -1;
    status = gs__tcp_tls_ctx_new(&set->tls, &tp->tls_ctx);
    if (status != GS_OK) {
        goto err_free; /* named the file or the missing setting */
    }
    if (tp->tls_ctx != NULL) {
        /* Every byte between ranks goes through TLS: no shared-memory links
         * (their doorbells and rings would bypass it; docs/security.md). */
        tp->shm_offer = false;
        tp->tls_stage = malloc(GS_TCP_TLS_STAGE_LEN);
        if (tp->tls_stage == NULL) {
            status = gs__error_set(GS_ERR_NO_MEMORY, "tcp: out of memory for TLS");
            goto err_free;
        }
    }
    status = rails_setup(tp, set, &any);
    if (status != GS_OK) {
        goto err_free;
    }
    tp->peers = calloc((size_t)tp->size, sizeof(*tp->peers));
    tp->scratch = malloc(GS_TCP_SCRATCH_LEN);
    if ((tp->peers == NULL) || (tp->scratch == NULL)) {
        status = gs__error_set(GS_ERR_NO_MEMORY, "tcp: out of memory for %d peers", tp->size);
        goto err_free;
    }
    for (int p = 0; p < tp->size; p++) {
        if (p == tp->rank) {
            continue;
        }
        tp->peers[p].conns = calloc((size_t)tp->max_conns, sizeof(gs__tcp_conn_t));
        if (tp->peers[p].conns == NULL) {
            status = gs__error_set(GS_ERR_NO_MEMORY, "tcp: out of memory for peer %d", p);
            goto err_free;
        }
        /* One rail until the peer's address says more (gs__tcp_rails_peer). */
        tp->peers[p].nconns = tp->nsocks;
        tp->peers[p].nrails = 1;
        tp->peers[p].nrails_up = 1;
        tp->peers[p].rails[0].up = true;
        for (int i = 0; i < tp->max_conns; i++) {
            tp->peers[p].conns[i].fd = -1;
        }
        for (int i = 0; i < tp->max_conns; i++) {
            gs__tcp_conn_t *c = &tp->peers[p].conns[i];

            c->peer = p;
            c->index = i;
            c->rail = i / tp->nsocks;
            c->pipe = &gs__tcp_pipe_plain;
            c->rstate = GS_TCP_RS_HDR; /* rbuf comes with the link (gs__tcp_link_up) */
        }
    }
    tp->epfd = epoll_create1(EPOLL_CLOEXEC);
    tp->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if ((tp->epfd < 0) || (tp->evfd < 0)) {
        status =
            gs__error_set(GS_ERR_SYSTEM, "tcp: epoll_create1/eventfd failed: %s", strerror(errno));
        goto err_free;
    }
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data.ptr = NULL;
    if (epoll_ctl(tp->epfd, EPOLL_CTL_ADD, tp->evfd, &ev) != 0) {
        status =
            gs__error_set(GS_ERR_SYSTEM, "tcp: epoll_ctl(eventfd) failed: %s", strerror(errno));
        goto err_free;
    }
    if (tp->nrails > 1) {
        local = any;
        /* Several rails: listen on every interface, publish each (tcp_rail.h). */
    } else if ((set->master_addr != NULL) && (set->master_addr[0] != '\0')) {
        status = resolve_route(set->master_addr, set->family, &route);
        if (status == GS_OK) {
            status = gs__sock_pick_local(set->ifname, set->family, &route, &local);
        }
    } else {
        status = gs__sock_pick_local(set->ifname, set->family, NULL, &local);
    }
    if (status != GS_OK) {
        goto err_free; /* the socket helper named the cause */
    }
    status = gs__sock_listen(&local, TCP_LISTEN_BACKLOG, &tp->listen_fd, &tp->listen_addr);
    if (status != GS_OK) {
        goto err_free;
    }
    if (tp->nrails == 1) {
        tp->rails[0].addr = tp->listen_addr;
        tp->rails[0].prefix = -1;
    }
    if (gs__sock_format(&tp->listen_addr, text, sizeof(text)) == GS_OK) {
        GS_INFO(NET, "tcp: rank %d of %d listening on %s, %d sockets per peer and rail, %d rail%s",
                tp->rank, tp->size, text, tp->nsocks, tp->nrails, (tp->nrails > 1) ? "s" : "");
    }
    *tp_out = tp;
    return GS_OK;
err_free:
    free_instance(tp);
    return status;
}

static gs_status_t tcp_get_address(gs__tp_t *tp, char *buf, size_t len)
{
    char text[GS_TP_ADDR_MAX];
    gs_status_t status;

    if ((tp == NULL) || (buf == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "tcp: get_address needs an instance and buffer");
    }
    if (tp->nrails > 1) {
        status = gs__tcp_rails_format(tp->rails, tp->nrails, sock_port(&tp->listen_addr), text,
                                      sizeof(text));
    } else {
        status = gs__sock_format(&tp->listen_addr, text, sizeof(text));
    }
    if (status != GS_OK) {
        return status;
    }
    if (strlen(text) >= len) {
        return gs__error_set(GS_ERR_INVALID_ARG, "tcp: address %s needs %zu bytes, buffer has %zu",
                             text, strlen(text) + 1, len);
    }
    memcpy(buf, text, strlen(text) + 1);
    return GS_OK;
}

/* What polling costs: spin only when every peer is a ring away, so that a
 * spin pass costs no syscall and the answer of a small message is
 * microseconds away. Lazily, the peers still to come count as TCP unless
 * the plan gives them a ring. */
static void spin_setup(gs__tp_t *tp)
{
    int planned = 0;

    for (int q = 0; q < tp->size; q++) {
        planned += ((q != tp->rank) && (tp->peers[q].shm_ring > 0)) ? 1 : 0;
    }
    tp->spin_rings = (tp->size > 1) && (planned == tp->size - 1) && tp->shm_offer;
    if (tp->spin_us > 0) {
        tp->spin_ns = (uint64_t)tp->spin_us * 1000ull;
    } else if ((tp->spin_us < 0) && tp->spin_rings) {
        tp->spin_ns = (uint64_t)TCP_SHM_SPIN_US * 1000ull;
    } else {
        tp->spin_ns = 0;
    }
}

/*
 * Init failed because a neighbour is gone: tell the links that are up, so
 * that the ranks that did not need it at init name it too (lazily, they
 * may never have tried it). Bounded: the frames get CONNECT_REPORT_MS to
 * leave.
 */
static void connect_failed_report(gs__tp_t *tp, const int *peers, int n)
{
    const uint64_t deadline = gs__deadline_after_ms(CONNECT_REPORT_MS);
    int x = -1;

    for (int k = 0; (k < n) && (x < 0); k++) {
        x = (tp->peers[peers[k]].fail_status == GS_ERR_PEER_FAILED) ? peers[k] : -1;
    }
    if (x < 0) {
        return;
    }
    gs__tcp_report_down(tp, x, -1);
    for (;;) {
        bool pending = false;

        for (int q = 0; q < tp->size; q++) {
            for (int i = 0; (q != tp->rank) && (i < tp->peers[q].nconns); i++) {
                gs__tcp_conn_t *c = &tp->peers[q].conns[i];

                if ((c->fd >= 0) && (c->sq_head != NULL) && (tp->peers[q].link == GS_TCP_LINK_UP)) {
                    gs__tcp_conn_flush(tp, c);
                    pending = pending || (c->sq_head != NULL);
                }
            }
        }
        if (!pending || (gs__now_ns() >= deadline)) {
            return;
        }
        (void)poll(NULL, 0, 1);
    }
}

static gs_status_t tcp_connect(gs__tp_t *tp, char (*addrs)[GS_TP_ADDR_MAX], const uint64_t *hosts,
                               uint64_t deadline_ns)
{
    gs_status_t status;
    int *peers;
    int n = 0;

    if ((tp == NULL) || ((addrs == NULL) && (tp->size > 1))) {
        return gs__error_set(GS_ERR_INVALID_ARG, "tcp: connect needs the addresses of all ranks");
    }
    if (tp->connected || (tp->hs != NULL)) {
        return gs__error_set(GS_ERR_INVALID_USAGE, "tcp: rank %d is already connected", tp->rank);
    }
    if (hosts != NULL) {
        tp->hosts = malloc((size_t)tp->size * sizeof(*tp->hosts));
        if (tp->hosts == NULL) {
            return gs__error_set(GS_ERR_NO_MEMORY, "tcp: out of memory for %d host ids", tp->size);
        }
        memcpy(tp->hosts, hosts, (size_t)tp->size * sizeof(*tp->hosts));
    }
    status = gs__tcp_shm_plan(tp);
    if (status == GS_OK) {
        status = gs__tcp_hs_open(tp, addrs);
    }
    peers = calloc((size_t)tp->size, sizeof(*peers));
    if ((status == GS_OK) && (peers == NULL)) {
        status = gs__error_set(GS_ERR_NO_MEMORY, "tcp: out of memory for %d peers", tp->size);
    }
    if (status != GS_OK) {
        free(peers);
        return status;
    }
    /* Lazy: the ring's neighbours now (failure reports travel along it),
     * the rest on first use. Eager: everyone. */
    for (int q = 0; q < tp->size; q++) {
        const int d = (q - tp->rank + tp->size) % tp->size;

        if ((q != tp->rank) && (!tp->lazy || (d == 1) || (d == tp->size - 1))) {
            peers[n++] = q;
            /* Eager: the higher rank of a pair connects. Lazy: both (the lower one
             * after HS_DEFER_MS), so that a neighbour gone before it connected
             * is found by the refusals. */
            gs__tcp_hs_want(tp, q, tp->lazy || (q < tp->rank));
        }
    }
    status = gs__tcp_hs_wait(tp, peers, n, deadline_ns);
    if (status == GS_ERR_PEER_FAILED) {
        connect_failed_report(tp, peers, n);
    }
    free(peers);
    if (status != GS_OK) {
        return status;
    }
    if (!tp->lazy) {
        /* Every link is up: nobody connects any more. */
        gs__tcp_hs_close(tp);
        close(tp->listen_fd);
        tp->listen_fd = -1;
    }
    tp->connected = true;
    if (tp->hb_ns > 0) {
        tp->hb_next_ns = 0; /* the first progress pass ticks (and beats) */
    }
    spin_setup(tp);
    GS_INFO(NET,
            "tcp: rank %d connected to %d of %d peers (%d through shared memory) at init, %s%s, "
            "polling %llu us before sleeping",
            tp->rank, tp->nup, tp->size - 1, tp->nshm,
            tp->lazy ? "the others on first use (GS_CONNECT=lazy)" : "GS_CONNECT=eager",
            (tp->tls_ctx != NULL) ? ", every socket TLS 1.3" : "",
            (unsigned long long)(tp->spin_ns / 1000ull));
    return GS_OK;
}

static gs_status_t req_alloc(gs__tp_t *tp, gs__tcp_req_kind_t kind, int nframes, int peer,
                             uint64_t tag, void *buf, size_t len, struct gs__tp_req **req_out)
{
    struct gs__tp_req *req = calloc(1, sizeof(*req) + (size_t)nframes * sizeof(gs__tcp_frame_t));

    if (req == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "tcp: out of memory for a request");
    }
    req->kind = kind;
    req->state = GS_TCP_REQ_POSTED;
    req->peer = peer;
    req->tag = tag;
    req->buf = buf;
    req->len = len;
    req->nframes = nframes;
    req->comp.status = GS_INPROGRESS;
    req->comp.peer = peer;
    req->comp.tag = tag;
    req->all_next = tp->all;
    if (tp->all != NULL) {
        tp->all->all_prev = req;
    }
    tp->all = req;
    *req_out = req;
    return GS_OK;
}

static gs_status_t check_peer(const gs__tp_t *tp, int peer, bool any_ok, const char *what)
{
    if ((any_ok && (peer == GS_ANY_SOURCE)) ||
        ((peer >= 0) && (peer < tp->size) && (peer != tp->rank))) {
        return GS_OK;
    }
    return gs__error_set(GS_ERR_INVALID_ARG, "tcp: %s: peer %d is not another rank of 0..%d", what,
                         peer, tp->size - 1);
}

static gs_status_t tcp_isend(gs__tp_t *tp, int peer, uint64_t tag, const void *buf, size_t len,
                             gs__tp_req_t **req_out)
{
    struct gs__tp_req *req = NULL;
    gs__tcp_peer_t *p;
    gs_status_t status;

    if ((tp == NULL) || (req_out == NULL) || ((buf == NULL) && (len > 0))) {
        return gs__error_set(GS_ERR_INVALID_ARG, "tcp: isend needs an instance, buffer and req");
    }
    status = check_peer(tp, peer, false, "isend");
    if (status != GS_OK) {
        return status;
    }
    if ((uint64_t)len > GS_TCP_MAX_MSG) {
        return gs__error_set(GS_ERR_INVALID_ARG, "tcp: message of %zu bytes exceeds %llu", len,
                             GS_TCP_MAX_MSG);
    }
    if (!tp->connected) {
        return gs__error_set(GS_ERR_INVALID_USAGE, "tcp: isend before connect on rank %d",
                             tp->rank);
    }
    /* Room for the larger plan: a frame per socket of every rail (tcp_stripe.c). */
    status = req_alloc(tp, GS_TCP_REQ_SEND,
                       (gs__tcp_granules(len, tp->max_conns > 1) > 1) ? tp->max_conns : 1, peer,
                       tag, (void *)buf, len, &req);
    if (status != GS_OK) {
        return status;
    }
    *req_out = req;
    req->comp.nbytes = len;
    p = &tp->peers[peer];
    if (atomic_load_explicit(&tp->aborted, memory_order_relaxed)) {
        gs__tcp_req_fail_ref(tp, req, GS_ERR_ABORTED, tcp_abort_reason);
        return GS_OK;
    }
    if ((tp->revoked_by >= 0) && !gs__tp_tag_is_recovery(tag)) {
        gs__tcp_req_fail_ref(tp, req, tp->down_status, tp->down_reason); /* no new work */
        return GS_OK;
    }
    if (p->link != GS_TCP_LINK_UP) {
        gs__tcp_hs_want(tp, peer, true);
    }
    if (p->fail_status != GS_OK) {
        gs__tcp_req_fail_ref(tp, req, p->fail_status, gs__tcp_peer_why(tp, p));
        return GS_OK;
    }
    if ((p->link != GS_TCP_LINK_UP) || (p->wait_head != NULL)) {
        /* Cut into frames once the link is up (the plan depends on it). */
        req->waiting = true;
        req->next = NULL;
        req->prev = p->wait_tail;
        if (p->wait_tail != NULL) {
            p->wait_tail->next = req;
        } else {
            p->wait_head = req;
        }
        p->wait_tail = req;
        return GS_OK;
    }
    gs__tcp_stripe(tp, req);
    return GS_OK;
}

void gs__tcp_send_unwait(gs__tp_t *tp, struct gs__tp_req *req)
{
    gs__tcp_peer_t *p = &tp->peers[req->peer];

    if (!req->waiting) {
        return;
    }
    gs__tcp_req_unlink(&p->wait_head, &p->wait_tail, req);
    req->waiting = false;
}

void gs__tcp_link_up(gs__tp_t *tp, int peer)
{
    gs__tcp_peer_t *p = &tp->peers[peer];
    const uint64_t now = gs__now_ns();

    for (int i = 0; i < p->nconns; i++) {
        gs__tcp_conn_t *c = &p->conns[i];
        struct epoll_event ev;

        if (c->rbuf == NULL) {
            c->rbuf = malloc(GS_TCP_RBUF_LEN);
        }
        if (c->rbuf == NULL) {
            gs__tcp_peer_drop(tp, peer, GS_ERR_NO_MEMORY,
                              "tcp: out of memory for the connection to rank %d", peer);
            return;
        }
        memset(&ev, 0, sizeof(ev));
        ev.events = EPOLLIN;
        ev.data.ptr = c;
        if (epoll_ctl(tp->epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
            gs__tcp_peer_drop(tp, peer, GS_ERR_SYSTEM, "tcp: epoll_ctl for peer %d failed: %s",
                              peer, strerror(errno));
            return;
        }
        c->events = EPOLLIN;
    }
    gs__tcp_shm_link_on(tp, peer);
    gs__tcp_rails_tune(tp, peer);
    p->link = GS_TCP_LINK_UP;
    tp->nup++;
    /* Heartbeats count from now (the peer was not watched before). */
    p->last_rx_ns = now;
    p->last_tx_ns = now;
    p->rx_seen = true;
    for (int i = 0; i < p->nconns; i++) {
        gs__tcp_conn_t *c = &p->conns[i];

        gs__tcp_tls_stream(c->ssl);
        if ((c->pipe->pending != NULL) && c->pipe->pending(c) && !c->kicked) {
            c->kicked = true; /* read bytes epoll cannot see (TLS: decrypted ahead) */
            tp->nkicked++;
        }
    }
    if (tp->connected) {
        GS_INFO(NET, "tcp: rank %d connected to rank %d%s (%d of %d peers now)", tp->rank, peer,
                (p->shm != NULL) ? " through shared memory" : "", tp->nup, tp->size - 1);
    }
    gs__tcp_rails_publish(tp, peer);
    while ((p->wait_head != NULL) && (p->fail_status == GS_OK)) {
        struct gs__tp_req *req = p->wait_head;

        gs__tcp_send_unwait(tp, req);
        gs__tcp_stripe(tp, req);
    }
    tp->nevents++; /* a waiting progress call may have news */
}

static gs_status_t tcp_irecv(gs__tp_t *tp, int peer, uint64_t tag, void *buf, size_t len,
                             gs__tp_req_t **req_out)
{
    struct gs__tp_req *req = NULL;
    gs_status_t status;

    if ((tp == NULL) || (req_out == NULL) || ((buf == NULL) && (len > 0))) {
        return gs__error_set(GS_ERR_INVALID_ARG, "tcp: irecv needs an instance, buffer and req");
    }
    status = check_peer(tp, peer, true, "irecv");
    if (status != GS_OK) {
        return status;
    }
    if (!tp->connected) {
        return gs__error_set(GS_ERR_INVALID_USAGE, "tcp: irecv before connect on rank %d",
                             tp->rank);
    }
    status = req_alloc(tp, GS_TCP_REQ_RECV, 0, peer, tag, buf, len, &req);
    if (status != GS_OK) {
        return status;
    }
    *req_out = req;
    if (atomic_load_explicit(&tp->aborted, memory_order_relaxed)) {
        gs__tcp_req_fail_ref(tp, req, GS_ERR_ABORTED, tcp_abort_reason);
        return GS_OK;
    }
    if ((peer != GS_ANY_SOURCE) && (tp->peers[peer].link != GS_TCP_LINK_UP)) {
        gs__tcp_hs_want(tp, peer, true); /* a failure fails the receive as it is posted */
    }
    gs__tcp_recv_post(tp, req);
    return GS_OK;
}

static gs_status_t tcp_test(gs__tp_t *tp, gs__tp_req_t *req, int *done_out,
                            gs__tp_completion_t *comp_out)
{
    (void)tp;
    if ((req == NULL) || (done_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "tcp: test needs a request and done_out");
    }
    if (req->state != GS_TCP_REQ_DONE) {
        *done_out = 0;
        return GS_OK;
    }
    *done_out = 1;
    if (comp_out != NULL) {
        *comp_out = req->comp;
    }
    if (req->comp.status != GS_OK) {
        gs__error_copy_in((req->reason != NULL) ? req->reason : gs_strerror(req->comp.status));
    }
    return GS_OK;
}

static gs_status_t tcp_probe(gs__tp_t *tp, int peer, uint64_t tag, int *found_out,
                             gs__tp_completion_t *comp_out)
{
    gs_status_t status;

    if ((tp == NULL) || (found_out == NULL) || (comp_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "tcp: probe needs an instance and outputs");
    }
    status = check_peer(tp, peer, true, "probe");
    if (status != GS_OK) {
        return status;
    }
    if (!tp->connected) {
        return gs__error_set(GS_ERR_INVALID_USAGE, "tcp: probe before connect on rank %d",
                             tp->rank);
    }
    if (atomic_load_explicit(&tp->aborted, memory_order_relaxed)) {
        *found_out = 0;
        gs__error_copy_in(tcp_abort_reason);
        return GS_ERR_ABORTED;
    }
    return gs__tcp_recv_probe(tp, peer, tag, found_out, comp_out);
}

/* Fail everything once after abort. */
static void do_abort(gs__tp_t *tp)
{
    struct gs__tp_req *r;

    if (tp->abort_done) {
        return;
    }
    tp->abort_done = true;
    for (int p = 0; p < tp->size; p++) {
        if (p != tp->rank) {
            gs__tcp_peer_fail(tp, p, GS_ERR_ABORTED, "%s", tcp_abort_reason);
        }
    }
    while ((r = tp->posted_head) != NULL) {
        tp->posted_head = r->next;
        r->next = NULL;
        r->prev = NULL;
        gs__tcp_req_fail_ref(tp, r, GS_ERR_ABORTED, tcp_abort_reason);
    }
    tp->posted_tail = NULL;
}

/* One epoll pass. Returns GS_OK or GS_ERR_SYSTEM. */
static gs_status_t poll_once(gs__tp_t *tp, int timeout_ms)
{
    struct epoll_event evs[TCP_EPOLL_EVENTS];
    int n;

    if (tp->nkicked > 0) {
        timeout_ms = 0;
    }
    if ((timeout_ms != 0) && (tp->nshm > 0) && gs__tcp_shm_arm(tp)) {
        timeout_ms = 0; /* a ring has work: no sleep, no doorbell needed */
    }
    n = epoll_wait(tp->epfd, evs, TCP_EPOLL_EVENTS, timeout_ms);
    if (tp->nshm > 0) {
        gs__tcp_shm_disarm(tp);
    }
    if (n < 0) {
        if (errno == EINTR) {
            return GS_OK;
        }
        return gs__error_set(GS_ERR_SYSTEM, "tcp: epoll_wait on rank %d failed: %s", tp->rank,
                             strerror(errno));
    }
    for (int i = 0; i < n; i++) {
        gs__tcp_conn_t *c = (gs__tcp_conn_t *)evs[i].data.ptr;

        if (gs__tcp_hs_is(tp, c)) {
            gs__tcp_hs_poll(tp); /* a connection being set up has news */
            continue;
        }
        if (c == NULL) {
            uint64_t v;

            if (read(tp->evfd, &v, sizeof(v)) < 0) {
                /* EAGAIN: another pass already consumed the wakeup. */
            }
            tp->nevents++; /* abort or wake: make progress return */
            continue;
        }
        if ((c->fd >= 0) && (c->rstate == GS_TCP_RS_PARKED) &&
            ((evs[i].events & (EPOLLERR | EPOLLHUP)) != 0)) {
            /* Not reading while parked, so the error would be reported forever. */
            if (!gs__tcp_rail_fail(tp, c, "connection reset")) {
                gs__tcp_peer_fail(tp, c->peer, GS_ERR_PEER_FAILED, "connection reset by peer %d",
                                  c->peer);
            }
            continue;
        }
        /* An earlier event of this pass may have closed the socket. */
        if ((c->fd >= 0) && ((evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0)) {
            gs__tcp_conn_read(tp, c);
        }
        if ((c->fd >= 0) && ((evs[i].events & (EPOLLOUT | EPOLLERR)) != 0)) {
            gs__tcp_conn_flush(tp, c);
        }
    }
    if (tp->nkicked > 0) {
        for (int p = 0; p < tp->size; p++) {
            for (int i = 0; (p != tp->rank) && (i < tp->peers[p].nconns); i++) {
                gs__tcp_conn_t *c = &tp->peers[p].conns[i];

                if (c->kicked && (c->fd >= 0)) {
                    gs__tcp_conn_read(tp, c);
                }
            }
        }
    }
    if (tp->nshm > 0) {
        gs__tcp_shm_sweep(tp);
    }
    return GS_OK;
}

static gs_status_t tcp_progress(gs__tp_t *tp, uint64_t deadline_ns)
{
    uint64_t start;
    uint64_t spin_until;
    int timeout_ms = 0;

    if (tp == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "tcp: progress needs an instance");
    }
    start = tp->nevents;
    spin_until = (tp->spin_ns > 0) ? gs__now_ns() + tp->spin_ns : 0;
    if (!tp->rails_published && (tp->counters != NULL) && (tp->counters->peers != NULL)) {
        /* The statistics came after connect: the links made at init show too. */
        tp->rails_published = true;
        for (int q = 0; q < tp->size; q++) {
            if ((q != tp->rank) && (tp->peers[q].link == GS_TCP_LINK_UP)) {
                gs__tcp_rails_publish(tp, q);
            }
        }
    }
    for (unsigned pass = 1;; pass++) {
        gs_status_t status = GS_OK;
        uint64_t now;

        if (atomic_load_explicit(&tp->aborted, memory_order_acquire)) {
            do_abort(tp);
            return GS_ERR_ABORTED;
        }
        if (!tp->connected) {
            return GS_OK;
        }
        if (atomic_load_explicit(&tp->revoke_asked, memory_order_acquire) && (tp->revoked_by < 0)) {
            gs__tcp_revoke(tp, tp->rank, -1);
        }
        if ((spin_until != 0) && (timeout_ms == 0) && tp->spin_rings && (tp->nkicked == 0) &&
            ((pass % TCP_SPIN_EPOLL_EVERY) != 1)) {
            /* Spinning on rings only: no syscall. The abort flag is read
             * above on every pass; sockets (a peer's EOF) and the eventfd
             * (a wake) on the first pass, so a progress(0) call sees them
             * as before, and every TCP_SPIN_EPOLL_EVERY passes after it. */
            gs__tcp_shm_sweep(tp);
        } else {
            status = poll_once(tp, timeout_ms);
        }
        if (status != GS_OK) {
            return status;
        }
        if (tp->nretained > 0) {
            gs__tcp_acks_poll(tp); /* sends of multi-rail pairs complete when acknowledged */
        }
        now = gs__now_ns();
        if (now >= tp->hb_next_ns) {
            gs__tcp_heartbeat_tick(tp, now); /* may fail a silent peer (an event) */
        }
        gs__tcp_hs_tick(tp, now); /* connects that are due (lazy) */
        if (tp->nevents != start) {
            return atomic_load_explicit(&tp->aborted, memory_order_acquire)
                       ? GS_ERR_ABORTED
                       : gs__tcp_revoked_status(tp);
        }
        if (now >= deadline_ns) {
            return gs__tcp_revoked_status(tp);
        }
        if (now < spin_until) {
            /* Poll a little before sleeping: an answer that is already on
             * its way then costs no wake-up. Yield, so that on an
             * oversubscribed host the rank we wait for gets the core. */
            sched_yield();
            timeout_ms = 0;
            continue;
        }
        /* Sleep no further than the next heartbeat tick or connect retry. */
        {
            uint64_t wake = (deadline_ns < tp->hb_next_ns) ? deadline_ns : tp->hb_next_ns;
            const uint64_t hs_next = gs__tcp_hs_next_ns(tp);

            timeout_ms = gs__ms_until((hs_next < wake) ? hs_next : wake, now);
            if ((tp->nretained > 0) && (timeout_ms != 0)) {
                timeout_ms = 1; /* acknowledgements come without an event */
            }
        }
    }
}

static gs_status_t tcp_req_release(gs__tp_t *tp, gs__tp_req_t *req)
{
    if ((tp == NULL) || (req == NULL)) {
        return GS_OK;
    }
    if (req->state != GS_TCP_REQ_DONE) {
        if (req->kind == GS_TCP_REQ_RECV) {
            gs__tcp_recv_cancel(tp, req);
        } else {
            gs__tcp_send_cancel(tp, req);
        }
    }
    if (req->all_prev != NULL) {
        req->all_prev->all_next = req->all_next;
    } else {
        tp->all = req->all_next;
    }
    if (req->all_next != NULL) {
        req->all_next->all_prev = req->all_prev;
    }
    free(req->reason_buf);
    free(req);
    return GS_OK;
}

/* gs_comm_revoke, any thread: the progress loop does it (gs__tcp_revoke). */
static gs_status_t tcp_revoke(gs__tp_t *tp)
{
    uint64_t one = 1;

    if (tp == NULL) {
        return GS_OK;
    }
    atomic_store_explicit(&tp->revoke_asked, 1, memory_order_release);
    if (write(tp->evfd, &one, sizeof(one)) < 0) {
        /* EAGAIN: the counter is saturated, a wakeup is already pending. */
    }
    return GS_OK;
}

static gs_status_t tcp_abort(gs__tp_t *tp)
{
    uint64_t one = 1;

    if (tp == NULL) {
        return GS_OK;
    }
    atomic_store_explicit(&tp->aborted, 1, memory_order_release);
    /* Wake a progress call sleeping in epoll_wait; a full counter is fine. */
    if (write(tp->evfd, &one, sizeof(one)) < 0) {
        /* EAGAIN: the counter is saturated, a wakeup is already pending. */
    }
    return GS_OK;
}

static int tcp_shm_peers(gs__tp_t *tp)
{
    int n = 0;

    if (!tp->lazy) {
        return tp->nshm; /* every link is up: what they are */
    }
    /* Lazily, the links come later: what the plan of connect gives them
     * (read-only since; a pair that then falls back to TCP is not seen). */
    for (int q = 0; q < tp->size; q++) {
        n += ((q != tp->rank) && tp->shm_offer && (tp->peers[q].shm_ring > 0)) ? 1 : 0;
    }
    return n;
}

static int tcp_peer_failed(gs__tp_t *tp, int peer)
{
    if ((tp == NULL) || (peer < 0) || (peer >= tp->size) || (peer == tp->rank)) {
        return 0;
    }
    return tp->peers[peer].fail_status != GS_OK;
}

static gs_status_t tcp_wake(gs__tp_t *tp)
{
    uint64_t one = 1;

    if (tp == NULL) {
        return GS_OK;
    }
    if (write(tp->evfd, &one, sizeof(one)) < 0) {
        /* EAGAIN: the counter is saturated, a wakeup is already pending. */
    }
    return GS_OK;
}

/*
 * Send BYE on every healthy socket and give the frames a bounded time to
 * leave. A down instance first repeats DOWN(failed rank) on every socket,
 * before its BYE: a peer that has not heard of the failure yet then blames
 * that rank, not us for leaving mid-operation; a revoked one repeats
 * REVOKE instead (nobody failed). Never answered, so this cannot storm.
 */
static void say_goodbye(gs__tp_t *tp)
{
    uint64_t deadline = gs__deadline_after_ms(GS_TCP_BYE_TIMEOUT_MS);

    tp->leaving = true; /* no DOWN frame may follow a BYE */
    for (int p = 0; (p < tp->size) && (tp->down_status == GS_ERR_REVOKED); p++) {
        if ((p != tp->rank) && (p != tp->revoked_by)) {
            gs__tcp_queue_revoke(tp, p);
        }
    }
    for (int p = 0; (p < tp->size) && (tp->down_status == GS_ERR_PEER_FAILED); p++) {
        for (int i = 0; (p != tp->rank) && (p != tp->down_rank) && (i < tp->peers[p].nconns); i++) {
            gs__tcp_conn_t *c = &tp->peers[p].conns[i];

            if ((c->fd >= 0) && (tp->peers[p].fail_status == GS_OK) &&
                (tp->peers[p].link == GS_TCP_LINK_UP) && tp->peers[p].rails[c->rail].up) {
                gs__tcp_queue_down(tp, c, tp->down_rank);
            }
        }
    }
    for (int p = 0; p < tp->size; p++) {
        for (int i = 0; (p != tp->rank) && (i < tp->peers[p].nconns); i++) {
            gs__tcp_conn_t *c = &tp->peers[p].conns[i];

            if ((c->fd < 0) || (tp->peers[p].fail_status != GS_OK) ||
                (tp->peers[p].link != GS_TCP_LINK_UP) || !tp->peers[p].rails[c->rail].up) {
                continue; /* a link still being set up (or a lost rail) is just closed */
            }
            /* Out of memory: the peer will see a plain close. */
            (void)gs__tcp_queue_control(tp, c, GS_TCP_FRAME_BYE, 0, 0);
        }
    }
    for (;;) {
        bool pending = false;
        uint64_t now = gs__now_ns();

        for (int p = 0; p < tp->size; p++) {
            for (int i = 0; (p != tp->rank) && (i < tp->peers[p].nconns); i++) {
                gs__tcp_conn_t *c = &tp->peers[p].conns[i];

                pending = pending || ((c->fd >= 0) && (c->sq_head != NULL));
            }
        }
        if (!pending || (now >= deadline) ||
            (poll_once(tp, gs__ms_until(deadline, now)) != GS_OK)) {
            break;
        }
    }
    /* Half-close, then drain what the peer already sent so close() sends FIN, not RST. */
    for (int p = 0; p < tp->size; p++) {
        for (int i = 0; (p != tp->rank) && (i < tp->peers[p].nconns); i++) {
            gs__tcp_conn_t *c = &tp->peers[p].conns[i];

            if (c->fd >= 0) {
                (void)shutdown(c->fd, SHUT_WR);
                while (recv(c->fd, tp->scratch, GS_TCP_SCRATCH_LEN, MSG_DONTWAIT) > 0) {
                }
            }
        }
    }
}

static gs_status_t tcp_finalize(gs__tp_t *tp)
{
    if (tp == NULL) {
        return GS_OK;
    }
    if (tp->connected && !atomic_load(&tp->aborted)) {
        say_goodbye(tp);
    }
    free_instance(tp);
    return GS_OK;
}

const gs__transport_ops_t gs__tcp_ops = {
    .name = "tcp",
    .abi_size = sizeof(gs__transport_ops_t),
    .caps = GS_TP_CAP_HOST_MEM | GS_TP_CAP_ANY_SOURCE | GS_TP_CAP_ORDERED | GS_TP_CAP_MULTI_STREAM |
            GS_TP_CAP_TLS | GS_TP_CAP_HEARTBEAT,
    .init = tcp_init,
    .get_address = tcp_get_address,
    .connect = tcp_connect,
    .isend = tcp_isend,
    .irecv = tcp_irecv,
    .test = tcp_test,
    .progress = tcp_progress,
    .req_release = tcp_req_release,
    .abort = tcp_abort,
    .revoke = tcp_revoke,
    .finalize = tcp_finalize,
    .wake = tcp_wake,
    .probe = tcp_probe,
    .shm_peers = tcp_shm_peers,
    .peer_failed = tcp_peer_failed,
};
