/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The store server of kvserver.h. One thread polls a wake pipe, the
 * listening socket and every connection. Each connection buffers its input
 * up to one whole query (a query's lengths are checked as soon as they are
 * read, so the buffer never holds more than the largest legal query) and
 * its answers until the socket takes them; while more than
 * KVS_OUT_HIGH bytes of answers wait, it is not read. Keys live in an
 * intrusive hash table (core/htab.h, seeded: a client cannot aim keys at
 * one chain). A WAIT whose keys are not all set parks its connection, which
 * is answered by the SET, ADD or COMPARE_SET that completes them; while it
 * waits the only query it may send is CANCEL_WAIT (torch's client sends
 * nothing else), anything else drops it.
 *
 * Wire (torch 2.x, host byte order): one query byte; a string or value is a
 * u64 length and its bytes; ADD's delta and answer are i64; CHECK and WAIT
 * take a u64 key count then the keys and answer one byte.
 */
#include "core/kvserver.h"

#include "core/clock.h"
#include "core/error.h"
#include "core/htab.h"
#include "core/kvstore.h"
#include "core/log.h"
#include "core/socket.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define KVS_QUERY_KEYS_MAX 64 /* keys of one CHECK or WAIT */
/* The largest legal query: COMPARE_SET's key and two values. */
#define KVS_IN_MAX (1 + 3 * 8 + GS_KV_KEY_MAX + 2 * (size_t)GS_KV_VALUE_MAX)
#define KVS_READ_CHUNK 65536
#define KVS_OUT_HIGH (1u << 20) /* stop reading a client with this much unread */

typedef struct kvs_entry {
    gs__hnode_t node;
    uint8_t *val; /* malloc'd (at least 1 byte) */
    size_t vlen;
    size_t klen;
    char key[]; /* klen bytes, not terminated */
} kvs_entry_t;

typedef struct kvs_conn {
    int fd;
    int validated;
    int waiting; /* a WAIT is parked: its keys are in wait_keys */
    int kick;    /* serve its buffered input on the next turn */
    char peer[GS_SOCK_ADDR_MAX];
    uint8_t *in;
    size_t in_off, in_len, in_cap; /* unparsed bytes: in[in_off, in_len) */
    uint8_t *out;
    size_t out_off, out_len, out_cap; /* unsent bytes: out[out_off, out_len) */
    int nwait;
    char *wait_keys[KVS_QUERY_KEYS_MAX];
    size_t wait_klen[KVS_QUERY_KEYS_MAX];
} kvs_conn_t;

struct gs__kvs {
    int listen_fd;
    int wake[2]; /* pipe: stop() writes, the thread reads */
    int port;
    char where[GS_SOCK_ADDR_MAX + 16];
    int max_conns;
    size_t max_bytes;
    size_t bytes; /* keys and values held */
    gs__htab_t keys;
    kvs_conn_t **conns; /* max_conns slots, NULL: free */
    int nconns;
    struct pollfd *pfds; /* 2 + max_conns */
    int *pfd_conn;       /* pfds[i] -> conns index */
    pthread_t thread;
    atomic_uint_fast64_t dropped;
    atomic_uint_fast64_t nkeys;
};

/* A span of a query under parse. */
typedef struct kvs_span {
    const uint8_t *p;
    size_t n;
} kvs_span_t;

typedef struct kvs_query {
    int type;
    kvs_span_t key;
    kvs_span_t val;  /* SET; COMPARE_SET's expected value */
    kvs_span_t val2; /* COMPARE_SET's new value */
    int64_t delta;   /* ADD */
    uint32_t u32;    /* VALIDATE's magic, PING's nonce */
    int nkeys;       /* CHECK, WAIT */
    kvs_span_t keys[KVS_QUERY_KEYS_MAX];
} kvs_query_t;

/* Parse results. */
#define KVS_NEED_MORE 0
#define KVS_BAD -1

