/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TCP transport's ops table, for the registry in transport.c. The
 * contracts of every slot are in transport.h; the design (full mesh of
 * nsocks sockets per pair, striping, matching, failure) is described in
 * tcp_conn.h and docs/wire.md.
 */
#ifndef GS_TRANSPORT_TCP_TCP_TRANSPORT_H
#define GS_TRANSPORT_TCP_TCP_TRANSPORT_H

#include "core/config.h"
#include "transport/tcp/tcp_pipe_tls.h"
#include "transport/transport.h"

extern const gs__transport_ops_t gs__tcp_ops;

/* The TCP transport's own settings. Its init reads them from the
 * configuration (gs__tcp_settings_read); in-process tests give their own
 * (gs__tcp_init_with). Strings are borrowed for the init only. */
typedef struct gs__tcp_settings {
    int nsocks;         /* sockets per peer (GS_TCP_NSOCKS) */
    int spin_us;        /* poll this long before sleeping (GS_TCP_SPIN_US); 0: never, -1: auto */
    const char *ifname; /* interface to listen on (GS_SOCKET_IFNAME), "" for auto */
    const char *rail_balance; /* GS_TCP_RAIL_BALANCE: "rate" (default) or "equal" */
    const char *family;       /* "any", "ipv4", "ipv6" (GS_SOCKET_FAMILY) */
    const char
        *master_addr;       /* pick the interface that routes there (GS_MASTER_ADDR); may be NULL */
    uint64_t host_id;       /* gs__host_id(GS_HOST_ID); 0: unknown, never use shared memory */
    int shm;                /* 1: shared memory for peers with our host id (GS_SHM) */
    int shm_bytes;          /* ring bytes per direction and pair (GS_SHM_BYTES) */
    int shm_test_free;      /* >= 0: pretend /dev/shm has this much free (GS_SHM_TEST_FREE_BYTES) */
    const char *shm_max;    /* GS_SHM_MAX_BYTES: "auto" or a size (core/shm_budget.h) */
    int shm_slot_bytes;     /* GS_SHM_SLOT_BYTES: the host segment's slot, reserved first */
    int heartbeat_ms;       /* GS_HEARTBEAT_MS; 0 (or less): no heartbeat */
    int timeout_ms;         /* GS_TIMEOUT_MS (silence is judged only below it) */
    gs__tcp_tls_conf_t tls; /* GS_TLS*; tls.on 0: plain TCP */
    int lazy; /* GS_CONNECT=lazy: 1, connections on first use; 0: every peer at init */
} gs__tcp_settings_t;

/* Fill *out from @p cfg (strings point into cfg). */
void gs__tcp_settings_read(const gs__cfg_t *cfg, gs__tcp_settings_t *out);

/* The init slot with explicit settings (the slot itself reads them from
 * params->cfg). Returns as the init slot. */
gs_status_t gs__tcp_init_with(const gs__tp_params_t *params, const gs__tcp_settings_t *set,
                              gs__tp_t **tp_out);

#endif /* GS_TRANSPORT_TCP_TCP_TRANSPORT_H */
