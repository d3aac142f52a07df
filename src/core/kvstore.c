/* SPDX-License-Identifier: Apache-2.0 */
/*
 * PyTorch TCPStore client (kvstore.h). torch 2.x's query codes and magic
 * (c10d's TCPStoreBackend.hpp): the store answers GET with a length and the
 * bytes, ADD with the new value, CHECK with READY (0) or NOT_READY (1) and
 * WAIT with STOP_WAITING (0) once every key exists. A WAIT that outlives the
 * deadline is not cancelled: the connection is closed instead, which the
 * store handles as any client leaving.
 */
#include "core/kvstore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"


/* A query under construction: small ones are built whole and sent at once. */
typedef struct kv_buf {
    uint8_t b[1 + 8 + 8 + GS_KV_KEY_MAX + 8];
    size_t n;
} kv_buf_t;

static void kv_put_u64(kv_buf_t *q, uint64_t v)
{
    memcpy(q->b + q->n, &v, sizeof(v)); /* the host's byte order, as torch sends it */
    q->n += sizeof(v);
}

static gs_status_t kv_put_key(const gs__kv_t *kv, kv_buf_t *q, const char *key)
{
    size_t len = strlen(key);

    if ((len == 0) || (len > GS_KV_KEY_MAX)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "the store at %s: key of %zu bytes (1..%d)",
                             kv->where, len, GS_KV_KEY_MAX);
    }
    kv_put_u64(q, (uint64_t)len);
    memcpy(q->b + q->n, key, len);
    q->n += len;
    return GS_OK;
}

/* Say which store failed, keeping the socket layer's reason. */
static gs_status_t kv_fail(gs__kv_t *kv, gs_status_t st, const char *what)
{
    if (st == GS_ERR_ABORTED) {
        return st;
    }
    if (st == GS_ERR_PEER_FAILED) {
        return gs__error_wrap(st,
                              "the store at %s closed the connection during %s (%s): is it a "
                              "TCPStore (torch 2.x's, torchrun's agent, or gradsync's gs_store), "
                              "and still running?",
                              kv->where, what, gs__error_get());
    }
    return gs__error_wrap(st, "the store at %s: %s: %s", kv->where, what, gs__error_get());
}

static gs_status_t kv_send(gs__kv_t *kv, const kv_buf_t *q, const char *what, uint64_t deadline)
{
    gs_status_t st;

    if (kv->fd < 0) {
        return gs__error_set(GS_ERR_INVALID_ARG, "the store at %s: the connection is closed",
                             kv->where);
    }
    st = gs__sock_write_full(kv->fd, q->b, q->n, deadline);
    return (st == GS_OK) ? GS_OK : kv_fail(kv, st, what);
}

static gs_status_t kv_recv(gs__kv_t *kv, void *buf, size_t len, const char *what, uint64_t deadline)
{
    gs_status_t st = gs__sock_read_full(kv->fd, buf, len, deadline);

    return (st == GS_OK) ? GS_OK : kv_fail(kv, st, what);
}

gs_status_t gs__kv_connect(gs__kv_t *kv, const char *host, int port, const char *family,
                           uint64_t deadline)
{
    gs__sockaddr_t addr;
    kv_buf_t q = {.n = 0};
    uint32_t magic = GS_KV_MAGIC;
    socklen_t llen = sizeof(kv->local.ss);
    gs_status_t st;

    kv->fd = -1;
    (void)snprintf(kv->where, sizeof(kv->where), "%s:%d", host, port);
    st = gs__sock_resolve(host, port, family, &addr);
    if (st != GS_OK) {
        return kv_fail(kv, st, "cannot resolve its address");
    }
    st = gs__sock_connect(&addr, deadline, &kv->fd);
    if (st != GS_OK) {
        kv->fd = -1;
        return kv_fail(kv, st, "cannot connect");
    }
    if (getsockname(kv->fd, (struct sockaddr *)&kv->local.ss, &llen) != 0) {
        llen = 0;
    }
    kv->local.len = llen;
    q.b[q.n++] = GS_KV_Q_VALIDATE;
    memcpy(q.b + q.n, &magic, sizeof(magic));
    q.n += sizeof(magic);
    st = kv_send(kv, &q, "validate", deadline);
    if (st != GS_OK) {
        gs__kv_close(kv);
    }
    return st;
}

void gs__kv_close(gs__kv_t *kv)
{
    if (kv->fd >= 0) {
        (void)close(kv->fd);
    }
    kv->fd = -1;
}

