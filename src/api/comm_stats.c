/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Traffic statistics: gs_comm_stats(), gs_comm_peer_stats(), counting
 * finished operations per collective kind, and the GS_STATS_FILE writer
 * (one JSON object per line: totals, per collective kind, and per peer for
 * the peers this rank exchanged anything with; docs/stats.md documents the
 * fields). Reads are lock-free relaxed loads. The writer runs on the thread
 * that runs the communicator's operations, or at destroy, never on a thread
 * of its own; a line is built in one buffer and written with one append, so
 * ranks sharing a file do not interleave within a line.
 */
#include "api/comm_stats.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"

/* The public collective kinds are the internal ones (algo.h's GS_COLL_KIND_MAP
 * gives every internal kind its public value); every public kind has a row. */
#define COLL_ROW_COUNT(_kind, _public, _name, _api) +1
_Static_assert((0 GS_COLL_KIND_MAP(COLL_ROW_COUNT)) == (int)GS_COLL_TYPE_COUNT,
               "a gs_coll_type_t without a GS_COLL_KIND_MAP row");
#undef COLL_ROW_COUNT
_Static_assert(GS_COLL_KIND_COUNT <= GS_STATS_COLL_MAX, "gs_comm_stats_t.coll is too short");
_Static_assert(GS_STATS_COLL_MAX == GS__COUNTERS_COLL_MAX, "per-collective slots differ");
_Static_assert(GS_RAILS_MAX == GS__COUNTERS_RAILS_MAX, "rail slots differ");

/* The smallest size field accepted: the first published layout of each
 * struct (its last field's end; fields appended later do not change it). */
#define COMM_STATS_V1_SIZE (offsetof(gs_comm_stats_t, coll) + sizeof(gs_coll_stats_t) * 16)
#define PEER_STATS_V1_SIZE (offsetof(gs_peer_stats_t, recv_wait_ns) + sizeof(uint64_t))
/* A larger size field is an uninitialised struct, not a future version. */
#define STATS_SIZE_MAX 65536

/* A JSON line: the budget per line part, bounded by the communicator size. */
#define LINE_FIXED_BYTES 1024
#define LINE_COLL_BYTES 160
#define LINE_PEER_BYTES 256

/* Validate a call's comm and output struct (both structs start with size_t size). */
static gs_status_t stats_check_out(const char *fn, gs_comm_t comm, const void *out, size_t v1,
                                   const char *init)
{
    size_t size;

    if ((comm == NULL) || (out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: %s is NULL", fn,
                             comm == NULL ? "comm" : "stats_out");
    }
    memcpy(&size, out, sizeof(size));
    if ((size < v1) || (size > STATS_SIZE_MAX)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s: stats_out->size is %zu, which is not the size of any version of "
                             "the struct; initialise it with %s",
                             fn, size, init);
    }
    return GS_OK;
}

/* Copy what fits in the caller's struct (its size field) from @p local, whose
 * size field is set to the bytes copied. */
static void stats_copy_out(void *out, void *local, size_t local_size)
{
    size_t n;

    memcpy(&n, out, sizeof(n));
    n = (n < local_size) ? n : local_size;
    memcpy(local, &n, sizeof(n));
    memcpy(out, local, n);
}

gs_status_t gs__comm_stats_setup(gs_comm_t comm)
{
    const uint64_t now = gs__now_ns();

    comm->counters.peers = calloc((size_t)comm->size, sizeof(*comm->counters.peers));
    if (comm->counters.peers == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY,
                             "gs_comm_init: cannot allocate statistics for %d peers", comm->size);
    }
    comm->counters.npeers = comm->size;
    comm->counters.emit_start_ns = now;
    comm->counters.emit_next_ns = 0;
    if ((comm->cfg.stats_file[0] != '\0') && (comm->cfg.stats_interval_ms > 0)) {
        comm->counters.emit_next_ns = now + (uint64_t)comm->cfg.stats_interval_ms * 1000000ull;
    }
    comm->actx.peer_ctr = comm->counters.peers;
    comm->actx.wait_pending_ns = 0;
    return GS_OK;
}

void gs__comm_stats_free(gs_comm_t comm)
{
    free(comm->counters.peers);
    comm->counters.peers = NULL;
    comm->counters.npeers = 0;
    comm->actx.peer_ctr = NULL;
}