typedef struct kvs_rd {
    const uint8_t *b;
    size_t n, off;
    const char *why; /* set on KVS_BAD */
} kvs_rd_t;

static int rd_u64(kvs_rd_t *r, uint64_t *v)
{
    if (r->n - r->off < sizeof(*v)) {
        return KVS_NEED_MORE;
    }
    memcpy(v, r->b + r->off, sizeof(*v));
    r->off += sizeof(*v);
    return 1;
}

static int rd_u32(kvs_rd_t *r, uint32_t *v)
{
    if (r->n - r->off < sizeof(*v)) {
        return KVS_NEED_MORE;
    }
    memcpy(v, r->b + r->off, sizeof(*v));
    r->off += sizeof(*v);
    return 1;
}

/* A length-prefixed string of @p min..@p max bytes. */
static int rd_str(kvs_rd_t *r, size_t min, size_t max, const char *what, kvs_span_t *s)
{
    uint64_t len = 0;
    int rc = rd_u64(r, &len);

    if (rc != 1) {
        return rc;
    }
    if ((len < min) || (len > max)) {
        r->why = what;
        return KVS_BAD;
    }
    if (r->n - r->off < len) {
        return KVS_NEED_MORE;
    }
    s->p = r->b + r->off;
    s->n = (size_t)len;
    r->off += (size_t)len;
    return 1;
}

#define RD(_call)                                                                                  \
    do {                                                                                           \
        const int rd_rc_ = (_call);                                                                \
        if (rd_rc_ != 1) {                                                                         \
            return rd_rc_;                                                                         \
        }                                                                                          \
    } while (0)

static int rd_key(kvs_rd_t *r, kvs_span_t *s)
{
    return rd_str(r, 1, GS_KV_KEY_MAX, "a key of 0 or more than 512 bytes", s);
}

static int rd_val(kvs_rd_t *r, kvs_span_t *s)
{
    return rd_str(r, 0, GS_KV_VALUE_MAX, "a value of more than 16 MiB", s);
}

static int rd_keys(kvs_rd_t *r, kvs_query_t *q)
{
    uint64_t n = 0;

    RD(rd_u64(r, &n));
    if ((n == 0) || (n > KVS_QUERY_KEYS_MAX)) {
        r->why = "a key count of 0 or more than 64";
        return KVS_BAD;
    }
    for (uint64_t i = 0; i < n; i++) {
        RD(rd_key(r, &q->keys[i]));
    }
    q->nkeys = (int)n;
    return 1;
}

/* Parse one query from b[0, n): > 0 its length, KVS_NEED_MORE, or KVS_BAD with *why. */
static long kvs_parse(const uint8_t *b, size_t n, kvs_query_t *q, const char **why)
{
    kvs_rd_t r = {.b = b, .n = n, .off = 1, .why = NULL};
    int rc = 1;

    if (n == 0) {
        return KVS_NEED_MORE;
    }
    q->type = b[0];
    switch (q->type) {
    case GS_KV_Q_VALIDATE:
    case GS_KV_Q_PING:
        rc = rd_u32(&r, &q->u32);
        break;
    case GS_KV_Q_SET:
        rc = rd_key(&r, &q->key);
        rc = (rc == 1) ? rd_val(&r, &q->val) : rc;
        break;
    case GS_KV_Q_COMPARE_SET:
        rc = rd_key(&r, &q->key);
        rc = (rc == 1) ? rd_val(&r, &q->val) : rc;
        rc = (rc == 1) ? rd_val(&r, &q->val2) : rc;
        break;
    case GS_KV_Q_GET:
    case GS_KV_Q_DELETE_KEY:
        rc = rd_key(&r, &q->key);
        break;
    case GS_KV_Q_ADD: {
        uint64_t d = 0;

        rc = rd_key(&r, &q->key);
        rc = (rc == 1) ? rd_u64(&r, &d) : rc;
        memcpy(&q->delta, &d, sizeof(d));
        break;
    }
    case GS_KV_Q_CHECK:
    case GS_KV_Q_WAIT:
        rc = rd_keys(&r, q);
        break;
    case GS_KV_Q_GETNUMKEYS:
    case GS_KV_Q_CANCEL_WAIT:
        break;
    default:
        *why = "a query this store does not serve (APPEND, MULTI_GET/SET, queues, LIST_KEYS, "
               "BARRIER or an unknown code)";
        return KVS_BAD;
    }
    if (rc == KVS_BAD) {
        *why = r.why;
        return KVS_BAD;
    }
    return (rc == 1) ? (long)r.off : KVS_NEED_MORE;
}

