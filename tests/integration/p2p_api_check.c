/* SPDX-License-Identifier: Apache-2.0 */
/*
 * p2p_api_check: multi-process check of the point-to-point calls framework
 * plugins need, run on every rank under gsrun (any world size; the cases
 * that need a peer are skipped on one rank). Public API only:
 *
 *   anysrc    gs_recv_status from GS_ANY_SOURCE: one message from every other
 *             rank, sent in a random order; each source once, count right
 *   short     a shorter message: GS_OK, status->count, the rest untouched
 *   long      a longer message: GS_ERR_TRUNCATED, buffer untouched, the
 *             communicator still works; a partial element: GS_ERR_MISMATCH
 *   probe     gs_probe from any rank, then gs_recv from status.source
 *   iprobe    flag 0 before the message is sent, then 1
 *   groups    a ring where every rank receives before it sends, in a group;
 *             nested groups (only the outer end posts); the first error in
 *             call order; gs_group_end without a start
 *   reqs      gs_testall and gs_waitany over requests on two communicators
 *   dup       gs_comm_dup: the same tag on the parent and the dup never crosses
 *   timeout   gs_probe on a communicator with a 300 ms deadline: GS_ERR_TIMEOUT
 *             naming the tag, and the communicator still works
 *   config    gs_config_t.shm, debug, debug_subsys, debug_file, stats_file on
 *             fresh communicators (the log shows shared memory with shm=1 and
 *             none with shm=0)
 *
 *   p2p_api_check [--only NAME,NAME...]
 *
 * One line per failed check, "N passed, M failed" on rank 0; exit status 1
 * when any rank failed (agreed with an all-reduce), 2 for bad arguments.
 */
#include <gradsync/gradsync.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "tc_clock.h"

static int g_rank;
static int g_world;
static long g_passed;
static long g_failed;
static const char *g_only;

static void check(int ok, const char *what, const char *fmt, ...)
{
    va_list ap;

    if (ok) {
        g_passed++;
        return;
    }
    g_failed++;
    printf("FAIL rank %d %s: ", g_rank, what);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf(" (last error: %s)\n", gs_last_error());
    fflush(stdout);
}

