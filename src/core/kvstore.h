/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A client of PyTorch's TCPStore (torch 2.x's c10d key-value store: the one
 * torchrun's agent hosts at MASTER_ADDR:MASTER_PORT), enough for a
 * bootstrap: set, get (waiting for the key), add and check. The wire is
 * torch's: one query byte, then strings and values as a 64-bit length (or
 * value) in the host's byte order and their bytes; a connection opens with
 * VALIDATE and torch's magic number. Keys are sent as given, so a key
 * "/gradsync/x" is what a torch client reads as "gradsync/x" (TCPStore
 * prefixes its keys with "/").
 *
 * Every call is blocking and bounded by its deadline (monotonic ns); the
 * socket layer's abort watch (core/socket.h) ends it early. A failure
 * leaves the connection unusable: close it. Every error names the store
 * ("the store at host:port").
 */
#ifndef GS_CORE_KVSTORE_H
#define GS_CORE_KVSTORE_H

#include <stddef.h>
#include <stdint.h>

#include "core/socket.h"
#include "gradsync/status.h"

/* The largest value gs__kv_get accepts: a bootstrap's values are small, and
 * a bad length from the wire must not become an allocation. */
#define GS_KV_VALUE_MAX (16u << 20)
#define GS_KV_KEY_MAX 512

/* torch 2.x TCPStore's wire (c10d's QueryType and answers): the one list of the
 * client here and the server (core/kvserver.c). */
typedef enum gs__kv_query {
    GS_KV_Q_VALIDATE = 0,
    GS_KV_Q_SET = 1,
    GS_KV_Q_COMPARE_SET = 2,
    GS_KV_Q_GET = 3,
    GS_KV_Q_ADD = 4,
    GS_KV_Q_CHECK = 5,
    GS_KV_Q_WAIT = 6,
    GS_KV_Q_GETNUMKEYS = 7,
    GS_KV_Q_DELETE_KEY = 8,
    GS_KV_Q_CANCEL_WAIT = 12,
    GS_KV_Q_PING = 13,
} gs__kv_query_t;
#define GS_KV_MAGIC 0x3C85F7CEu /* VALIDATE's */
#define GS_KV_READY 0           /* CHECK: every key is set */
#define GS_KV_NOT_READY 1
#define GS_KV_STOP_WAITING 0 /* WAIT: the keys are set */
#define GS_KV_WAIT_CANCELED 1

typedef struct gs__kv {
    int fd;                            /* -1: closed */
    char where[GS_SOCK_ADDR_MAX + 16]; /* "host:port", for messages */
    gs__sockaddr_t local;              /* this end of the connection */
} gs__kv_t;

/* Connect to the store at @p host:@p port (@p family "any"/"ipv4"/"ipv6"),
 * retrying a refused connection until @p deadline, and validate. Returns
 * GS_OK, GS_ERR_TIMEOUT (nothing listens there), GS_ERR_INVALID_ARG (the
 * address does not resolve), GS_ERR_SYSTEM. */
gs_status_t gs__kv_connect(gs__kv_t *kv, const char *host, int port, const char *family,
                           uint64_t deadline);
void gs__kv_close(gs__kv_t *kv);

gs_status_t gs__kv_set(gs__kv_t *kv, const char *key, const void *val, size_t len,
                       uint64_t deadline);
/* Wait until @p key exists, then read its value into a malloc'd buffer
 * (*val_out, *len_out; free it). Returns GS_OK, GS_ERR_TIMEOUT (the key did
 * not appear by @p deadline), GS_ERR_PROTOCOL (a value over @p max bytes, or
 * an answer torch's store would not give), GS_ERR_PEER_FAILED (the store
 * closed the connection), GS_ERR_NO_MEMORY. */
gs_status_t gs__kv_get(gs__kv_t *kv, const char *key, size_t max, void **val_out, size_t *len_out,
                       uint64_t deadline);
/* Add @p delta to the integer at @p key (created at 0); *out gets the sum. */
gs_status_t gs__kv_add(gs__kv_t *kv, const char *key, int64_t delta, int64_t *out,
                       uint64_t deadline);
/* *exists_out = 1 when @p key is set, else 0, without waiting for it. */
gs_status_t gs__kv_check(gs__kv_t *kv, const char *key, int *exists_out, uint64_t deadline);
/* torch's compareSet: set @p key to @p desired when it holds @p expected
 * (a missing key counts as holding the empty value), atomically in the
 * store. *val_out (malloc'd, at most @p max bytes; free it) and *len_out get
 * what the key holds afterwards (for a missing key and a non-empty
 * @p expected: @p expected, which torch answers and does not set). Returns
 * gs__kv_get's statuses. */
gs_status_t gs__kv_compare_set(gs__kv_t *kv, const char *key, const void *expected,
                               size_t expected_len, const void *desired, size_t desired_len,
                               size_t max, void **val_out, size_t *len_out, uint64_t deadline);

/* The size of GS_STORE's parts (host, prefix), terminating NUL included. */
#define GS_KV_HOST_MAX 256
#define GS_KV_PREFIX_MAX 200

/*
 * Parse a store's address, GS_STORE's form (torchft's): "host:port/prefix",
 * "[v6addr]:port/prefix". The prefix is 1..GS_KV_PREFIX_MAX - 1 printable
 * characters without spaces (slashes allowed, not a leading one). Pure.
 * Writes @p host_out (GS_KV_HOST_MAX), *port_out and @p prefix_out
 * (GS_KV_PREFIX_MAX) on success only. Returns GS_OK, or GS_ERR_INVALID_ARG
 * with why (no port, a bad port, no prefix, ...) in @p why (@p whylen).
 */
gs_status_t gs__kv_parse_spec(const char *spec, char *host_out, int *port_out, char *prefix_out,
                              char *why, size_t whylen);

#endif /* GS_CORE_KVSTORE_H */