/* FNV-1a over the key, then the table's keyed hash. */
static uint64_t kvs_hash(const gs__kvs_t *s, const uint8_t *k, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < n; i++) {
        h = (h ^ k[i]) * 0x100000001b3ull;
    }
    return gs__htab_hash(&s->keys, h, n);
}

static kvs_entry_t *kvs_find(const gs__kvs_t *s, const uint8_t *k, size_t n)
{
    const uint64_t h = kvs_hash(s, k, n);

    for (gs__hnode_t *nd = gs__htab_first(&s->keys, h); nd != NULL; nd = gs__htab_next(nd)) {
        kvs_entry_t *e = (kvs_entry_t *)(void *)nd;

        if ((e->klen == n) && (memcmp(e->key, k, n) == 0)) {
            return e;
        }
    }
    return NULL;
}

static void kvs_entry_free(gs__kvs_t *s, kvs_entry_t *e)
{
    gs__htab_remove(&s->keys, &e->node);
    s->bytes -= e->klen + e->vlen;
    atomic_fetch_sub_explicit(&s->nkeys, 1, memory_order_relaxed);
    free(e->val);
    free(e);
}

/* Set @p k to @p v (replacing it). Returns NULL on success, else why not. */
static const char *kvs_put(gs__kvs_t *s, kvs_span_t k, kvs_span_t v)
{
    kvs_entry_t *e = kvs_find(s, k.p, k.n);
    const size_t old = (e != NULL) ? e->klen + e->vlen : 0;
    uint8_t *nv;

    if (s->bytes - old + k.n + v.n > s->max_bytes) {
        return "the store is full (its max_bytes): it holds no more keys and values";
    }
    nv = malloc(v.n > 0 ? v.n : 1);
    if (nv == NULL) {
        return "out of memory";
    }
    if (v.n > 0) {
        memcpy(nv, v.p, v.n);
    }
    if (e == NULL) {
        e = malloc(sizeof(*e) + k.n);
        if (e == NULL) {
            free(nv);
            return "out of memory";
        }
        e->klen = k.n;
        memcpy(e->key, k.p, k.n);
        e->val = NULL;
        e->vlen = 0;
        if (gs__htab_insert(&s->keys, &e->node, kvs_hash(s, k.p, k.n)) != GS_OK) {
            free(e);
            free(nv);
            return "out of memory";
        }
        s->bytes += k.n;
        atomic_fetch_add_explicit(&s->nkeys, 1, memory_order_relaxed);
    }
    free(e->val);
    s->bytes = s->bytes - e->vlen + v.n;
    e->val = nv;
    e->vlen = v.n;
    return NULL;
}

static const char *kvs_reply(kvs_conn_t *c, const void *a, size_t an, const void *b, size_t bn)
{
    const size_t need = c->out_len + an + bn;

    if (need > c->out_cap) {
        size_t cap = (c->out_cap > 0) ? c->out_cap : 256;
        uint8_t *p;

        if (c->out_off > 0) { /* compact first */
            memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
            c->out_len -= c->out_off;
            c->out_off = 0;
            return kvs_reply(c, a, an, b, bn);
        }
        while (cap < need) {
            cap *= 2;
        }
        p = realloc(c->out, cap);
        if (p == NULL) {
            return "out of memory for an answer";
        }
        c->out = p;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, a, an);
    if (bn > 0) {
        memcpy(c->out + c->out_len + an, b, bn);
    }
    c->out_len += an + bn;
    return NULL;
}

