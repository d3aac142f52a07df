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

#endif /* GS_CORE_KVSTORE_H */