#define CHECK_OK(_what, _expr)                                                                     \
    do {                                                                                           \
        gs_status_t _st = (_expr);                                                                 \
        check(_st == GS_OK, (_what), "%s returned %s", #_expr, gs_status_name(_st));               \
    } while (0)

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static int wanted(const char *name)
{
    return (g_only == NULL) || (strstr(g_only, name) != NULL); /* names share no substrings */
}

static int left_of(int r)
{
    return (r - 1 + g_world) % g_world;
}

static int right_of(int r)
{
    return (r + 1) % g_world;
}

/* ------------------------------------------------------------------ */

static void test_anysrc(gs_comm_t comm)
{
    const uint32_t tag = 10;
    int order[64];
    gs_request_t reqs[64];
    int32_t payload[64][65];
    int seen[64];
    int n = 0;

    if (g_world < 2) {
        return;
    }
    /* Send my message to every other rank in an order of my own. */
    srand((unsigned)(g_rank * 7919 + 17));
    for (int p = 0; p < g_world; p++) {
        if (p != g_rank) {
            order[n++] = p;
        }
    }
    for (int i = n - 1; i > 0; i--) {
        const int j = rand() % (i + 1);
        const int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int k = 0; k < g_rank + 1; k++) {
        payload[0][k] = g_rank * 1000 + k;
    }
    for (int i = 0; i < n; i++) {
        reqs[i] = GS_REQUEST_NULL;
        CHECK_OK("anysrc: isend", gs_isend(comm, payload[0], (size_t)g_rank + 1, GS_DTYPE_I32,
                                           order[i], tag, &reqs[i]));
    }
    memset(seen, 0, sizeof(seen));
    for (int i = 0; i < n; i++) {
        int32_t buf[65];
        gs_p2p_status_t st = {-7, 0, 0};
        gs_status_t s;

        for (int k = 0; k < 65; k++) {
            buf[k] = -1;
        }
        s = gs_recv_status(comm, buf, (size_t)g_world + 1, GS_DTYPE_I32, GS_ANY_SOURCE, tag, &st);
        check(s == GS_OK, "anysrc: recv_status", "returned %s", gs_status_name(s));
        if (s != GS_OK) {
            continue;
        }
        check((st.source >= 0) && (st.source < g_world) && (st.source != g_rank) &&
                  !seen[st.source],
              "anysrc: source", "status.source %d (seen before: %d)", st.source,
              ((st.source >= 0) && (st.source < g_world)) ? seen[st.source] : -1);
        if ((st.source < 0) || (st.source >= g_world)) {
            continue;
        }
        seen[st.source] = 1;
        check(st.count == (size_t)st.source + 1, "anysrc: count", "from rank %d count %zu",
              st.source, st.count);
        check(st.tag == tag, "anysrc: tag", "tag %u", st.tag);
        for (int k = 0; k < st.source + 1; k++) {
            check(buf[k] == st.source * 1000 + k, "anysrc: data", "from rank %d element %d is %d",
                  st.source, k, buf[k]);
        }
        check(buf[st.source + 1] == -1, "anysrc: tail", "element past the message written");
    }
    CHECK_OK("anysrc: waitall", gs_waitall((size_t)n, reqs));
}

static void test_short_long(gs_comm_t comm)
{
    const int right = right_of(g_rank);
    const int left = left_of(g_rank);
    int32_t out[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    int32_t in[8];
    uint8_t odd[5] = {1, 2, 3, 4, 5};
    gs_p2p_status_t st = {-7, 0, 0};
    gs_status_t s;

    if (g_world < 2) {
        return;
    }
    /* Shorter: 3 of at most 8. */
    CHECK_OK("short: send", gs_send(comm, out, 3, GS_DTYPE_I32, right, 11));
    memset(in, 0x5a, sizeof(in));
    s = gs_recv_status(comm, in, 8, GS_DTYPE_I32, left, 11, &st);
    check(s == GS_OK, "short: recv_status", "returned %s", gs_status_name(s));
    check((st.count == 3) && (st.source == left) && (st.tag == 11), "short: status",
          "count %zu source %d tag %u", st.count, st.source, st.tag);
    check((in[0] == 1) && (in[2] == 3) && (in[3] == 0x5a5a5a5a) && (in[7] == 0x5a5a5a5a),
          "short: data", "%d %d %d %d", in[0], in[2], in[3], in[7]);

    /* Longer: 9 into room for 4: truncated, untouched, not sticky. */
    CHECK_OK("long: send", gs_send(comm, out, 9, GS_DTYPE_I32, right, 12));
    memset(in, 0x5a, sizeof(in));
    st.source = -7;
    s = gs_recv_status(comm, in, 4, GS_DTYPE_I32, left, 12, &st);
    check(s == GS_ERR_TRUNCATED, "long: recv_status", "returned %s, expected GS_ERR_TRUNCATED",
          gs_status_name(s));
    check((in[0] == 0x5a5a5a5a) && (st.source == -7), "long: untouched",
          "buffer or status written on truncation");

    /* 5 bytes received as i32: not a whole number of elements. */
    CHECK_OK("mismatch: send", gs_send(comm, odd, 5, GS_DTYPE_U8, right, 13));
    s = gs_recv_status(comm, in, 8, GS_DTYPE_I32, left, 13, &st);
    check(s == GS_ERR_MISMATCH, "mismatch: recv_status", "returned %s, expected GS_ERR_MISMATCH",
          gs_status_name(s));
    CHECK_OK("long: comm alive", gs_barrier(comm));
}

static void test_probe(gs_comm_t comm)
{
    const int right = right_of(g_rank);
    const int left = left_of(g_rank);
    int32_t out[7];
    int32_t in[7];
    gs_p2p_status_t st = {-7, 0, 0};
    int flag = -1;
    gs_status_t s;
    double t0;

    if (g_world < 2) {
        /* Alone: nothing can arrive. */
        CHECK_OK("iprobe alone", gs_iprobe(comm, GS_ANY_SOURCE, 30, GS_DTYPE_I32, &flag, &st));
        check(flag == 0, "iprobe alone", "flag %d", flag);
        return;
    }
    for (int k = 0; k < 7; k++) {
        out[k] = g_rank * 100 + k;
    }
    CHECK_OK("probe: send", gs_send(comm, out, 7, GS_DTYPE_I32, right, 20));
    s = gs_probe(comm, GS_ANY_SOURCE, 20, GS_DTYPE_I32, &st);
    check(s == GS_OK, "probe", "returned %s", gs_status_name(s));
    check((st.source == left) && (st.count == 7) && (st.tag == 20), "probe: status",
          "source %d count %zu tag %u", st.source, st.count, st.tag);
    /* The same message, probed again with another dtype: counted in bytes. */
    CHECK_OK("probe u8", gs_probe(comm, left, 20, GS_DTYPE_U8, &st));
    check(st.count == 28, "probe u8: count", "%zu", st.count);
    memset(in, 0, sizeof(in));
    CHECK_OK("probe: recv", gs_recv(comm, in, 7, GS_DTYPE_I32, left, 20));
    check((in[0] == left * 100) && (in[6] == left * 100 + 6), "probe: data", "%d %d", in[0], in[6]);

    /* iprobe: nothing before the barrier (nobody has sent tag 30 yet). */
    flag = -1;
    CHECK_OK("iprobe before", gs_iprobe(comm, GS_ANY_SOURCE, 30, GS_DTYPE_I32, &flag, &st));
    check(flag == 0, "iprobe before", "flag %d before any send", flag);
    CHECK_OK("iprobe: barrier", gs_barrier(comm));
    CHECK_OK("iprobe: send", gs_send(comm, out, 2, GS_DTYPE_I32, right, 30));
    t0 = tc_now_ms();
    flag = 0;
    while ((flag == 0) && (tc_now_ms() - t0 < 20000.0)) {
        s = gs_iprobe(comm, left, 30, GS_DTYPE_I32, &flag, &st);
        if (s != GS_OK) {
            check(0, "iprobe after", "returned %s", gs_status_name(s));
            break;
        }
        if (flag == 0) {
            nap_ms(1);
        }
    }
    check((flag == 1) && (st.source == left) && (st.count == 2), "iprobe after",
          "flag %d source %d count %zu", flag, st.source, st.count);
    CHECK_OK("iprobe: recv", gs_recv(comm, in, 2, GS_DTYPE_I32, left, 30));
}

static void test_groups(gs_comm_t comm)
{
    const int right = right_of(g_rank);
    const int left = left_of(g_rank);
    int32_t out[4];
    int32_t in[4];
    int32_t in2[4];
    gs_p2p_status_t st = {-7, 0, 0};
    gs_status_t s;

    s = gs_group_end();
    check(s == GS_ERR_INVALID_USAGE, "group: end without start", "returned %s", gs_status_name(s));
    CHECK_OK("group: empty start", gs_group_start());
    CHECK_OK("group: empty end", gs_group_end());
    if (g_world < 2) {
        return;
    }
    for (int k = 0; k < 4; k++) {
        out[k] = g_rank * 10 + k;
    }
    /* Every rank receives first, then sends: without the group, a blocking
     * receive before a send deadlocks the ring. */
    memset(in, 0, sizeof(in));
    CHECK_OK("group: start", gs_group_start());
    CHECK_OK("group: recv", gs_recv(comm, in, 4, GS_DTYPE_I32, left, 40));
    CHECK_OK("group: send", gs_send(comm, out, 4, GS_DTYPE_I32, right, 40));
    CHECK_OK("group: end", gs_group_end());
    check((in[0] == left * 10) && (in[3] == left * 10 + 3), "group: ring data", "%d %d", in[0],
          in[3]);

    /* Nested: the inner end posts nothing, the outer end everything. */
    memset(in, 0, sizeof(in));
    CHECK_OK("nested: start 1", gs_group_start());
    CHECK_OK("nested: start 2", gs_group_start());
    CHECK_OK("nested: recv_status", gs_recv_status(comm, in, 4, GS_DTYPE_I32, left, 41, &st));
    CHECK_OK("nested: end 2", gs_group_end());
    check(st.source == -7, "nested: inner end", "the inner end completed a receive");
    s = gs_send(comm, out, 3, GS_DTYPE_I32, g_rank, 41);
    check(s == GS_ERR_INVALID_ARG, "nested: bad call validated", "send to self returned %s",
          gs_status_name(s));
    CHECK_OK("nested: send", gs_send(comm, out, 3, GS_DTYPE_I32, right, 41));
    CHECK_OK("nested: end 1", gs_group_end());
    check((st.source == left) && (st.count == 3) && (in[2] == left * 10 + 2), "nested: status",
          "source %d count %zu data %d", st.source, st.count, in[2]);

    /* The first error in call order, and every call still completes. */
    memset(in2, 0, sizeof(in2));
    CHECK_OK("group err: start", gs_group_start());
    CHECK_OK("group err: recv 1", gs_recv_status(comm, in, 2, GS_DTYPE_I32, left, 42, NULL));
    CHECK_OK("group err: recv 2", gs_recv(comm, in2, 4, GS_DTYPE_I32, left, 43));
    CHECK_OK("group err: send 1", gs_send(comm, out, 4, GS_DTYPE_I32, right, 42));
    CHECK_OK("group err: send 2", gs_send(comm, out, 4, GS_DTYPE_I32, right, 43));
    s = gs_group_end();
    check(s == GS_ERR_TRUNCATED, "group err: end", "returned %s, expected GS_ERR_TRUNCATED",
          gs_status_name(s));
    check(in2[3] == left * 10 + 3, "group err: later call", "the call after the error got %d",
          in2[3]);
    CHECK_OK("group err: comm alive", gs_barrier(comm));
}

static void test_reqs_dup(gs_comm_t comm)
{
    const int right = right_of(g_rank);
    const int left = left_of(g_rank);
    gs_comm_t dup = GS_COMM_NULL;
    gs_request_t reqs[3] = {GS_REQUEST_NULL, GS_REQUEST_NULL, GS_REQUEST_NULL};
    int32_t a_out = 1000 + g_rank;
    int32_t b_out = 2000 + g_rank;
    int32_t a_in = 0;
    int32_t b_in = 0;
    int idx = 7;
    int got[3] = {0, 0, 0};
    int dsize = 0;
    int drank = -1;
    gs_status_t s;

    s = gs_comm_dup(comm, &dup);
    check(s == GS_OK, "dup", "returned %s", gs_status_name(s));
    if (s != GS_OK) {
        return;
    }
    CHECK_OK("dup: rank", gs_comm_rank(dup, &drank));
    CHECK_OK("dup: size", gs_comm_size(dup, &dsize));
    check((drank == g_rank) && (dsize == g_world), "dup: ranks", "rank %d size %d", drank, dsize);

    /* waitany with nothing live. */
    CHECK_OK("waitany empty", gs_waitany(3, reqs, &idx));
    check(idx == -1, "waitany empty", "index %d", idx);
    CHECK_OK("testall empty", gs_testall(3, reqs));
    if (g_world >= 2) {
        /* Requests on two communicators, same peer and tag. */
        CHECK_OK("reqs: irecv world", gs_irecv(comm, &a_in, 1, GS_DTYPE_I32, left, 50, &reqs[0]));
        CHECK_OK("reqs: irecv dup", gs_irecv(dup, &b_in, 1, GS_DTYPE_I32, left, 50, &reqs[2]));
        s = gs_testall(3, reqs);
        check(s == GS_INPROGRESS, "testall pending", "returned %s before any send",
              gs_status_name(s));
        check((reqs[0] != GS_REQUEST_NULL) && (reqs[2] != GS_REQUEST_NULL), "testall pending",
              "released a request");
        CHECK_OK("reqs: barrier", gs_barrier(comm));
        /* The dup's message first: a crossing would land it in the world receive. */
        CHECK_OK("reqs: send dup", gs_send(dup, &b_out, 1, GS_DTYPE_I32, right, 50));
        CHECK_OK("reqs: send world", gs_send(comm, &a_out, 1, GS_DTYPE_I32, right, 50));
        for (int k = 0; k < 2; k++) {
            idx = 7;
            s = gs_waitany(3, reqs, &idx);
            check((s == GS_OK) && ((idx == 0) || (idx == 2)), "waitany", "returned %s index %d",
                  gs_status_name(s), idx);
            if ((idx == 0) || (idx == 2)) {
                check(reqs[idx] == GS_REQUEST_NULL, "waitany", "reqs[%d] not released", idx);
                got[idx]++;
            }
        }
        check((got[0] == 1) && (got[2] == 1), "waitany: each once", "%d %d", got[0], got[2]);
        check((a_in == 1000 + left) && (b_in == 2000 + left), "dup: isolation",
              "world got %d, dup got %d", (int)a_in, (int)b_in);

        /* Blocking, same tag both ways round: still no crossing. */
        CHECK_OK("dup: send dup", gs_send(dup, &b_out, 1, GS_DTYPE_I32, right, 60));
        CHECK_OK("dup: send world", gs_send(comm, &a_out, 1, GS_DTYPE_I32, right, 60));
        CHECK_OK("dup: recv world", gs_recv(comm, &a_in, 1, GS_DTYPE_I32, left, 60));
        CHECK_OK("dup: recv dup", gs_recv(dup, &b_in, 1, GS_DTYPE_I32, left, 60));
        check((a_in == 1000 + left) && (b_in == 2000 + left), "dup: isolation 2",
              "world got %d, dup got %d", (int)a_in, (int)b_in);

        /* waitany on one communicator (it sleeps on the worker's signal). */
        {
            int32_t c_in[2] = {0, 0};
            int32_t c_out[2] = {3000 + g_rank, 4000 + g_rank};
            int seen = 0;

            CHECK_OK("waitany one comm: irecv 70",
                     gs_irecv(comm, &c_in[0], 1, GS_DTYPE_I32, left, 70, &reqs[0]));
            CHECK_OK("waitany one comm: irecv 71",
                     gs_irecv(comm, &c_in[1], 1, GS_DTYPE_I32, left, 71, &reqs[2]));
            CHECK_OK("waitany one comm: send 71",
                     gs_send(comm, &c_out[1], 1, GS_DTYPE_I32, right, 71));
            CHECK_OK("waitany one comm: send 70",
                     gs_send(comm, &c_out[0], 1, GS_DTYPE_I32, right, 70));
            for (int k = 0; k < 2; k++) {
                idx = 7;
                s = gs_waitany(3, reqs, &idx);
                check((s == GS_OK) && ((idx == 0) || (idx == 2)), "waitany one comm",
                      "returned %s index %d", gs_status_name(s), idx);
                seen |= ((idx == 0) || (idx == 2)) ? (1 << idx) : 0;
            }
            check((seen == 5) && (c_in[0] == 3000 + left) && (c_in[1] == 4000 + left),
                  "waitany one comm: data", "seen %d, got %d %d", seen, (int)c_in[0], (int)c_in[1]);
        }

        /* testall when all are done releases them all. */
        CHECK_OK("testall: irecv", gs_irecv(dup, &b_in, 1, GS_DTYPE_I32, left, 61, &reqs[1]));
        CHECK_OK("testall: send", gs_send(dup, &b_out, 1, GS_DTYPE_I32, right, 61));
        s = GS_INPROGRESS;
        for (double t0 = tc_now_ms(); (s == GS_INPROGRESS) && (tc_now_ms() - t0 < 20000.0);) {
            s = gs_testall(3, reqs);
            if (s == GS_INPROGRESS) {
                nap_ms(1);
            }
        }
        check((s == GS_OK) && (reqs[1] == GS_REQUEST_NULL), "testall done", "returned %s",
              gs_status_name(s));
    }
    CHECK_OK("dup: allreduce", gs_allreduce(dup, &a_out, &a_in, 1, GS_DTYPE_I32, GS_OP_SUM));
    CHECK_OK("dup: destroy", gs_comm_destroy(dup));
}

/* ------------------------------------------------------------------ */
/* Fresh communicators from a gs_config_t                              */
/* ------------------------------------------------------------------ */

static int free_port(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    int port = -1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0) {
        return -1;
    }
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if ((bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0) &&
        (getsockname(fd, (struct sockaddr *)&a, &len) == 0)) {
        port = ntohs(a.sin_port);
    }
    close(fd);
    return port;
}

/* Rank 0's free port and pid, agreed over @p comm. */
static int agree_port(gs_comm_t comm, int32_t *pid_out)
{
    int32_t v[2] = {0, 0};

    if (g_rank == 0) {
        v[0] = free_port();
        v[1] = (int32_t)getpid();
    }
    if (gs_broadcast(comm, v, 2, GS_DTYPE_I32, 0) != GS_OK) {
        return -1;
    }
    *pid_out = v[1];
    return v[0];
}

static gs_status_t fresh_comm(gs_comm_t comm, gs_config_t *cfg, gs_comm_t *out)
{
    int32_t pid = 0;
    const int port = agree_port(comm, &pid);

    if (port <= 0) {
        return GS_ERR_SYSTEM;
    }
    cfg->rank = g_rank;
    cfg->world_size = g_world;
    cfg->master_port = port;
    return gs_comm_init_env(out, cfg);
}

static void test_timeout(gs_comm_t comm)
{
    gs_config_t cfg;
    gs_comm_t tc = GS_COMM_NULL;
    gs_p2p_status_t st = {-7, 0, 0};
    gs_status_t s;
    double t0;
    double ms;

    (void)gs_config_init(&cfg);
    cfg.timeout_ms = 300;
    s = fresh_comm(comm, &cfg, &tc);
    check(s == GS_OK, "timeout: init", "returned %s", gs_status_name(s));
    if (s != GS_OK) {
        return;
    }
    t0 = tc_now_ms();
    s = gs_probe(tc, GS_ANY_SOURCE, 99, GS_DTYPE_F32, &st);
    ms = tc_now_ms() - t0;
    check(s == GS_ERR_TIMEOUT, "timeout: probe", "returned %s, expected GS_ERR_TIMEOUT",
          gs_status_name(s));
    check((strstr(gs_last_error(), "tag 99") != NULL) &&
              (strstr(gs_last_error(), "gs_probe") != NULL),
          "timeout: message", "does not name gs_probe and the tag");
    check((ms >= 250.0) && (ms < 10000.0), "timeout: time", "took %.0f ms with a 300 ms deadline",
          ms);
    check(st.source == -7, "timeout: status", "status written on timeout");
    /* A probe consumes nothing: the communicator is not failed. */
    CHECK_OK("timeout: comm alive", gs_barrier(tc));
    CHECK_OK("timeout: destroy", gs_comm_destroy(tc));
}

static int file_has(const char *path, const char *needle)
{
    char line[4096];
    int found = 0;
    FILE *f = fopen(path, "r");

    if (f == NULL) {
        return -1;
    }
    while (!found && (fgets(line, sizeof(line), f) != NULL)) {
        found = (strstr(line, needle) != NULL);
    }
    fclose(f);
    return found;
}

static void test_config(gs_comm_t comm)
{
    char dir[128];
    char logtmpl[256];
    char log1[256];
    char log2[256];
    char stats[256];
    gs_config_t cfg;
    gs_comm_t c = GS_COMM_NULL;
    int32_t pid = 0;
    int32_t x = 1;
    int32_t y = 0;
    gs_status_t s;

    if (g_world < 2) {
        return;
    }
    /* A directory of rank 0's pid, so concurrent runs never share files. */
    if (agree_port(comm, &pid) <= 0) {
        check(0, "config: agree", "no port");
        return;
    }
    snprintf(dir, sizeof(dir), "/tmp/gs_p2p_api_%d", (int)pid);
    if (g_rank == 0) {
        char cmd[200];
        snprintf(cmd, sizeof(cmd), "mkdir -p %s", dir);
        if (system(cmd) != 0) {
            check(0, "config: mkdir", "%s", dir);
        }
    }
    CHECK_OK("config: barrier", gs_barrier(comm));

    /* shm = 1, INFO for NET into a file of our own: the log says "shared memory". */
    (void)gs_config_init(&cfg);
    cfg.shm = 1;
    cfg.debug = "INFO";
    cfg.debug_subsys = "NET";
    snprintf(logtmpl, sizeof(logtmpl), "%s/shm1_%%r.log", dir);
    cfg.debug_file = logtmpl;
    s = fresh_comm(comm, &cfg, &c);
    check(s == GS_OK, "config shm=1: init", "returned %s", gs_status_name(s));
    if (s == GS_OK) {
        CHECK_OK("config shm=1: allreduce", gs_allreduce(c, &x, &y, 1, GS_DTYPE_I32, GS_OP_SUM));
        CHECK_OK("config shm=1: destroy", gs_comm_destroy(c));
    }
    snprintf(log1, sizeof(log1), "%s/shm1_%d.log", dir, g_rank);
    s = (gs_status_t)file_has(log1, "through shared memory (2 x");
    if ((int)s == 1) {
        g_passed++;
    } else if (file_has(log1, "TCP") == 1) {
        printf("NOTE rank %d: shared memory unavailable here (%s says TCP); shm=1 not proven\n",
               g_rank, log1);
    } else {
        check(0, "config debug", "%s has no INFO NET line about shared memory (%d)", log1, (int)s);
    }

    /* shm = 0 with the same logging: no shared memory; stats_file from cfg. */
    (void)gs_config_init(&cfg);
    cfg.shm = 0;
    cfg.debug = "INFO";
    cfg.debug_subsys = "NET";
    snprintf(logtmpl, sizeof(logtmpl), "%s/shm0_%%r.log", dir);
    cfg.debug_file = logtmpl;
    snprintf(stats, sizeof(stats), "%s/stats_%%r.jsonl", dir);
    cfg.stats_file = stats;
    s = fresh_comm(comm, &cfg, &c);
    check(s == GS_OK, "config shm=0: init", "returned %s", gs_status_name(s));
    if (s == GS_OK) {
        CHECK_OK("config shm=0: allreduce", gs_allreduce(c, &x, &y, 1, GS_DTYPE_I32, GS_OP_SUM));
        CHECK_OK("config shm=0: destroy", gs_comm_destroy(c));
    }
    snprintf(log2, sizeof(log2), "%s/shm0_%d.log", dir, g_rank);
    check((file_has(log2, "through shared memory (2 x") == 0) &&
              (file_has(log2, "(0 through shared memory)") == 1),
          "config shm=0", "%s must say 0 peers through shared memory, and no pair", log2);
    snprintf(stats, sizeof(stats), "%s/stats_%d.jsonl", dir, g_rank);
    check(file_has(stats, "gradsync_stats") == 1, "config stats_file", "%s has no stats line",
          stats);

    /* A debug level that is not known fails the init before networking. */
    (void)gs_config_init(&cfg);
    cfg.rank = 0;
    cfg.world_size = 1;
    cfg.debug = "LOUD";
    c = GS_COMM_NULL;
    s = gs_comm_init(&c, &cfg);
    check(s == GS_ERR_INVALID_ARG, "config debug=LOUD", "returned %s", gs_status_name(s));
    if (s == GS_OK) {
        (void)gs_comm_destroy(c);
    }
    CHECK_OK("config: barrier 2", gs_barrier(comm));
    if (g_rank == 0) {
        char cmd[200];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        if (getenv("P2P_KEEP") == NULL) {
            (void)system(cmd);
        }
    }
}

int main(int argc, char **argv)
{
    gs_comm_t comm = GS_COMM_NULL;
    int64_t fails[2];
    int64_t total[2] = {0, 0};
    gs_status_t s;

    for (int i = 1; i < argc; i++) {
        if ((strcmp(argv[i], "--only") == 0) && (i + 1 < argc)) {
            g_only = argv[++i];
        } else {
            fprintf(stderr, "usage: p2p_api_check [--only NAME,NAME...]\n");
            return 2;
        }
    }
    s = gs_comm_init_env(&comm, NULL);
    if (s != GS_OK) {
        printf("FAIL p2p_api_check: gs_comm_init_env returned %s: %s\n", gs_status_name(s),
               gs_last_error());
        return 1;
    }
    gs_comm_rank(comm, &g_rank);
    gs_comm_size(comm, &g_world);
    if (g_world > 64) {
        printf("FAIL p2p_api_check: at most 64 ranks\n");
        return 2;
    }
    if (wanted("anysrc")) {
        test_anysrc(comm);
    }
    if (wanted("short")) {
        test_short_long(comm);
    }
    if (wanted("probe")) {
        test_probe(comm);
    }
    if (wanted("groups")) {
        test_groups(comm);
    }
    if (wanted("reqs")) {
        test_reqs_dup(comm);
    }
    if (wanted("timeout")) {
        test_timeout(comm);
    }
    if (wanted("config")) {
        test_config(comm);
    }
    fails[0] = g_failed;
    fails[1] = g_passed;
    s = gs_allreduce(comm, fails, total, 2, GS_DTYPE_I64, GS_OP_SUM);
    if (s != GS_OK) {
        printf("FAIL rank %d: final all-reduce returned %s: %s\n", g_rank, gs_status_name(s),
               gs_last_error());
        total[0] = g_failed + 1;
    }
    if (g_rank == 0) {
        printf("p2p_api_check: %lld passed, %lld failed (%d ranks)\n", (long long)total[1],
               (long long)total[0], g_world);
    }
    gs_comm_destroy(comm);
    return (total[0] == 0) ? 0 : 1;
}