static const char *kvs_reply_u8(kvs_conn_t *c, uint8_t v)
{
    return kvs_reply(c, &v, 1, NULL, 0);
}

static const char *kvs_reply_vec(kvs_conn_t *c, const uint8_t *p, size_t n)
{
    const uint64_t len = n;

    return kvs_reply(c, &len, sizeof(len), p, n);
}

static void kvs_wait_clear(kvs_conn_t *c)
{
    for (int i = 0; i < c->nwait; i++) {
        free(c->wait_keys[i]);
        c->wait_keys[i] = NULL;
    }
    c->nwait = 0;
    c->waiting = 0;
}

/* Keys were set: answer every parked WAIT whose keys now all exist. */
static void kvs_wake(gs__kvs_t *s)
{
    for (int i = 0; i < s->max_conns; i++) {
        kvs_conn_t *c = s->conns[i];
        int ready = 1;

        if ((c == NULL) || !c->waiting) {
            continue;
        }
        for (int k = 0; ready && (k < c->nwait); k++) {
            ready = (kvs_find(s, (const uint8_t *)c->wait_keys[k], c->wait_klen[k]) != NULL);
        }
        if (ready) {
            kvs_wait_clear(c);
            if (kvs_reply_u8(c, GS_KV_STOP_WAITING) != NULL) {
                c->kick = -1; /* dropped on the next turn */
            } else {
                c->kick = 1;
            }
        }
    }
}

/* Parse a decimal int64 as torch stores ADD's value. Returns 0 or -1. */
static int kvs_parse_i64(const uint8_t *p, size_t n, int64_t *out)
{
    char buf[32];
    char *end = NULL;

    if ((n == 0) || (n >= sizeof(buf))) {
        return -1;
    }
    memcpy(buf, p, n);
    buf[n] = '\0';
    errno = 0;
    *out = strtoll(buf, &end, 10);
    return ((errno == 0) && (end == buf + n) && !isspace((unsigned char)buf[0])) ? 0 : -1;
}

static const char *kvs_do_add(gs__kvs_t *s, kvs_conn_t *c, const kvs_query_t *q)
{
    const kvs_entry_t *e = kvs_find(s, q->key.p, q->key.n);
    int64_t v = 0;
    char text[32];
    const char *why;

    if ((e != NULL) && (kvs_parse_i64(e->val, e->vlen, &v) != 0)) {
        return "ADD on a key whose value is not an integer";
    }
    if (((q->delta > 0) && (v > INT64_MAX - q->delta)) ||
        ((q->delta < 0) && (v < INT64_MIN - q->delta))) {
        return "ADD overflows a 64-bit integer";
    }
    v += q->delta;
    why = kvs_put(s, q->key,
                  (kvs_span_t){.p = (const uint8_t *)text,
                               .n = (size_t)snprintf(text, sizeof(text), "%lld", (long long)v)});
    if (why == NULL) {
        why = kvs_reply(c, &v, sizeof(v), NULL, 0);
    }
    kvs_wake(s);
    return why;
}

static const char *kvs_do_compare_set(gs__kvs_t *s, kvs_conn_t *c, const kvs_query_t *q)
{
    const kvs_entry_t *e = kvs_find(s, q->key.p, q->key.n);
    const char *why = NULL;

    /* torch's rule: a missing key is set only when the expected value is empty; the answer is
     * the value held afterwards (for a missing key with an expected value: the expected one). */
    if (e == NULL) {
        if (q->val.n != 0) {
            return kvs_reply_vec(c, q->val.p, q->val.n);
        }
        why = kvs_put(s, q->key, q->val2);
    } else if ((e->vlen == q->val.n) && (memcmp(e->val, q->val.p, e->vlen) == 0)) {
        why = kvs_put(s, q->key, q->val2);
    }
    if (why == NULL) {
        e = kvs_find(s, q->key.p, q->key.n);
        why = kvs_reply_vec(c, e->val, e->vlen);
    }
    kvs_wake(s);
    return why;
}