gs_status_t gs__kv_set(gs__kv_t *kv, const char *key, const void *val, size_t len,
                       uint64_t deadline)
{
    kv_buf_t q = {.n = 0};
    gs_status_t st;

    if (len > GS_KV_VALUE_MAX) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "the store at %s: a value of %zu bytes (at most %u)", kv->where, len,
                             GS_KV_VALUE_MAX);
    }
    q.b[q.n++] = GS_KV_Q_SET;
    st = kv_put_key(kv, &q, key);
    if (st != GS_OK) {
        return st;
    }
    kv_put_u64(&q, (uint64_t)len);
    st = kv_send(kv, &q, "set", deadline);
    if ((st == GS_OK) && (len > 0)) {
        st = gs__sock_write_full(kv->fd, val, len, deadline);
        if (st != GS_OK) {
            st = kv_fail(kv, st, "set");
        }
    }
    return st;
}

/* Read a value answer (u64 length, bytes) of at most @p max bytes into a malloc'd buffer. */
static gs_status_t kv_recv_value(gs__kv_t *kv, const char *key, const char *what, size_t max,
                                 void **val_out, size_t *len_out, uint64_t deadline)
{
    uint64_t len = 0;
    void *val;
    gs_status_t st = kv_recv(kv, &len, sizeof(len), what, deadline);

    if (st != GS_OK) {
        return st;
    }
    if ((len > max) || (len > GS_KV_VALUE_MAX)) {
        return gs__error_set(GS_ERR_PROTOCOL,
                             "the store at %s: key %s holds %llu bytes, more than the %zu expected",
                             kv->where, key, (unsigned long long)len, max);
    }
    val = malloc(len > 0 ? (size_t)len : 1);
    if (val == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "the store at %s: out of memory for %llu bytes",
                             kv->where, (unsigned long long)len);
    }
    if (len > 0) {
        st = kv_recv(kv, val, (size_t)len, what, deadline);
        if (st != GS_OK) {
            free(val);
            return st;
        }
    }
    *val_out = val;
    *len_out = (size_t)len;
    return GS_OK;
}

/* Ask for one key, then read the one answer byte. */
static gs_status_t kv_one_key_byte(gs__kv_t *kv, int query, const char *key, const char *what,
                                   uint8_t *answer, uint64_t deadline)
{
    kv_buf_t q = {.n = 0};
    gs_status_t st;

    q.b[q.n++] = (uint8_t)query;
    kv_put_u64(&q, 1); /* one key */
    st = kv_put_key(kv, &q, key);
    if (st == GS_OK) {
        st = kv_send(kv, &q, what, deadline);
    }
    if (st == GS_OK) {
        st = kv_recv(kv, answer, 1, what, deadline);
    }
    return st;
}

gs_status_t gs__kv_check(gs__kv_t *kv, const char *key, int *exists_out, uint64_t deadline)
{
    uint8_t a = 0xff;
    gs_status_t st = kv_one_key_byte(kv, GS_KV_Q_CHECK, key, "check", &a, deadline);

    if (st != GS_OK) {
        return st;
    }
    if (a > 1) {
        return gs__error_set(GS_ERR_PROTOCOL,
                             "the store at %s answered CHECK with %u: is it torch 2.x's TCPStore?",
                             kv->where, a);
    }
    *exists_out = (a == GS_KV_READY);
    return GS_OK;
}

gs_status_t gs__kv_get(gs__kv_t *kv, const char *key, size_t max, void **val_out, size_t *len_out,
                       uint64_t deadline)
{
    kv_buf_t q = {.n = 0};
    uint8_t a = 0xff;
    gs_status_t st;

    *val_out = NULL;
    *len_out = 0;
    st = kv_one_key_byte(kv, GS_KV_Q_WAIT, key, "wait", &a, deadline);
    if (st == GS_ERR_TIMEOUT) {
        return gs__error_set(GS_ERR_TIMEOUT, "the store at %s: key %s was not set in time",
                             kv->where, key);
    }
    if (st != GS_OK) {
        return st;
    }
    if (a != GS_KV_STOP_WAITING) {
        return gs__error_set(GS_ERR_PROTOCOL,
                             "the store at %s answered WAIT with %u: is it torch 2.x's TCPStore?",
                             kv->where, a);
    }
    q.b[q.n++] = GS_KV_Q_GET;
    st = kv_put_key(kv, &q, key);
    if (st == GS_OK) {
        st = kv_send(kv, &q, "get", deadline);
    }
    if (st != GS_OK) {
        return st;
    }
    return kv_recv_value(kv, key, "get", max, val_out, len_out, deadline);
}