void gs__comm_stats_op_done(gs_comm_t comm, const gs__coll_desc_t *d, gs_status_t status,
                            uint64_t busy_ns)
{
    gs__coll_counters_t *cc = &comm->counters.coll[d->kind];

    gs__counter_add(&comm->counters.ops_completed, 1);
    if (status != GS_OK) {
        gs__counter_add(&comm->counters.ops_failed, 1);
    }
    gs__counter_add(&cc->ops, 1);
    gs__counter_add(&cc->bytes, (uint64_t)d->count * gs__dtype_size(d->dtype));
    gs__counter_add(&cc->busy_ns, busy_ns);
    if ((status == GS_OK) && (d->algo != GS_ALGO_AUTO)) {
        atomic_store_explicit(&cc->last_algo, (int)d->algo, memory_order_relaxed);
    }
    if (status == GS_OK) {
        atomic_store_explicit(&cc->last_traffic, d->traffic, memory_order_relaxed);
    }
}

/* Read one peer's counters (a zero entry when there are none). */
static void stats_read_peer(gs_comm_t comm, int peer, gs_peer_stats_t *p)
{
    const gs__peer_counters_t *pc;

    memset(p, 0, sizeof(*p));
    p->size = sizeof(*p);
    p->peer = peer;
    if ((comm->counters.peers == NULL) || (peer >= comm->counters.npeers)) {
        return;
    }
    pc = &comm->counters.peers[peer];
    p->bytes_sent = gs__counter_get(&pc->bytes_sent);
    p->bytes_received = gs__counter_get(&pc->bytes_received);
    p->msgs_sent = gs__counter_get(&pc->msgs_sent);
    p->msgs_received = gs__counter_get(&pc->msgs_received);
    p->send_wait_ns = gs__counter_get(&pc->send_wait_ns);
    p->recv_wait_ns = gs__counter_get(&pc->recv_wait_ns);
    p->nrails = atomic_load_explicit(&pc->nrails, memory_order_acquire);
    for (int k = 0; (k < p->nrails) && (k < GS_RAILS_MAX); k++) {
        const gs__rail_counters_t *rc = &pc->rails[k];

        p->rails[k].bytes_sent = gs__counter_get(&rc->bytes);
        p->rails[k].bytes_resent = gs__counter_get(&rc->resent);
        p->rails[k].rate_bps = gs__counter_get(&rc->rate_bps);
        p->rails[k].share_ppm =
            (uint32_t)atomic_load_explicit(&rc->share_ppm, memory_order_relaxed);
        p->rails[k].up = (uint32_t)atomic_load_explicit(&rc->up, memory_order_relaxed);
        memcpy(p->rails[k].ifname, rc->ifname, sizeof(p->rails[k].ifname));
        p->rails[k].ifname[sizeof(p->rails[k].ifname) - 1] = '\0';
    }
}

static void stats_read(gs_comm_t comm, gs_comm_stats_t *s)
{
    const gs__counters_t *c = &comm->counters;

    memset(s, 0, sizeof(*s));
    s->size = sizeof(*s);
    s->rank = comm->rank;
    s->nranks = comm->size;
    s->comm_id = comm->comm_id;
    s->bytes_sent = gs__counter_get(&c->bytes_sent);
    s->bytes_received = gs__counter_get(&c->bytes_received);
    s->msgs_sent = gs__counter_get(&c->msgs_sent);
    s->msgs_received = gs__counter_get(&c->msgs_received);
    s->ops_completed = gs__counter_get(&c->ops_completed);
    s->ops_failed = gs__counter_get(&c->ops_failed);
    s->busy_ns = gs__counter_get(&c->busy_ns);
    for (int k = 0; k < GS_COLL_KIND_COUNT; k++) {
        s->coll[k].ops = gs__counter_get(&c->coll[k].ops);
        s->coll[k].bytes = gs__counter_get(&c->coll[k].bytes);
        s->coll[k].busy_ns = gs__counter_get(&c->coll[k].busy_ns);
        s->coll[k].last_algo =
            (gs_algo_t)atomic_load_explicit(&c->coll[k].last_algo, memory_order_relaxed);
        s->traffic_bytes[k] =
            (uint64_t)atomic_load_explicit(&c->coll[k].last_traffic, memory_order_relaxed);
    }
    for (int p = 0; (c->peers != NULL) && (p < c->npeers); p++) {
        s->wait_ns +=
            gs__counter_get(&c->peers[p].send_wait_ns) + gs__counter_get(&c->peers[p].recv_wait_ns);
    }
}