static const char *kvs_do_wait(gs__kvs_t *s, kvs_conn_t *c, const kvs_query_t *q)
{
    int ready = 1;

    for (int i = 0; ready && (i < q->nkeys); i++) {
        ready = (kvs_find(s, q->keys[i].p, q->keys[i].n) != NULL);
    }
    if (q->type == GS_KV_Q_CHECK) {
        return kvs_reply_u8(c, ready ? GS_KV_READY : GS_KV_NOT_READY);
    }
    if (ready) {
        return kvs_reply_u8(c, GS_KV_STOP_WAITING);
    }
    for (int i = 0; i < q->nkeys; i++) {
        c->wait_keys[i] = malloc(q->keys[i].n);
        if (c->wait_keys[i] == NULL) {
            c->nwait = i;
            kvs_wait_clear(c);
            return "out of memory for a WAIT";
        }
        memcpy(c->wait_keys[i], q->keys[i].p, q->keys[i].n);
        c->wait_klen[i] = q->keys[i].n;
    }
    c->nwait = q->nkeys;
    c->waiting = 1;
    return NULL;
}

/* Serve one parsed query. Returns NULL, or why the client must be dropped. */
static const char *kvs_serve_one(gs__kvs_t *s, kvs_conn_t *c, const kvs_query_t *q)
{
    if (!c->validated && (q->type != GS_KV_Q_VALIDATE)) {
        return "a query before VALIDATE (not a TCPStore client)";
    }
    switch (q->type) {
    case GS_KV_Q_VALIDATE:
        if (q->u32 != GS_KV_MAGIC) {
            return "a bad magic number in VALIDATE (not a TCPStore client)";
        }
        c->validated = 1;
        return NULL;
    case GS_KV_Q_PING:
        return kvs_reply(c, &q->u32, sizeof(q->u32), NULL, 0);
    case GS_KV_Q_SET: {
        const char *why = kvs_put(s, q->key, q->val);

        kvs_wake(s);
        return why;
    }
    case GS_KV_Q_COMPARE_SET:
        return kvs_do_compare_set(s, c, q);
    case GS_KV_Q_GET: {
        const kvs_entry_t *e = kvs_find(s, q->key.p, q->key.n);

        /* torch's client WAITs first; torch's store fails a GET of a missing key too. */
        return (e != NULL) ? kvs_reply_vec(c, e->val, e->vlen) : "GET of a key that is not set";
    }
    case GS_KV_Q_ADD:
        return kvs_do_add(s, c, q);
    case GS_KV_Q_CHECK:
    case GS_KV_Q_WAIT:
        return kvs_do_wait(s, c, q);
    case GS_KV_Q_CANCEL_WAIT:
        kvs_wait_clear(c);
        return kvs_reply_u8(c, GS_KV_WAIT_CANCELED);
    case GS_KV_Q_GETNUMKEYS: {
        const int64_t n = (int64_t)s->keys.n;

        return kvs_reply(c, &n, sizeof(n), NULL, 0);
    }
    case GS_KV_Q_DELETE_KEY: {
        kvs_entry_t *e = kvs_find(s, q->key.p, q->key.n);
        const int64_t n = (e != NULL) ? 1 : 0;

        if (e != NULL) {
            kvs_entry_free(s, e);
        }
        return kvs_reply(c, &n, sizeof(n), NULL, 0);
    }
    default:
        return "an unknown query";
    }
}

