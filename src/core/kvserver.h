/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A key-value store server of gradsync's own, speaking PyTorch's TCPStore
 * wire (torch 2.x's c10d TCPStoreBackend.hpp), so that one client
 * (core/kvstore.h, or torch's own TCPStore client) talks to torch's store
 * or this one. It serves the queries a bootstrap and torch's client need:
 * VALIDATE, PING, SET, COMPARE_SET, GET, ADD, CHECK, WAIT (a waiting client
 * is answered when its keys are set), CANCEL_WAIT, GETNUMKEYS and
 * DELETE_KEY. The others (APPEND, MULTI_*, queues, LIST_KEYS, BARRIER) are
 * refused: the client is dropped with a WARN naming the query.
 *
 * One thread, poll()-driven, bounded: at most @c max_conns connections
 * (more are accepted and closed at once), keys of 1..GS_KV_KEY_MAX bytes,
 * values of at most GS_KV_VALUE_MAX bytes, at most @c max_bytes held in
 * keys and values together. A client that sends garbage, a bad magic, an
 * over-long key or value, or a query it may not send is dropped with a WARN
 * naming it; the others are not disturbed. It is not authenticated: bind
 * it to an address only the job can reach (as torch's store).
 * Not a fuzz target of its own: its parser is fed garbage by
 * tests/unit/test_kvserver.c.
 */
#ifndef GS_CORE_KVSERVER_H
#define GS_CORE_KVSERVER_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/status.h"

/* A running server: a handle. */
typedef struct gs__kvs gs__kvs_t;

typedef struct gs__kvs_opts {
    int max_conns;    /* open connections at once; <= 0: GS_KVS_MAX_CONNS_DEFAULT */
    size_t max_bytes; /* keys and values held; 0: GS_KVS_MAX_BYTES_DEFAULT */
} gs__kvs_opts_t;

#define GS_KVS_MAX_CONNS_DEFAULT 4096
#define GS_KVS_MAX_BYTES_DEFAULT ((size_t)1 << 30)

/*
 * Listen on @p host:@p port (@p port 0: a free one; @p host NULL:
 * 127.0.0.1; @p family "any"/"ipv4"/"ipv6") and serve from a thread of its
 * own until gs__kvs_stop. @p opts may be NULL (defaults). Local, blocking
 * only for the bind. Writes *kvs_out on success only.
 * Returns GS_OK, GS_ERR_INVALID_ARG (bad port, the host does not resolve),
 * GS_ERR_SYSTEM (bind: the port is taken; the message says which),
 * GS_ERR_NO_MEMORY.
 */
gs_status_t gs__kvs_start(const char *host, int port, const char *family,
                          const gs__kvs_opts_t *opts, gs__kvs_t **kvs_out);

/* The port it listens on (the one chosen, for port 0). Thread-safe. */
int gs__kvs_port(const gs__kvs_t *kvs);

/* "host:port" it listens on, as a client would name it. Thread-safe. */
const char *gs__kvs_where(const gs__kvs_t *kvs);

/* Stop: wake the thread (a pipe), join it, close every connection (a
 * waiting client sees the connection close) and free everything. NULL is a
 * no-op. Not thread-safe with itself; any thread but the server's. */
void gs__kvs_stop(gs__kvs_t *kvs);

/* Counters, for tests and logs: connections dropped for a protocol error,
 * and keys held now. Thread-safe (relaxed reads). */
uint64_t gs__kvs_dropped(const gs__kvs_t *kvs);
uint64_t gs__kvs_nkeys(const gs__kvs_t *kvs);

#endif /* GS_CORE_KVSERVER_H */