gs_status_t gs_comm_stats(gs_comm_t comm, gs_comm_stats_t *stats_out)
{
    gs_comm_stats_t s;
    const gs_status_t status =
        stats_check_out("gs_comm_stats", comm, stats_out, COMM_STATS_V1_SIZE, "GS_COMM_STATS_INIT");

    if (status != GS_OK) {
        return status;
    }
    stats_read(comm, &s);
    stats_copy_out(stats_out, &s, sizeof(s));
    return GS_OK;
}

gs_status_t gs_comm_peer_stats(gs_comm_t comm, int peer, gs_peer_stats_t *stats_out)
{
    gs_peer_stats_t p;
    const gs_status_t status = stats_check_out("gs_comm_peer_stats", comm, stats_out,
                                               PEER_STATS_V1_SIZE, "GS_PEER_STATS_INIT");

    if (status != GS_OK) {
        return status;
    }
    if ((peer < 0) || (peer >= comm->size)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_comm_peer_stats: peer %d is out of range (communicator of %d "
                             "ranks: 0..%d)",
                             peer, comm->size, comm->size - 1);
    }
    stats_read_peer(comm, peer, &p);
    stats_copy_out(stats_out, &p, sizeof(p));
    return GS_OK;
}

/* ---------------------------------------------------------------------- */
/* GS_STATS_FILE                                                          */
/* ---------------------------------------------------------------------- */

/* A bounded line buffer; a line that would not fit is dropped whole. */
typedef struct line_buf {
    char *p;
    size_t len;
    size_t cap;
    int overflow;
} line_buf_t;

static void line_add(line_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void line_add(line_buf_t *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->overflow) {
        return;
    }
    va_start(ap, fmt);
    n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if ((n < 0) || ((size_t)n >= b->cap - b->len)) {
        b->overflow = 1;
        return;
    }
    b->len += (size_t)n;
}

/* A JSON string (quotes, backslashes and control characters escaped). */
static void line_add_str(line_buf_t *b, const char *s)
{
    line_add(b, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c != '\0'; c++) {
        if ((*c == '"') || (*c == '\\')) {
            line_add(b, "\\%c", *c);
        } else if (*c < 0x20) {
            line_add(b, "\\u%04x", *c);
        } else {
            line_add(b, "%c", *c);
        }
    }
    line_add(b, "\"");
}

static int peer_is_active(const gs_peer_stats_t *p)
{
    return (p->msgs_sent | p->msgs_received | p->send_wait_ns | p->recv_wait_ns) != 0;
}