static void kvs_close(gs__kvs_t *s, int idx)
{
    kvs_conn_t *c = s->conns[idx];

    (void)close(c->fd);
    kvs_wait_clear(c);
    free(c->in);
    free(c->out);
    free(c);
    s->conns[idx] = NULL;
    s->nconns--;
}

static void kvs_drop(gs__kvs_t *s, int idx, const char *why)
{
    GS_WARN("the store at %s dropped client %s: %s", s->where, s->conns[idx]->peer, why);
    atomic_fetch_add_explicit(&s->dropped, 1, memory_order_relaxed);
    kvs_close(s, idx);
}

/* Serve every whole query buffered (none while a WAIT is parked, but CANCEL_WAIT). */
static void kvs_serve(gs__kvs_t *s, int idx)
{
    kvs_conn_t *c = s->conns[idx];
    kvs_query_t q;

    c->kick = 0;
    for (int budget = 0; budget < 4096; budget++) { /* bounded: others get their turn */
        const char *why = NULL;
        long n;

        if (c->out_len - c->out_off > KVS_OUT_HIGH) {
            return; /* it reads its answers first */
        }
        n = kvs_parse(c->in + c->in_off, c->in_len - c->in_off, &q, &why);
        if (n == KVS_NEED_MORE) {
            return;
        }
        if (n == KVS_BAD) {
            kvs_drop(s, idx, why);
            return;
        }
        if (c->waiting && (q.type != GS_KV_Q_CANCEL_WAIT)) {
            kvs_drop(s, idx, "a query other than CANCEL_WAIT while its WAIT is parked");
            return;
        }
        c->in_off += (size_t)n;
        why = kvs_serve_one(s, c, &q);
        if (why != NULL) {
            kvs_drop(s, idx, why);
            return;
        }
    }
    c->kick = 1;
}

/* Read what the socket has. Returns 0, or -1 when the client is gone (closed here). */
static int kvs_read(gs__kvs_t *s, int idx)
{
    kvs_conn_t *c = s->conns[idx];
    ssize_t got;

    if (c->in_off > 0) { /* compact */
        memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
        c->in_len -= c->in_off;
        c->in_off = 0;
    }
    if (c->in_cap - c->in_len < KVS_READ_CHUNK) {
        size_t cap = c->in_len + KVS_READ_CHUNK;
        uint8_t *p;

        cap = (cap > KVS_IN_MAX) ? KVS_IN_MAX : cap;
        if (cap <= c->in_len) {
            kvs_drop(s, idx, "a query longer than any legal one");
            return -1;
        }
        p = realloc(c->in, cap);
        if (p == NULL) {
            kvs_drop(s, idx, "out of memory for its query");
            return -1;
        }
        c->in = p;
        c->in_cap = cap;
    }
    got = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
    if (got > 0) {
        c->in_len += (size_t)got;
        return 0;
    }
    if ((got < 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == EINTR))) {
        return 0;
    }
    if ((c->in_len > c->in_off) || c->waiting) {
        GS_INFO(BOOT, "the store at %s: client %s left %s", s->where, c->peer,
                c->waiting ? "while waiting" : "inside a query");
    }
    kvs_close(s, idx);
    return -1;
}

static int kvs_write(gs__kvs_t *s, int idx)
{
    kvs_conn_t *c = s->conns[idx];
    /* MSG_NOSIGNAL: a client gone meanwhile must not raise SIGPIPE in the embedding process. */
    ssize_t put =
        send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_DONTWAIT | MSG_NOSIGNAL);

    if (put >= 0) {
        c->out_off += (size_t)put;
        if (c->out_off == c->out_len) {
            c->out_off = 0;
            c->out_len = 0;
            c->kick = 1; /* reading may resume */
        }
        return 0;
    }
    if ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == EINTR)) {
        return 0;
    }
    kvs_close(s, idx); /* it went away */
    return -1;
}