gs_status_t gs__kv_compare_set(gs__kv_t *kv, const char *key, const void *expected,
                               size_t expected_len, const void *desired, size_t desired_len,
                               size_t max, void **val_out, size_t *len_out, uint64_t deadline)
{
    kv_buf_t q = {.n = 0};
    const void *vals[2] = {expected, desired};
    const size_t lens[2] = {expected_len, desired_len};
    gs_status_t st;

    *val_out = NULL;
    *len_out = 0;
    if ((expected_len > GS_KV_VALUE_MAX) || (desired_len > GS_KV_VALUE_MAX)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "the store at %s: a value of more than %u bytes for compare-set",
                             kv->where, GS_KV_VALUE_MAX);
    }
    q.b[q.n++] = GS_KV_Q_COMPARE_SET;
    st = kv_put_key(kv, &q, key);
    for (int i = 0; (st == GS_OK) && (i < 2); i++) {
        kv_put_u64(&q, (uint64_t)lens[i]);
        st = kv_send(kv, &q, "compare-set", deadline);
        q.n = 0;
        if ((st == GS_OK) && (lens[i] > 0)) {
            st = gs__sock_write_full(kv->fd, vals[i], lens[i], deadline);
            st = (st == GS_OK) ? GS_OK : kv_fail(kv, st, "compare-set");
        }
    }
    if (st != GS_OK) {
        return st;
    }
    return kv_recv_value(kv, key, "compare-set", max, val_out, len_out, deadline);
}

gs_status_t gs__kv_parse_spec(const char *spec, char *host_out, int *port_out, char *prefix_out,
                              char *why, size_t whylen)
{
    const char *host = spec, *host_end, *p, *slash;
    long port = 0;
    size_t hlen, plen;

    if ((spec == NULL) || (spec[0] == '\0')) {
        (void)snprintf(why, whylen, "is empty");
        return GS_ERR_INVALID_ARG;
    }
    if (spec[0] == '[') {
        host = spec + 1;
        host_end = strchr(host, ']');
        if ((host_end == NULL) || (host_end[1] != ':')) {
            (void)snprintf(why, whylen, "has a '[' without ']:' after the IPv6 address");
            return GS_ERR_INVALID_ARG;
        }
        p = host_end + 2;
    } else {
        host_end = strchr(spec, ':');
        if (host_end == NULL) {
            (void)snprintf(why, whylen, "has no ':port' after the host");
            return GS_ERR_INVALID_ARG;
        }
        p = host_end + 1;
    }
    hlen = (size_t)(host_end - host);
    if ((hlen == 0) || (hlen >= GS_KV_HOST_MAX)) {
        (void)snprintf(why, whylen, "has a host of %zu characters (1..%d)", hlen,
                       GS_KV_HOST_MAX - 1);
        return GS_ERR_INVALID_ARG;
    }
    for (const char *c = host; c < host_end; c++) {
        if ((*c <= ' ') || (*c > '~') || (*c == '/') || ((spec[0] != '[') && (*c == ':'))) {
            (void)snprintf(why, whylen, "has a host with a character that no host name has");
            return GS_ERR_INVALID_ARG;
        }
    }
    slash = strchr(p, '/');
    if ((slash == NULL) || (slash == p)) {
        (void)snprintf(why, whylen, "%s",
                       (slash == NULL) ? "has no '/prefix' after the port"
                                       : "has no port between ':' and '/'");
        return GS_ERR_INVALID_ARG;
    }
    for (const char *c = p; c < slash; c++) {
        if ((*c < '0') || (*c > '9') || (port > 65535)) {
            port = -1;
            break;
        }
        port = port * 10 + (*c - '0');
    }
    if ((port < 1) || (port > 65535)) {
        (void)snprintf(why, whylen, "has a port '%.*s' that is not 1..65535", (int)(slash - p), p);
        return GS_ERR_INVALID_ARG;
    }
    plen = strlen(slash + 1);
    if ((plen == 0) || (plen >= GS_KV_PREFIX_MAX) || (slash[1] == '/')) {
        (void)snprintf(why, whylen, "has a prefix of %zu characters (1..%d, not starting with '/')",
                       plen, GS_KV_PREFIX_MAX - 1);
        return GS_ERR_INVALID_ARG;
    }
    for (const char *c = slash + 1; *c != '\0'; c++) {
        if ((*c <= ' ') || (*c > '~')) {
            (void)snprintf(why, whylen, "has a prefix with a space or a non-printable character");
            return GS_ERR_INVALID_ARG;
        }
    }
    memcpy(host_out, host, hlen);
    host_out[hlen] = '\0';
    *port_out = (int)port;
    memcpy(prefix_out, slash + 1, plen + 1);
    return GS_OK;
}

gs_status_t gs__kv_add(gs__kv_t *kv, const char *key, int64_t delta, int64_t *out,
                       uint64_t deadline)
{
    kv_buf_t q = {.n = 0};
    int64_t v = 0;
    gs_status_t st;

    q.b[q.n++] = GS_KV_Q_ADD;
    st = kv_put_key(kv, &q, key);
    if (st != GS_OK) {
        return st;
    }
    memcpy(q.b + q.n, &delta, sizeof(delta));
    q.n += sizeof(delta);
    st = kv_send(kv, &q, "add", deadline);
    if (st == GS_OK) {
        st = kv_recv(kv, &v, sizeof(v), "add", deadline);
    }
    if (st == GS_OK) {
        *out = v;
    }
    return st;
}