/* Build the line; returns the number of bytes, 0 when it did not fit. */
static size_t stats_format(gs_comm_t comm, uint64_t now_ns, int final, line_buf_t *b)
{
    gs_comm_stats_t s;
    char host[256];
    struct timespec wall;
    int slowest = -1;
    uint64_t slowest_wait = 0;
    int first = 1;

    stats_read(comm, &s);
    if (gs__log_expand_path("%h", host, sizeof(host), -1) != 0) {
        (void)snprintf(host, sizeof(host), "unknown");
    }
    clock_gettime(CLOCK_REALTIME, &wall);
    line_add(b, "{\"gradsync_stats\":1,\"final\":%s,\"time_unix_ms\":%llu,\"elapsed_ms\":%llu,",
             final ? "true" : "false",
             (unsigned long long)wall.tv_sec * 1000ull +
                 (unsigned long long)wall.tv_nsec / 1000000ull,
             (unsigned long long)((now_ns - comm->counters.emit_start_ns) / 1000000ull));
    line_add(b, "\"host\":");
    line_add_str(b, host);
    line_add(b, ",\"pid\":%ld,\"rank\":%d,\"nranks\":%d,\"comm_id\":\"0x%016llx\",\"transport\":",
             (long)getpid(), s.rank, s.nranks, (unsigned long long)s.comm_id);
    line_add_str(b, gs__tp_name(&comm->tr));
    line_add(b,
             ",\"bytes_sent\":%llu,\"bytes_received\":%llu,\"msgs_sent\":%llu,"
             "\"msgs_received\":%llu,\"ops_completed\":%llu,\"ops_failed\":%llu,"
             "\"busy_ns\":%llu,\"wait_ns\":%llu,\"colls\":[",
             (unsigned long long)s.bytes_sent, (unsigned long long)s.bytes_received,
             (unsigned long long)s.msgs_sent, (unsigned long long)s.msgs_received,
             (unsigned long long)s.ops_completed, (unsigned long long)s.ops_failed,
             (unsigned long long)s.busy_ns, (unsigned long long)s.wait_ns);
    for (int k = 0; k < GS_COLL_KIND_COUNT; k++) {
        const gs_coll_stats_t *cs = &s.coll[k];
        if (cs->ops == 0) {
            continue;
        }
        line_add(b,
                 "%s{\"coll\":\"%s\",\"ops\":%llu,\"bytes\":%llu,\"busy_ns\":%llu,"
                 "\"last_algo\":\"%s\"}",
                 first ? "" : ",", gs__coll_name((gs__coll_kind_t)k), (unsigned long long)cs->ops,
                 (unsigned long long)cs->bytes, (unsigned long long)cs->busy_ns,
                 gs__algo_name(cs->last_algo));
        first = 0;
    }
    line_add(b, "],\"peers\":[");
    first = 1;
    for (int peer = 0; peer < s.nranks; peer++) {
        gs_peer_stats_t p;
        stats_read_peer(comm, peer, &p);
        if (!peer_is_active(&p)) {
            continue;
        }
        if (p.send_wait_ns + p.recv_wait_ns > slowest_wait) {
            slowest_wait = p.send_wait_ns + p.recv_wait_ns;
            slowest = peer;
        }
        line_add(b,
                 "%s{\"peer\":%d,\"bytes_sent\":%llu,\"bytes_received\":%llu,\"msgs_sent\":%llu,"
                 "\"msgs_received\":%llu,\"send_wait_ns\":%llu,\"recv_wait_ns\":%llu}",
                 first ? "" : ",", peer, (unsigned long long)p.bytes_sent,
                 (unsigned long long)p.bytes_received, (unsigned long long)p.msgs_sent,
                 (unsigned long long)p.msgs_received, (unsigned long long)p.send_wait_ns,
                 (unsigned long long)p.recv_wait_ns);
        first = 0;
    }
    line_add(b, "],\"slowest_peer\":%d}\n", slowest);
    return b->overflow ? 0 : b->len;
}

/* Append the whole line to the file; returns 0 or an errno value. */
static int stats_append(const char *path, const char *line, size_t len)
{
    size_t off = 0;
    int err = 0;
    int fd;

    do {
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    } while ((fd < 0) && (errno == EINTR));
    if (fd < 0) {
        return errno;
    }
    while (off < len) {
        const ssize_t n = write(fd, line + off, len - off);
        if (n > 0) {
            off += (size_t)n;
        } else if ((n < 0) && (errno == EINTR)) {
            continue;
        } else {
            err = (n < 0) ? errno : EIO;
            break;
        }
    }
    if ((close(fd) != 0) && (err == 0)) {
        err = errno;
    }
    return err;
}

void gs__comm_stats_emit(gs_comm_t comm, uint64_t now_ns, int final)
{
    char path[PATH_MAX];
    line_buf_t b;
    size_t len;
    int err;

    if (comm->counters.emit_next_ns != 0) {
        comm->counters.emit_next_ns = now_ns + (uint64_t)comm->cfg.stats_interval_ms * 1000000ull;
    }
    if ((comm->cfg.stats_file[0] == '\0') || comm->counters.emit_warned) {
        return;
    }
    if (gs__log_expand_path(comm->cfg.stats_file, path, sizeof(path), comm->rank) != 0) {
        comm->counters.emit_warned = 1;
        GS_WARN("GS_STATS_FILE: the expanded path of '%s' is longer than %d bytes; statistics "
                "are not written",
                comm->cfg.stats_file, PATH_MAX - 1);
        return;
    }
    memset(&b, 0, sizeof(b));
    b.cap = LINE_FIXED_BYTES + (size_t)GS_COLL_KIND_COUNT * LINE_COLL_BYTES +
            (size_t)comm->size * LINE_PEER_BYTES;
    b.p = malloc(b.cap);
    if (b.p == NULL) {
        GS_WARN("GS_STATS_FILE: out of memory for a %zu-byte line; this line is skipped", b.cap);
        return;
    }
    len = stats_format(comm, now_ns, final, &b);
    err = (len > 0) ? stats_append(path, b.p, len) : EOVERFLOW;
    free(b.p);
    if (err != 0) {
        comm->counters.emit_warned = 1;
        GS_WARN("GS_STATS_FILE: cannot write %s (%s); statistics of rank %d are not written", path,
                strerror(err), comm->rank);
    }
}