static void kvs_accept(gs__kvs_t *s)
{
    for (int n = 0; n < 64; n++) { /* bounded: a flood does not starve the clients */
        gs__sockaddr_t peer = {.len = sizeof(peer.ss)};
        int fd = accept(s->listen_fd, (struct sockaddr *)&peer.ss, &peer.len);
        kvs_conn_t *c;
        int slot = -1;

        if (fd < 0) {
            return; /* EAGAIN, or a failed accept: the next poll tells */
        }
        if ((s->nconns >= s->max_conns) || (gs__sock_tune(fd) != GS_OK)) {
            GS_WARN("the store at %s refused a connection: %d clients are connected, its limit",
                    s->where, s->nconns);
            (void)close(fd);
            continue;
        }
        c = calloc(1, sizeof(*c));
        if (c == NULL) {
            (void)close(fd);
            continue;
        }
        c->fd = fd;
        if (gs__sock_format(&peer, c->peer, sizeof(c->peer)) != GS_OK) {
            (void)snprintf(c->peer, sizeof(c->peer), "(fd %d)", fd);
        }
        for (int i = 0; i < s->max_conns; i++) {
            if (s->conns[i] == NULL) {
                slot = i;
                break;
            }
        }
        s->conns[slot] = c;
        s->nconns++;
    }
}

static void *kvs_thread(void *arg)
{
    gs__kvs_t *s = arg;

    for (;;) {
        int np = 2;
        int rc;

        s->pfds[0] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
        s->pfds[1] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
        for (int i = 0; i < s->max_conns; i++) {
            kvs_conn_t *c = s->conns[i];
            short ev = 0;

            if (c == NULL) {
                continue;
            }
            if (c->out_len - c->out_off <= KVS_OUT_HIGH) {
                ev |= POLLIN;
            }
            if (c->out_len > c->out_off) {
                ev |= POLLOUT;
            }
            s->pfds[np] = (struct pollfd){.fd = c->fd, .events = ev};
            s->pfd_conn[np] = i;
            np++;
        }
        rc = poll(s->pfds, (nfds_t)np, -1); /* every client's wait is bounded by its own deadline */
        if ((rc < 0) && (errno != EINTR)) {
            GS_WARN("the store at %s: poll failed: %s; serving stops", s->where, strerror(errno));
            break;
        }
        if ((rc > 0) && (s->pfds[0].revents != 0)) {
            break; /* stop() */
        }
        for (int p = 2; (rc > 0) && (p < np); p++) {
            const int idx = s->pfd_conn[p];
            const short re = s->pfds[p].revents;

            if ((re & POLLOUT) && (kvs_write(s, idx) != 0)) {
                continue;
            }
            if ((re & (POLLIN | POLLHUP | POLLERR)) && (kvs_read(s, idx) != 0)) {
                continue;
            }
            if (re & POLLIN) {
                kvs_serve(s, idx);
            }
        }
        for (int i = 0; i < s->max_conns; i++) {
            if ((s->conns[i] != NULL) && (s->conns[i]->kick < 0)) {
                kvs_drop(s, i, "out of memory for an answer");
            } else if ((s->conns[i] != NULL) && s->conns[i]->kick) {
                kvs_serve(s, i);
            }
        }
        if ((rc > 0) && (s->pfds[1].revents & POLLIN)) {
            kvs_accept(s);
        }
    }
    return NULL;
}

static void kvs_free(gs__kvs_t *s)
{
    for (int i = 0; (s->conns != NULL) && (i < s->max_conns); i++) {
        if (s->conns[i] != NULL) {
            kvs_close(s, i);
        }
    }
    for (size_t b = 0; b < s->keys.nslots; b++) {
        while (s->keys.slots[b] != NULL) {
            kvs_entry_free(s, (kvs_entry_t *)(void *)s->keys.slots[b]);
        }
    }
    gs__htab_free(&s->keys);
    if (s->listen_fd >= 0) {
        (void)close(s->listen_fd);
    }
    for (int i = 0; i < 2; i++) {
        if (s->wake[i] >= 0) {
            (void)close(s->wake[i]);
        }
    }
    free(s->conns);
    free(s->pfds);
    free(s->pfd_conn);
    free(s);
}

gs_status_t gs__kvs_start(const char *host, int port, const char *family,
                          const gs__kvs_opts_t *opts, gs__kvs_t **kvs_out)
{
    gs__sockaddr_t addr, bound;
    gs__kvs_t *s;
    gs_status_t st;
    int ret;

    if ((port < 0) || (port > 65535) || (kvs_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "store server: port %d is not 0..65535", port);
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "store server: out of memory");
    }
    s->listen_fd = -1;
    s->wake[0] = s->wake[1] = -1;
    s->max_conns =
        ((opts != NULL) && (opts->max_conns > 0)) ? opts->max_conns : GS_KVS_MAX_CONNS_DEFAULT;
    s->max_bytes =
        ((opts != NULL) && (opts->max_bytes > 0)) ? opts->max_bytes : GS_KVS_MAX_BYTES_DEFAULT;
    gs__htab_init(&s->keys);
    s->conns = calloc((size_t)s->max_conns, sizeof(*s->conns));
    s->pfds = calloc((size_t)s->max_conns + 2, sizeof(*s->pfds));
    s->pfd_conn = calloc((size_t)s->max_conns + 2, sizeof(*s->pfd_conn));
    if ((s->conns == NULL) || (s->pfds == NULL) || (s->pfd_conn == NULL)) {
        kvs_free(s);
        return gs__error_set(GS_ERR_NO_MEMORY, "store server: out of memory for %d connections",
                             s->max_conns);
    }
    st = gs__sock_resolve((host != NULL) ? host : "127.0.0.1", port,
                          (family != NULL) ? family : "any", &addr);
    if (st == GS_OK) {
        st = gs__sock_listen(&addr, 512, &s->listen_fd, &bound);
    }
    if (st != GS_OK) {
        st = gs__error_wrap(st, "store server on %s:%d: %s", (host != NULL) ? host : "127.0.0.1",
                            port, gs__error_get());
        kvs_free(s);
        return st;
    }
    (void)gs__sock_format(&bound, s->where, sizeof(s->where));
    s->port = (bound.ss.ss_family == AF_INET6)
                  ? ntohs(((struct sockaddr_in6 *)&bound.ss)->sin6_port)
                  : ntohs(((struct sockaddr_in *)&bound.ss)->sin_port);
    if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        st = gs__error_set(GS_ERR_SYSTEM, "store server: pipe2: %s", strerror(errno));
        kvs_free(s);
        return st;
    }
    ret = pthread_create(&s->thread, NULL, kvs_thread, s);
    if (ret != 0) {
        st = gs__error_set(GS_ERR_SYSTEM, "store server: pthread_create: %s", strerror(ret));
        kvs_free(s);
        return st;
    }
    GS_INFO(BOOT, "store server listening on %s", s->where);
    *kvs_out = s;
    return GS_OK;
}

int gs__kvs_port(const gs__kvs_t *kvs)
{
    return kvs->port;
}

const char *gs__kvs_where(const gs__kvs_t *kvs)
{
    return kvs->where;
}

uint64_t gs__kvs_dropped(const gs__kvs_t *kvs)
{
    return atomic_load_explicit(&kvs->dropped, memory_order_relaxed);
}

uint64_t gs__kvs_nkeys(const gs__kvs_t *kvs)
{
    return atomic_load_explicit(&kvs->nkeys, memory_order_relaxed);
}

void gs__kvs_stop(gs__kvs_t *kvs)
{
    const uint8_t one = 1;

    if (kvs == NULL) {
        return;
    }
    while ((write(kvs->wake[1], &one, 1) < 0) && (errno == EINTR)) {
    }
    (void)pthread_join(kvs->thread, NULL);
    kvs_free(kvs);
}
