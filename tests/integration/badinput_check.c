/* SPDX-License-Identifier: Apache-2.0 */
/*
 * badinput_check: wrong calls against the public API, single- and
 * multi-rank. Every rank makes the same wrong calls, so each must fail
 * locally with the documented status (GS_ERR_INVALID_ARG for NULL handles
 * and buffers, byte sizes that overflow, unknown dtypes/ops/algorithms, avg
 * on integers, roots and peers out of range, bad configuration values) and
 * a gs_last_error() sentence that names the argument; outputs stay
 * unwritten, and the communicator keeps working afterwards. Modes:
 *
 *   badinput_check [args] [--verbose]   argument checks (under gsrun, any world size)
 *   badinput_check mismatch [--short-ms T] [--port2 P]
 *       world size 2: rank 0 calls gs_allreduce while rank 1 calls
 *       gs_broadcast (then: same call, different counts; then gs_allgatherv,
 *       gs_alltoallv and gs_reduce_scatterv whose count arrays disagree
 *       across the ranks, each rank in a way the other sees) on a communicator
 *       with a short deadline on port P (default: a free port rank 0 picks). Both
 *       must return an error: GS_ERR_MISMATCH expected, GS_ERR_TIMEOUT
 *       accepted and reported as such. A second communicator (the launcher's)
 *       keeps both ranks alive until both have their result.
 *   badinput_check init [--expect LIST]
 *       gs_comm_init_env only, for run_badinput.sh (world sizes that
 *       disagree, a rank taken twice); prints "INIT rank=R status=S ms=T err=..."
 *
 * Prints "N passed, M failed"; exit status 1 when any rank failed a check.
 */
#include <gradsync/gradsync.h>

#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check_report.h"
#include "tc_clock.h"

static int g_world = 1;
static const char *volatile g_current = "startup";

/* A crash names the check that caused it (async-signal-safe output only). */
static void on_crash(int sig)
{
    const char *msg = "\nFATAL badinput_check crashed in check: ";
    ssize_t rc = write(2, msg, strlen(msg));
    rc = write(2, g_current, strlen(g_current));
    rc = write(2, "\n", 1);
    (void)rc;
    signal(sig, SIG_DFL);
    raise(sig);
}

/*
 * Check that a call failed with @p want and that gs_last_error() is not
 * empty and contains @p word (case-insensitive; NULL = any sentence).
 */
static void expect_err(const char *label, gs_status_t got, gs_status_t want, const char *word)
{
    const char *err = gs_last_error();
    if (got != want) {
        fail(label, "returned %s, expected %s (last error: '%s')", gs_status_name(got),
             gs_status_name(want), err ? err : "(NULL)");
        return;
    }
    if (!err || !err[0]) {
        fail(label, "%s but gs_last_error() is empty", gs_status_name(got));
        return;
    }
    if (word && !strcasestr(err, word)) {
        fail(label, "gs_last_error() '%s' does not mention '%s'", err, word);
        return;
    }
    pass(label);
}

static void expect_ok(const char *label, gs_status_t got)
{
    if (got != GS_OK)
        fail(label, "returned %s: %s", gs_status_name(got), gs_last_error());
    else
        pass(label);
}

#define CHECK_ERR(_label, _call, _want, _word)                                                     \
    do {                                                                                           \
        g_current = (_label);                                                                      \
        expect_err((_label), (_call), (_want), (_word));                                           \
    } while (0)

static int env_int(const char *a, const char *b, int dflt)
{
    const char *s = getenv(a);
    if (!s)
        s = getenv(b);
    return s ? atoi(s) : dflt;
}

/* ------------------------------------------------------------------ */
/* Argument checks                                                     */
/* ------------------------------------------------------------------ */

static void check_null_comm(void)
{
    float a[8] = {0}, b[8] = {0};
    int r = 12345, s = 12345;
    gs_request_t req = (gs_request_t)&req;
    gs_comm_t sub = (gs_comm_t)&sub;
    gs_counters_t c = {.size = sizeof(gs_counters_t)};
    gs_status_t e = GS_OK;

    CHECK_ERR("null comm: gs_comm_rank", gs_comm_rank(GS_COMM_NULL, &r), GS_ERR_INVALID_ARG,
              "comm");
    CHECK_ERR("null comm: gs_comm_size", gs_comm_size(GS_COMM_NULL, &s), GS_ERR_INVALID_ARG,
              "comm");
    if (r != 12345 || s != 12345)
        fail("null comm: outputs", "rank/size outputs written on error (%d, %d)", r, s);
    CHECK_ERR("null comm: gs_allreduce",
              gs_allreduce(GS_COMM_NULL, a, b, 8, GS_DTYPE_F32, GS_OP_SUM), GS_ERR_INVALID_ARG,
              "comm");
    CHECK_ERR("null comm: gs_broadcast", gs_broadcast(GS_COMM_NULL, a, 8, GS_DTYPE_F32, 0),
              GS_ERR_INVALID_ARG, "comm");
    CHECK_ERR("null comm: gs_reduce", gs_reduce(GS_COMM_NULL, a, b, 8, GS_DTYPE_F32, GS_OP_SUM, 0),
              GS_ERR_INVALID_ARG, "comm");
    CHECK_ERR("null comm: gs_allgather", gs_allgather(GS_COMM_NULL, a, b, 1, GS_DTYPE_F32),
              GS_ERR_INVALID_ARG, "comm");
    CHECK_ERR("null comm: gs_reduce_scatter",
              gs_reduce_scatter(GS_COMM_NULL, a, b, 1, GS_DTYPE_F32, GS_OP_SUM), GS_ERR_INVALID_ARG,
              "comm");
    CHECK_ERR("null comm: gs_alltoall", gs_alltoall(GS_COMM_NULL, a, b, 1, GS_DTYPE_F32),
              GS_ERR_INVALID_ARG, "comm");
    CHECK_ERR("null comm: gs_barrier", gs_barrier(GS_COMM_NULL), GS_ERR_INVALID_ARG, "comm");
    CHECK_ERR("null comm: gs_send", gs_send(GS_COMM_NULL, a, 8, GS_DTYPE_F32, 0, 1),
              GS_ERR_INVALID_ARG, "comm");
    CHECK_ERR("null comm: gs_recv", gs_recv(GS_COMM_NULL, a, 8, GS_DTYPE_F32, 0, 1),
              GS_ERR_INVALID_ARG, "comm");
    CHECK_ERR("null comm: gs_iallreduce",
              gs_iallreduce(GS_COMM_NULL, a, b, 8, GS_DTYPE_F32, GS_OP_SUM, &req),
              GS_ERR_INVALID_ARG, "comm");
    CHECK_ERR("null comm: gs_ibarrier", gs_ibarrier(GS_COMM_NULL, &req), GS_ERR_INVALID_ARG,
              "comm");
    if (req != (gs_request_t)&req)
        fail("null comm: request output", "*req_out written although the call failed");
    CHECK_ERR("null comm: gs_comm_split", gs_comm_split(GS_COMM_NULL, 0, 0, &sub),
              GS_ERR_INVALID_ARG, "comm");
    if (sub != (gs_comm_t)&sub)
        fail("null comm: split output", "*newcomm_out written although the call failed");
    CHECK_ERR("null comm: gs_comm_counters", gs_comm_counters(GS_COMM_NULL, &c), GS_ERR_INVALID_ARG,
              "comm");
    CHECK_ERR("null comm: gs_comm_get_async_error", gs_comm_get_async_error(GS_COMM_NULL, &e),
              GS_ERR_INVALID_ARG, "comm");
    CHECK_ERR("null comm: gs_comm_abort", gs_comm_abort(GS_COMM_NULL), GS_ERR_INVALID_ARG, "comm");
}

static void check_null_outputs(gs_comm_t comm)
{
    float a[4] = {0};
    CHECK_ERR("null out: gs_comm_rank", gs_comm_rank(comm, NULL), GS_ERR_INVALID_ARG, NULL);
    CHECK_ERR("null out: gs_comm_size", gs_comm_size(comm, NULL), GS_ERR_INVALID_ARG, NULL);
    CHECK_ERR("null out: gs_comm_counters", gs_comm_counters(comm, NULL), GS_ERR_INVALID_ARG, NULL);
    CHECK_ERR("null out: gs_comm_get_async_error", gs_comm_get_async_error(comm, NULL),
              GS_ERR_INVALID_ARG, NULL);
    CHECK_ERR("null out: gs_iallreduce req",
              gs_iallreduce(comm, a, a, 4, GS_DTYPE_F32, GS_OP_SUM, NULL), GS_ERR_INVALID_ARG,
              "req");
    CHECK_ERR("null out: gs_ibarrier req", gs_ibarrier(comm, NULL), GS_ERR_INVALID_ARG, "req");
    CHECK_ERR("null out: gs_comm_split newcomm", gs_comm_split(comm, 0, 0, NULL),
              GS_ERR_INVALID_ARG, NULL);
    CHECK_ERR("null out: gs_wait", gs_wait(NULL), GS_ERR_INVALID_ARG, NULL);
    CHECK_ERR("null out: gs_test", gs_test(NULL), GS_ERR_INVALID_ARG, NULL);
    CHECK_ERR("null out: gs_waitall", gs_waitall(2, NULL), GS_ERR_INVALID_ARG, NULL);
    CHECK_ERR("null out: gs_config_init", gs_config_init(NULL), GS_ERR_INVALID_ARG, NULL);
    CHECK_ERR("null out: gs_comm_init", gs_comm_init(NULL, NULL), GS_ERR_INVALID_ARG, NULL);
    CHECK_ERR("null out: gs_comm_init_env", gs_comm_init_env(NULL, NULL), GS_ERR_INVALID_ARG, NULL);

    gs_request_t nreq = GS_REQUEST_NULL;
    g_current = "gs_wait(GS_REQUEST_NULL)";
    expect_ok("gs_wait(GS_REQUEST_NULL)", gs_wait(&nreq));
    g_current = "gs_test(GS_REQUEST_NULL)";
    gs_status_t st = gs_test(&nreq);
    if (st != GS_OK)
        fail("gs_test(GS_REQUEST_NULL)", "returned %s, expected GS_OK", gs_status_name(st));
    else
        pass("gs_test(GS_REQUEST_NULL)");
}

static void check_null_buffers(gs_comm_t comm)
{
    float a[64] = {0}, b[64] = {0};
    size_t n = 4;
    gs_request_t req = (gs_request_t)&req;
    CHECK_ERR("null buf: allreduce sendbuf",
              gs_allreduce(comm, NULL, b, n, GS_DTYPE_F32, GS_OP_SUM), GS_ERR_INVALID_ARG,
              "sendbuf");
    CHECK_ERR("null buf: allreduce recvbuf",
              gs_allreduce(comm, a, NULL, n, GS_DTYPE_F32, GS_OP_SUM), GS_ERR_INVALID_ARG,
              "recvbuf");
    CHECK_ERR("null buf: iallreduce sendbuf",
              gs_iallreduce(comm, NULL, b, n, GS_DTYPE_F32, GS_OP_SUM, &req), GS_ERR_INVALID_ARG,
              "sendbuf");
    if (req != (gs_request_t)&req)
        fail("null buf: request output", "*req_out written although the call failed");
    CHECK_ERR("null buf: broadcast buf", gs_broadcast(comm, NULL, n, GS_DTYPE_F32, 0),
              GS_ERR_INVALID_ARG, "buf");
    CHECK_ERR("null buf: ibroadcast buf", gs_ibroadcast(comm, NULL, n, GS_DTYPE_F32, 0, &req),
              GS_ERR_INVALID_ARG, "buf");
    CHECK_ERR("null buf: reduce sendbuf", gs_reduce(comm, NULL, b, n, GS_DTYPE_F32, GS_OP_SUM, 0),
              GS_ERR_INVALID_ARG, "sendbuf");
    if (g_world == 1)
        CHECK_ERR("null buf: reduce recvbuf on root",
                  gs_reduce(comm, a, NULL, n, GS_DTYPE_F32, GS_OP_SUM, 0), GS_ERR_INVALID_ARG,
                  "recvbuf");
    CHECK_ERR("null buf: allgather sendbuf", gs_allgather(comm, NULL, b, 1, GS_DTYPE_F32),
              GS_ERR_INVALID_ARG, "sendbuf");
    CHECK_ERR("null buf: allgather recvbuf", gs_allgather(comm, a, NULL, 1, GS_DTYPE_F32),
              GS_ERR_INVALID_ARG, "recvbuf");
    CHECK_ERR("null buf: reduce_scatter sendbuf",
              gs_reduce_scatter(comm, NULL, b, 1, GS_DTYPE_F32, GS_OP_SUM), GS_ERR_INVALID_ARG,
              "sendbuf");
    CHECK_ERR("null buf: reduce_scatter recvbuf",
              gs_reduce_scatter(comm, a, NULL, 1, GS_DTYPE_F32, GS_OP_SUM), GS_ERR_INVALID_ARG,
              "recvbuf");
    CHECK_ERR("null buf: alltoall sendbuf", gs_alltoall(comm, NULL, b, 1, GS_DTYPE_F32),
              GS_ERR_INVALID_ARG, "sendbuf");
    CHECK_ERR("null buf: alltoall recvbuf", gs_alltoall(comm, a, NULL, 1, GS_DTYPE_F32),
              GS_ERR_INVALID_ARG, "recvbuf");
    CHECK_ERR("null buf: send", gs_send(comm, NULL, n, GS_DTYPE_F32, 0, 7), GS_ERR_INVALID_ARG,
              "buf");
    CHECK_ERR("null buf: recv", gs_recv(comm, NULL, n, GS_DTYPE_F32, 0, 7), GS_ERR_INVALID_ARG,
              "buf");
    CHECK_ERR("null buf: isend", gs_isend(comm, NULL, n, GS_DTYPE_F32, 0, 7, &req),
              GS_ERR_INVALID_ARG, "buf");
    CHECK_ERR("null buf: irecv", gs_irecv(comm, NULL, n, GS_DTYPE_F32, 0, 7, &req),
              GS_ERR_INVALID_ARG, "buf");
    if (req != (gs_request_t)&req)
        fail("null buf: request output", "*req_out written although the call failed");

    /* count 0 with NULL buffers is valid (collective: every rank calls). */
    g_current = "count 0: allreduce NULL";
    expect_ok("count 0: allreduce NULL",
              gs_allreduce(comm, NULL, NULL, 0, GS_DTYPE_F32, GS_OP_SUM));
    g_current = "count 0: broadcast NULL";
    expect_ok("count 0: broadcast NULL", gs_broadcast(comm, NULL, 0, GS_DTYPE_F64, 0));
}

static void check_overflow(gs_comm_t comm)
{
    /* Valid, tiny buffers: the library must reject the size before touching them. */
    static float a[16], b[16];
    gs_request_t req = GS_REQUEST_NULL;
    const size_t huge = SIZE_MAX / 2;
    const size_t quarter = SIZE_MAX / 4 + 1; /* quarter * 4 wraps to 0 */
    CHECK_ERR("overflow: allreduce SIZE_MAX/2",
              gs_allreduce(comm, a, b, huge, GS_DTYPE_F32, GS_OP_SUM), GS_ERR_INVALID_ARG, NULL);
    CHECK_ERR("overflow: allreduce (SIZE_MAX/4+1)*4 wraps to 0",
              gs_allreduce(comm, a, b, quarter, GS_DTYPE_F32, GS_OP_SUM), GS_ERR_INVALID_ARG, NULL);
    CHECK_ERR("overflow: allreduce f64 SIZE_MAX/8+1",
              gs_allreduce(comm, a, b, SIZE_MAX / 8 + 1, GS_DTYPE_F64, GS_OP_SUM),
              GS_ERR_INVALID_ARG, NULL);
    CHECK_ERR("overflow: iallreduce SIZE_MAX/2",
              gs_iallreduce(comm, a, b, huge, GS_DTYPE_F32, GS_OP_SUM, &req), GS_ERR_INVALID_ARG,
              NULL);
    CHECK_ERR("overflow: broadcast SIZE_MAX/2", gs_broadcast(comm, a, huge, GS_DTYPE_F32, 0),
              GS_ERR_INVALID_ARG, NULL);
    CHECK_ERR("overflow: reduce SIZE_MAX/2",
              gs_reduce(comm, a, b, huge, GS_DTYPE_F32, GS_OP_SUM, 0), GS_ERR_INVALID_ARG, NULL);
    CHECK_ERR("overflow: allgather SIZE_MAX/2", gs_allgather(comm, a, b, huge, GS_DTYPE_I8),
              GS_ERR_INVALID_ARG, NULL);
    if (g_world > 1)
        CHECK_ERR("overflow: allgather count*world",
                  gs_allgather(comm, a, b, SIZE_MAX / (size_t)g_world + 1, GS_DTYPE_U8),
                  GS_ERR_INVALID_ARG, NULL);
    CHECK_ERR("overflow: reduce_scatter SIZE_MAX/2",
              gs_reduce_scatter(comm, a, b, huge, GS_DTYPE_F32, GS_OP_SUM), GS_ERR_INVALID_ARG,
              NULL);
    CHECK_ERR("overflow: alltoall SIZE_MAX/2", gs_alltoall(comm, a, b, huge, GS_DTYPE_F32),
              GS_ERR_INVALID_ARG, NULL);
    CHECK_ERR("overflow: send SIZE_MAX/2", gs_send(comm, a, huge, GS_DTYPE_F32, 0, 9),
              GS_ERR_INVALID_ARG, NULL);
    CHECK_ERR("overflow: recv SIZE_MAX/2", gs_recv(comm, a, huge, GS_DTYPE_F32, 0, 9),
              GS_ERR_INVALID_ARG, NULL);
}

static void check_types(gs_comm_t comm)
{
    float a[8] = {0}, b[8 * 64] = {0};
    gs_request_t req = GS_REQUEST_NULL;
    const gs_dtype_t bad_dt = (gs_dtype_t)99;
    const gs_op_t bad_op = (gs_op_t)99;
    CHECK_ERR("dtype 99: allreduce", gs_allreduce(comm, a, b, 2, bad_dt, GS_OP_SUM),
              GS_ERR_INVALID_ARG, "dtype");
    CHECK_ERR("dtype -1: allreduce", gs_allreduce(comm, a, b, 2, (gs_dtype_t)-1, GS_OP_SUM),
              GS_ERR_INVALID_ARG, "dtype");
    CHECK_ERR("dtype COUNT: allreduce", gs_allreduce(comm, a, b, 2, GS_DTYPE_COUNT, GS_OP_SUM),
              GS_ERR_INVALID_ARG, "dtype");
    CHECK_ERR("dtype 99: iallreduce", gs_iallreduce(comm, a, b, 2, bad_dt, GS_OP_SUM, &req),
              GS_ERR_INVALID_ARG, "dtype");
    CHECK_ERR("dtype 99: broadcast", gs_broadcast(comm, a, 2, bad_dt, 0), GS_ERR_INVALID_ARG,
              "dtype");
    CHECK_ERR("dtype 99: allgather", gs_allgather(comm, a, b, 1, bad_dt), GS_ERR_INVALID_ARG,
              "dtype");
    CHECK_ERR("dtype 99: alltoall", gs_alltoall(comm, a, b, 1, bad_dt), GS_ERR_INVALID_ARG,
              "dtype");
    CHECK_ERR("dtype 99: send", gs_send(comm, a, 1, bad_dt, 0, 3), GS_ERR_INVALID_ARG, "dtype");
    CHECK_ERR("op 99: allreduce", gs_allreduce(comm, a, b, 2, GS_DTYPE_F32, bad_op),
              GS_ERR_INVALID_ARG, "op");
    CHECK_ERR("op -1: allreduce", gs_allreduce(comm, a, b, 2, GS_DTYPE_F32, (gs_op_t)-1),
              GS_ERR_INVALID_ARG, "op");
    CHECK_ERR("op 99: reduce", gs_reduce(comm, a, b, 2, GS_DTYPE_F32, bad_op, 0),
              GS_ERR_INVALID_ARG, "op");
    CHECK_ERR("op 99: reduce_scatter", gs_reduce_scatter(comm, a, b, 1, GS_DTYPE_F32, bad_op),
              GS_ERR_INVALID_ARG, "op");
    CHECK_ERR("avg on i32: allreduce", gs_allreduce(comm, a, b, 2, GS_DTYPE_I32, GS_OP_AVG),
              GS_ERR_INVALID_ARG, "avg");
    CHECK_ERR("avg on u8: allreduce", gs_allreduce(comm, a, b, 2, GS_DTYPE_U8, GS_OP_AVG),
              GS_ERR_INVALID_ARG, "avg");
    CHECK_ERR("avg on i64: iallreduce", gs_iallreduce(comm, a, b, 2, GS_DTYPE_I64, GS_OP_AVG, &req),
              GS_ERR_INVALID_ARG, "avg");
    CHECK_ERR("avg on i8: reduce", gs_reduce(comm, a, b, 2, GS_DTYPE_I8, GS_OP_AVG, 0),
              GS_ERR_INVALID_ARG, "avg");
    CHECK_ERR("avg on i32: reduce_scatter",
              gs_reduce_scatter(comm, a, b, 1, GS_DTYPE_I32, GS_OP_AVG), GS_ERR_INVALID_ARG, "avg");

    gs_allreduce_opts_t o = GS_ALLREDUCE_OPTS_INIT;
    o.algo = (gs_algo_t)99;
    /* Not an algorithm at all: INVALID_ARG (UNSUPPORTED is for a real one). */
    g_current = "algo 99: allreduce_ex";
    gs_status_t st = gs_allreduce_ex(comm, a, b, 2, GS_DTYPE_F32, GS_OP_SUM, &o);
    expect_err("algo 99: allreduce_ex", st, GS_ERR_INVALID_ARG, "algo");
}

static void check_ranges(gs_comm_t comm)
{
    float a[8] = {0}, b[8] = {0};
    gs_request_t req = GS_REQUEST_NULL;
    int w = g_world;
    CHECK_ERR("root = world: broadcast", gs_broadcast(comm, a, 2, GS_DTYPE_F32, w),
              GS_ERR_INVALID_ARG, "root");
    CHECK_ERR("root = -1: broadcast", gs_broadcast(comm, a, 2, GS_DTYPE_F32, -1),
              GS_ERR_INVALID_ARG, "root");
    CHECK_ERR("root = world: ibroadcast", gs_ibroadcast(comm, a, 2, GS_DTYPE_F32, w, &req),
              GS_ERR_INVALID_ARG, "root");
    CHECK_ERR("root = world: reduce", gs_reduce(comm, a, b, 2, GS_DTYPE_F32, GS_OP_SUM, w),
              GS_ERR_INVALID_ARG, "root");
    CHECK_ERR("root = INT_MIN: reduce",
              gs_reduce(comm, a, b, 2, GS_DTYPE_F32, GS_OP_SUM, -2147483647 - 1),
              GS_ERR_INVALID_ARG, "root");
    CHECK_ERR("peer = world: send", gs_send(comm, a, 2, GS_DTYPE_F32, w, 1), GS_ERR_INVALID_ARG,
              "peer");
    CHECK_ERR("peer = ANY_SOURCE: send", gs_send(comm, a, 2, GS_DTYPE_F32, GS_ANY_SOURCE, 1),
              GS_ERR_INVALID_ARG, "peer");
    CHECK_ERR("peer = world: isend", gs_isend(comm, a, 2, GS_DTYPE_F32, w, 1, &req),
              GS_ERR_INVALID_ARG, "peer");
    CHECK_ERR("peer = world: recv", gs_recv(comm, a, 2, GS_DTYPE_F32, w, 1), GS_ERR_INVALID_ARG,
              "peer");
    CHECK_ERR("peer = -2: recv", gs_recv(comm, a, 2, GS_DTYPE_F32, -2, 1), GS_ERR_INVALID_ARG,
              "peer");
    CHECK_ERR("peer = world+5: irecv", gs_irecv(comm, a, 2, GS_DTYPE_F32, w + 5, 1, &req),
              GS_ERR_INVALID_ARG, "peer");
}

/* Bad configuration values fail in gs_comm_init before any networking. */
static void check_config(int port)
{
    struct {
        const char *label;
        const char *word;
        int field;
        int value;
    } cases[] = {
        {"config: rank >= world_size", "rank", 0, 5},
        {"config: rank -3", "rank", 0, -3},
        {"config: world_size 0", "world", 1, 0},
        {"config: timeout_ms -5", "timeout", 2, -5},
        {"config: tcp_nsocks 99", "nsocks", 3, 99},
        {"config: slice_bytes 1", "slice", 4, 1},
        {"config: master_port 70000", "port", 5, 70000},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gs_config_t cfg;
        if (gs_config_init(&cfg) != GS_OK) {
            fail(cases[i].label, "gs_config_init failed: %s", gs_last_error());
            return;
        }
        cfg.rank = 0;
        cfg.world_size = 2;
        cfg.local_rank = 0; /* not the launcher's GS_LOCAL_RANK */
        cfg.master_addr = "127.0.0.1";
        cfg.master_port = port;
        cfg.timeout_ms = 2000;
        switch (cases[i].field) {
        case 0:
            cfg.rank = cases[i].value;
            break;
        case 1:
            cfg.world_size = cases[i].value;
            break;
        case 2:
            cfg.timeout_ms = cases[i].value;
            break;
        case 3:
            cfg.tcp_nsocks = cases[i].value;
            break;
        case 4:
            cfg.slice_bytes = cases[i].value;
            break;
        default:
            cfg.master_port = cases[i].value;
            break;
        }
        gs_comm_t c = (gs_comm_t)&c;
        double t0 = tc_now_ms();
        CHECK_ERR(cases[i].label, gs_comm_init(&c, &cfg), GS_ERR_INVALID_ARG, cases[i].word);
        double ms = tc_now_ms() - t0;
        if (c != (gs_comm_t)&c)
            fail(cases[i].label, "*comm_out written although init failed");
        if (ms > 1000.0)
            fail(cases[i].label, "took %.0f ms: the value must be rejected before networking", ms);
    }

    gs_config_t cfg;
    (void)gs_config_init(&cfg);
    cfg.rank = 0;
    cfg.world_size = 1;
    cfg.local_rank = 0;
    cfg.master_port = port;
    cfg.timeout_ms = 2000;
    cfg.transport = "carrier-pigeon";
    gs_comm_t c = GS_COMM_NULL;
    g_current = "config: unknown transport";
    gs_status_t st = gs_comm_init(&c, &cfg);
    if (st == GS_ERR_INVALID_ARG || st == GS_ERR_UNSUPPORTED)
        pass("config: unknown transport");
    else
        fail("config: unknown transport",
             "returned %s, expected GS_ERR_INVALID_ARG or "
             "GS_ERR_UNSUPPORTED",
             gs_status_name(st));
    if (st == GS_OK)
        (void)gs_comm_destroy(c);

    /* A bad environment value is rejected naming the variable. */
    cfg.transport = NULL;
    setenv("GS_TCP_NSOCKS", "lots", 1);
    c = GS_COMM_NULL;
    g_current = "env: GS_TCP_NSOCKS=lots";
    st = gs_comm_init(&c, &cfg);
    expect_err("env: GS_TCP_NSOCKS=lots", st, GS_ERR_INVALID_ARG, "GS_TCP_NSOCKS");
    if (st == GS_OK)
        (void)gs_comm_destroy(c);
    unsetenv("GS_TCP_NSOCKS");

    /* The same single-rank config, valid, works. */
    c = GS_COMM_NULL;
    g_current = "config: valid single rank";
    st = gs_comm_init(&c, &cfg);
    if (st != GS_OK) {
        fail("config: valid single rank", "gs_comm_init returned %s: %s", gs_status_name(st),
             gs_last_error());
        return;
    }
    double x = 2.5, y = 0;
    st = gs_allreduce(c, &x, &y, 1, GS_DTYPE_F64, GS_OP_SUM);
    if (st != GS_OK || y != 2.5)
        fail("config: valid single rank", "allreduce returned %s, value %g", gs_status_name(st), y);
    else
        pass("config: valid single rank");
    expect_ok("config: destroy single rank", gs_comm_destroy(c));
}

static void check_status_api(void)
{
    struct {
        gs_status_t st;
        gs_status_scope_t scope;
    } rows[] = {
        {GS_OK, GS_SCOPE_NONE},
        {GS_INPROGRESS, GS_SCOPE_NONE},
        {GS_ERR_INVALID_ARG, GS_SCOPE_ARGUMENT},
        {GS_ERR_NO_MEMORY, GS_SCOPE_RESOURCE},
        {GS_ERR_PEER_FAILED, GS_SCOPE_PEER},
        {GS_ERR_TIMEOUT, GS_SCOPE_PEER},
        {GS_ERR_MISMATCH, GS_SCOPE_PEER},
        {GS_ERR_ABORTED, GS_SCOPE_COMM},
        {GS_ERR_INTERNAL, GS_SCOPE_INTERNAL},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const char *name = gs_status_name(rows[i].st);
        if (gs_status_scope(rows[i].st) != rows[i].scope)
            fail("status: scope", "%s has scope %d, expected %d", name,
                 (int)gs_status_scope(rows[i].st), (int)rows[i].scope);
        else
            pass("status: scope");
    }
    const char *s = gs_strerror((gs_status_t)12345);
    if (!s || strcmp(s, "unknown status") != 0)
        fail("status: unknown code", "gs_strerror(12345) = '%s'", s ? s : "(NULL)");
    else
        pass("status: unknown code");
    if (!gs_status_name((gs_status_t)-9999))
        fail("status: unknown name", "gs_status_name(-9999) returned NULL");
    else
        pass("status: unknown name");
}

/* ------------------------------------------------------------------ */
/* Rooted and variable-size collectives, bitwise ops                   */
/* ------------------------------------------------------------------ */

#define VMAX 64 /* largest world these checks run at */
#define VSENT 0x5a5a5a5au

/* recvbuf still holds the sentinel everywhere (a refused call wrote nothing). */
static void expect_untouched(const char *label, const uint32_t *buf, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (buf[i] != VSENT) {
            fail(label, "element %zu of the output was written (0x%08x) by a refused call", i,
                 (unsigned)buf[i]);
            return;
        }
    pass(label);
}

static void check_vcalls(gs_comm_t comm)
{
    const int w = g_world, me = g_rank;
    static uint32_t send[8 * VMAX], recv[8 * VMAX];
    size_t counts[VMAX], counts2[VMAX], displs[VMAX], displs2[VMAX];
    gs_request_t req = (gs_request_t)&req;
    const gs_request_t req0 = req;
    char label[128];

    if (w > VMAX) {
        printf("NOTE rank %d: v-call checks skipped above %d ranks\n", me, VMAX);
        return;
    }
    for (size_t i = 0; i < 8 * VMAX; i++) {
        send[i] = (uint32_t)i;
        recv[i] = VSENT;
    }
    for (int j = 0; j < w; j++) {
        counts[j] = 2;
        displs[j] = 2 * (size_t)j;
    }

    /* Root out of range. */
    CHECK_ERR("root = world: gather", gs_gather(comm, send, recv, 2, GS_DTYPE_I32, w),
              GS_ERR_INVALID_ARG, "root");
    CHECK_ERR("root = -1: scatter", gs_scatter(comm, send, recv, 2, GS_DTYPE_I32, -1),
              GS_ERR_INVALID_ARG, "root");
    CHECK_ERR("root = world: igather", gs_igather(comm, send, recv, 2, GS_DTYPE_I32, w, &req),
              GS_ERR_INVALID_ARG, "root");
    if (req != req0)
        fail("root = world: igather", "req_out written although the call was refused");
    CHECK_ERR("root = world+3: scatter_ex",
              gs_scatter_ex(comm, send, recv, 2, GS_DTYPE_I32, w + 3, NULL), GS_ERR_INVALID_ARG,
              "root");
    /* NULL buffers with a nonzero count. */
    CHECK_ERR("NULL sendbuf: gather", gs_gather(comm, NULL, recv, 2, GS_DTYPE_I32, 0),
              GS_ERR_INVALID_ARG, "sendbuf");
    CHECK_ERR("NULL recvbuf: scatter", gs_scatter(comm, send, NULL, 2, GS_DTYPE_I32, 0),
              GS_ERR_INVALID_ARG, "recvbuf");
    CHECK_ERR("NULL sendbuf: allgatherv",
              gs_allgatherv(comm, NULL, 2, recv, 2 * (size_t)w, counts, NULL, GS_DTYPE_I32),
              GS_ERR_INVALID_ARG, "sendbuf");
    CHECK_ERR("NULL recvbuf: allgatherv",
              gs_allgatherv(comm, send, 2, NULL, 2 * (size_t)w, counts, NULL, GS_DTYPE_I32),
              GS_ERR_INVALID_ARG, "recvbuf");
    /* NULL arrays. */
    CHECK_ERR("NULL recvcounts: allgatherv",
              gs_allgatherv(comm, send, 2, recv, 2 * (size_t)w, NULL, NULL, GS_DTYPE_I32),
              GS_ERR_INVALID_ARG, "recvcounts");
    CHECK_ERR("NULL sendcounts: alltoallv",
              gs_alltoallv(comm, send, 2 * (size_t)w, NULL, NULL, recv, 2 * (size_t)w, counts, NULL,
                           GS_DTYPE_I32),
              GS_ERR_INVALID_ARG, "sendcounts");
    CHECK_ERR("NULL recvcounts: ireduce_scatterv",
              gs_ireduce_scatterv(comm, send, recv, NULL, GS_DTYPE_I32, GS_OP_SUM, &req),
              GS_ERR_INVALID_ARG, "recvcounts");
    /* Negative counts and displacements, named as such with the rank index. */
    memcpy(counts2, counts, sizeof(counts));
    counts2[w - 1] = (size_t)-3;
    snprintf(label, sizeof(label), "recvcounts[%d] = -3: allgatherv", w - 1);
    CHECK_ERR(label,
              gs_allgatherv(comm, send, me == w - 1 ? (size_t)-3 : 2, recv, 8 * (size_t)w, counts2,
                            NULL, GS_DTYPE_I32),
              GS_ERR_INVALID_ARG, "negative");
    snprintf(label, sizeof(label), "recvcounts[%d] = -3: reduce_scatterv (names the index)", w - 1);
    g_current = label;
    {
        gs_status_t st = gs_reduce_scatterv(comm, send, recv, counts2, GS_DTYPE_I32, GS_OP_SUM);
        char idx[32];
        snprintf(idx, sizeof(idx), "[%d]", w - 1);
        expect_err(label, st, GS_ERR_INVALID_ARG, idx);
    }
    memcpy(displs2, displs, sizeof(displs));
    displs2[0] = (size_t)-1;
    CHECK_ERR(
        "displs[0] = -1: iallgatherv",
        gs_iallgatherv(comm, send, 2, recv, 8 * (size_t)w, counts, displs2, GS_DTYPE_I32, &req),
        GS_ERR_INVALID_ARG, "negative");
    CHECK_ERR("sdispls[0] = -1: alltoallv",
              gs_alltoallv(comm, send, 8 * (size_t)w, counts, displs2, recv, 8 * (size_t)w, counts,
                           displs, GS_DTYPE_I32),
              GS_ERR_INVALID_ARG, "negative");
    CHECK_ERR("recvbuf_count = -1: allgatherv",
              gs_allgatherv(comm, send, 2, recv, (size_t)-1, counts, NULL, GS_DTYPE_I32),
              GS_ERR_INVALID_ARG, "negative");
    /* Byte sizes that overflow. */
    memcpy(counts2, counts, sizeof(counts));
    counts2[0] = (size_t)1 << 62;
    CHECK_ERR("recvcounts[0] = 2^62: reduce_scatterv",
              gs_reduce_scatterv(comm, send, recv, counts2, GS_DTYPE_I64, GS_OP_SUM),
              GS_ERR_INVALID_ARG, "overflows");
    CHECK_ERR("gather count 2^61", gs_gather(comm, send, recv, (size_t)1 << 61, GS_DTYPE_I32, 0),
              GS_ERR_INVALID_ARG, "overflows");
    /* A block past the stated capacity. */
    CHECK_ERR("block past recvbuf_count: allgatherv",
              gs_allgatherv(comm, send, 2, recv, 2 * (size_t)w - 1, counts, NULL, GS_DTYPE_I32),
              GS_ERR_INVALID_ARG, "recvbuf_count");
    CHECK_ERR("block past sendbuf_count: alltoallv",
              gs_alltoallv(comm, send, 2 * (size_t)w - 1, counts, displs, recv, 2 * (size_t)w,
                           counts, displs, GS_DTYPE_I32),
              GS_ERR_INVALID_ARG, "sendbuf_count");
    CHECK_ERR("block past recvbuf_count: ialltoallv",
              gs_ialltoallv(comm, send, 2 * (size_t)w, counts, displs, recv, 1, counts, displs,
                            GS_DTYPE_I32, &req),
              GS_ERR_INVALID_ARG, "recvbuf_count");
    /* Overlapping blocks in one receive buffer (needs two blocks). */
    if (w > 1) {
        memcpy(displs2, displs, sizeof(displs));
        displs2[w - 1] = displs2[w - 2] + 1;
        CHECK_ERR("overlapping displs: allgatherv",
                  gs_allgatherv(comm, send, 2, recv, 8 * (size_t)w, counts, displs2, GS_DTYPE_I32),
                  GS_ERR_INVALID_ARG, "overlap");
        CHECK_ERR("overlapping rdispls: alltoallv",
                  gs_alltoallv(comm, send, 8 * (size_t)w, counts, displs, recv, 8 * (size_t)w,
                               counts, displs2, GS_DTYPE_I32),
                  GS_ERR_INVALID_ARG, "overlap");
    }
    /* This rank's own block disagrees with its own arguments. */
    CHECK_ERR("recvcounts[rank] != sendcount: allgatherv",
              gs_allgatherv(comm, send, 3, recv, 8 * (size_t)w, counts, NULL, GS_DTYPE_I32),
              GS_ERR_INVALID_ARG, "sendcount");
    memcpy(counts2, counts, sizeof(counts));
    counts2[me] = 1;
    CHECK_ERR("sendcounts[rank] != recvcounts[rank]: alltoallv",
              gs_alltoallv(comm, send, 8 * (size_t)w, counts2, NULL, recv, 8 * (size_t)w, counts,
                           NULL, GS_DTYPE_I32),
              GS_ERR_INVALID_ARG, "recvcounts");
    CHECK_ERR("sendbuf overlaps recvbuf: alltoallv",
              gs_alltoallv(comm, recv, 2 * (size_t)w, counts, NULL, recv + 1, 2 * (size_t)w, counts,
                           NULL, GS_DTYPE_I32),
              GS_ERR_INVALID_ARG, "overlap");
    /* Bitwise ops on float dtypes, everywhere an op is taken. */
    CHECK_ERR("band on f32: allreduce", gs_allreduce(comm, send, recv, 2, GS_DTYPE_F32, GS_OP_BAND),
              GS_ERR_INVALID_ARG, "bitwise op band needs an integer dtype, not f32");
    CHECK_ERR("bor on f64: reduce", gs_reduce(comm, send, recv, 1, GS_DTYPE_F64, GS_OP_BOR, 0),
              GS_ERR_INVALID_ARG, "integer dtype");
    CHECK_ERR("bxor on bf16: reduce_scatter",
              gs_reduce_scatter(comm, send, recv, 1, GS_DTYPE_BF16, GS_OP_BXOR), GS_ERR_INVALID_ARG,
              "bitwise");
    CHECK_ERR("band on f16: reduce_scatterv",
              gs_reduce_scatterv(comm, send, recv, counts, GS_DTYPE_F16, GS_OP_BAND),
              GS_ERR_INVALID_ARG, "bitwise");
    CHECK_ERR("bor on f32: iallreduce",
              gs_iallreduce(comm, send, recv, 2, GS_DTYPE_F32, GS_OP_BOR, &req), GS_ERR_INVALID_ARG,
              "bitwise");
    if (req != req0)
        fail("v calls: req_out", "req_out written by a refused non-blocking call");
    expect_untouched("v calls: nothing written by refused calls", recv, 8 * VMAX);

    /* The same arrays, correct: the calls work (and a bitwise op on an integer dtype). */
    {
        uint32_t mine[2] = {(uint32_t)(me + 1), 0xf0u | (uint32_t)me};
        uint32_t all[2 * VMAX];
        int ok = 1;
        g_current = "v calls: allgatherv works";
        gs_status_t st =
            gs_allgatherv(comm, mine, 2, all, 2 * (size_t)w, counts, NULL, GS_DTYPE_I32);
        for (int j = 0; st == GS_OK && j < w; j++)
            ok &= all[2 * j] == (uint32_t)(j + 1);
        if (st != GS_OK || !ok)
            fail("v calls: allgatherv works", "%s: %s", gs_status_name(st), gs_last_error());
        else
            pass("v calls: allgatherv works");
        uint32_t x = 0xffu ^ (1u << (me % 8)), y = 0;
        g_current = "v calls: band on i32 works";
        st = gs_allreduce(comm, &x, &y, 1, GS_DTYPE_I32, GS_OP_BAND);
        uint32_t want = 0xffu;
        for (int j = 0; j < w; j++)
            want &= 0xffu ^ (1u << (j % 8));
        if (st != GS_OK || y != want)
            fail("v calls: band on i32 works", "%s, got 0x%x want 0x%x", gs_status_name(st),
                 (unsigned)y, (unsigned)want);
        else
            pass("v calls: band on i32 works");
    }
}

/* After all the errors above the communicator still works and is not failed. */
static void check_still_works(gs_comm_t comm, const char *label)
{
    int64_t v[3] = {g_rank + 1, 1, -g_rank}, out[3] = {0, 0, 0};
    int64_t w = g_world;
    gs_status_t e = GS_ERR_INTERNAL;
    g_current = label;
    gs_status_t st = gs_comm_get_async_error(comm, &e);
    if (st != GS_OK || e != GS_OK)
        fail(label, "async error is %s (call %s): argument errors must not be sticky",
             gs_status_name(e), gs_status_name(st));
    st = gs_allreduce(comm, v, out, 3, GS_DTYPE_I64, GS_OP_SUM);
    if (st != GS_OK)
        fail(label, "gs_allreduce returned %s: %s", gs_status_name(st), gs_last_error());
    else if (out[0] != w * (w + 1) / 2 || out[1] != w || out[2] != -(w * (w - 1) / 2))
        fail(label, "gs_allreduce gave %lld %lld %lld", (long long)out[0], (long long)out[1],
             (long long)out[2]);
    else
        pass(label);
}

/* gs_comm_abort on a duplicate: later calls give GS_ERR_ABORTED; the parent is unharmed. */
static void check_abort(gs_comm_t comm)
{
    gs_comm_t dup = GS_COMM_NULL;
    g_current = "abort";
    gs_status_t st = gs_comm_split(comm, 0, g_rank, &dup);
    if (st != GS_OK) {
        fail("abort: split", "returned %s: %s", gs_status_name(st), gs_last_error());
        return;
    }
    /* Every rank's split must be complete before one aborts the duplicate:
     * an abort closes its connections, which fails a peer still finishing
     * the split's setup (rightly; this test is about later calls). */
    expect_ok("abort: barrier after the split", gs_barrier(comm));
    expect_ok("abort: gs_comm_abort", gs_comm_abort(dup));
    float x = 1, y = 0;
    CHECK_ERR("abort: allreduce after abort", gs_allreduce(dup, &x, &y, 1, GS_DTYPE_F32, GS_OP_SUM),
              GS_ERR_ABORTED, NULL);
    gs_status_t e = GS_OK;
    if (gs_comm_get_async_error(dup, &e) != GS_OK || e != GS_ERR_ABORTED)
        fail("abort: async error", "is %s, expected GS_ERR_ABORTED", gs_status_name(e));
    else
        pass("abort: async error");
    (void)gs_comm_destroy(dup);
    pass("abort: destroy returned");
}

static int finish(gs_comm_t comm, const char *prog)
{
    int64_t mine[2] = {g_passed, g_failed}, tot[2] = {0, 0};
    gs_status_t st = gs_allreduce(comm, mine, tot, 2, GS_DTYPE_I64, GS_OP_SUM);
    int rc;
    if (st != GS_OK) {
        printf("%s rank %d: could not agree on the result (%s): %ld passed, %ld failed\n", prog,
               g_rank, gs_status_name(st), g_passed, g_failed);
        rc = 1;
    } else {
        if (g_rank == 0)
            printf("%s world=%d: %lld passed, %lld failed (checks summed over ranks)\n", prog,
                   g_world, (long long)tot[0], (long long)tot[1]);
        rc = tot[1] ? 1 : 0;
    }
    (void)gs_comm_destroy(comm);
    return rc;
}

static int run_args(gs_comm_t comm)
{
    int port = env_int("GS_MASTER_PORT", "MASTER_PORT", 29500);
    check_status_api();
    check_null_comm();
    check_still_works(comm, "works after null-comm errors");
    check_null_outputs(comm);
    check_null_buffers(comm);
    check_still_works(comm, "works after null-buffer errors");
    check_overflow(comm);
    check_still_works(comm, "works after overflow errors");
    check_types(comm);
    check_ranges(comm);
    check_still_works(comm, "works after dtype/op/root/peer errors");
    check_vcalls(comm);
    check_still_works(comm, "works after gather/scatter/v-call and bitwise-op errors");
    /* Each rank uses its own port for the single-rank configs. */
    check_config(port + 100 + g_rank);
    check_abort(comm);
    check_still_works(comm, "works after config errors and abort of a duplicate");
    return finish(comm, "badinput_check");
}

/* ------------------------------------------------------------------ */
/* Ranks that call different collectives                               */
/* ------------------------------------------------------------------ */

/* A TCP port that is free now (the kernel's choice), or -1. A fixed port
 * such as the launcher's + 1 can be held by another test's listener when
 * ctest runs tests in parallel. */
static int free_port(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    int port = -1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* Run one mismatched call on a fresh communicator with a short deadline.
 * port > 0: rendezvous there; otherwise rank 0 picks a free port and
 * broadcasts it over the launcher communicator. */
static void mismatch_case(gs_comm_t comm, const char *label, int which, int port, int short_ms)
{
    gs_config_t cfg;
    if (port <= 0) {
        int32_t p = (g_rank == 0) ? free_port() : 0;
        gs_status_t bst = gs_broadcast(comm, &p, 1, GS_DTYPE_I32, 0);
        if (bst != GS_OK || p <= 0) {
            fail(label, "could not agree on a free port (%s, port %d)", gs_status_name(bst),
                 (int)p);
            return;
        }
        port = (int)p;
    }
    (void)gs_config_init(&cfg);
    cfg.rank = g_rank;
    cfg.world_size = g_world;
    cfg.master_port = port;
    cfg.timeout_ms = short_ms;
    gs_comm_t mc = GS_COMM_NULL;
    g_current = label;
    gs_status_t st = gs_comm_init_env(&mc, &cfg);
    if (st != GS_OK) {
        fail(label, "could not create the test communicator on port %d: %s: %s", port,
             gs_status_name(st), gs_last_error());
        (void)gs_barrier(comm);
        return;
    }
    float a[2000], b[2000];
    for (int i = 0; i < 2000; i++)
        a[i] = (float)i;
    double t0 = tc_now_ms();
    if (which == 0) {
        /* rank 0 all-reduce, rank 1 broadcast, same size */
        if (g_rank == 0)
            st = gs_allreduce(mc, a, b, 1000, GS_DTYPE_F32, GS_OP_SUM);
        else
            st = gs_broadcast(mc, a, 1000, GS_DTYPE_F32, 0);
    } else if (which == 1) {
        /* same collective, different counts */
        st = gs_allreduce(mc, a, b, g_rank == 0 ? 1000 : 2000, GS_DTYPE_F32, GS_OP_SUM);
    } else if (which == 2) {
        /* allgatherv: each rank expects the other's block shorter than it is */
        const size_t c0[2] = {300, 300}, c1[2] = {200, 400};
        st = gs_allgatherv(mc, a, g_rank == 0 ? 300 : 400, b, 1000, g_rank == 0 ? c0 : c1, NULL,
                           GS_DTYPE_F32);
    } else if (which == 3) {
        /* alltoallv: rank 0 sends 5 and expects 3, rank 1 sends 4 and expects 4 */
        const size_t s0[2] = {1, 5}, r0[2] = {1, 3}, s1[2] = {4, 1}, r1[2] = {4, 1};
        st = gs_alltoallv(mc, a, 1000, g_rank == 0 ? s0 : s1, NULL, b, 1000, g_rank == 0 ? r0 : r1,
                          NULL, GS_DTYPE_F32);
    } else {
        /* reduce_scatterv: the ranks' recvcounts differ */
        const size_t c0[2] = {400, 300}, c1[2] = {300, 400};
        st = gs_reduce_scatterv(mc, a, b, g_rank == 0 ? c0 : c1, GS_DTYPE_F32, GS_OP_SUM);
    }
    double ms = tc_now_ms() - t0;
    const char *err = st == GS_OK ? "" : gs_last_error();
    printf("MISMATCH %s rank=%d status=%s ms=%.0f err=%s\n", label, g_rank, gs_status_name(st), ms,
           err);
    if (st == GS_ERR_MISMATCH) {
        pass(label);
    } else if (st == GS_ERR_TIMEOUT) {
        printf("NOTE rank %d %s: GS_ERR_TIMEOUT accepted only because GS_TIMEOUT_MS is short "
               "(%d ms); GS_ERR_MISMATCH was expected\n",
               g_rank, label, short_ms);
        pass(label);
    } else {
        fail(label, "returned %s, expected GS_ERR_MISMATCH (or GS_ERR_TIMEOUT): %s",
             gs_status_name(st), err);
    }
    if (ms > short_ms + 2000.0)
        fail(label, "took %.0f ms with a %d ms deadline", ms, short_ms);
    /* Keep this communicator open until the other rank has its result too. */
    st = gs_barrier(comm);
    if (st != GS_OK)
        fail(label, "linger barrier on the launcher communicator: %s", gs_status_name(st));
    (void)gs_comm_destroy(mc);
}

static int run_mismatch(gs_comm_t comm, int argc, char **argv)
{
    int short_ms = 3000;
    int port2 = 0; /* 0: a free port chosen by rank 0 for each case */
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--short-ms") == 0)
            short_ms = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--port2") == 0)
            port2 = atoi(argv[i + 1]);
    }
    if (g_world != 2) {
        printf("badinput_check mismatch: needs world size 2, got %d\n", g_world);
        (void)gs_comm_destroy(comm);
        return 1;
    }
    mismatch_case(comm, "allreduce vs broadcast", 0, port2, short_ms);
    mismatch_case(comm, "allreduce count 1000 vs 2000", 1, port2 > 0 ? port2 + 1 : 0, short_ms);
    mismatch_case(comm, "allgatherv recvcounts disagree", 2, port2 > 0 ? port2 + 2 : 0, short_ms);
    mismatch_case(comm, "alltoallv counts disagree", 3, port2 > 0 ? port2 + 3 : 0, short_ms);
    mismatch_case(comm, "reduce_scatterv recvcounts disagree", 4, port2 > 0 ? port2 + 4 : 0,
                  short_ms);
    return finish(comm, "badinput_check mismatch");
}

static int run_init(int argc, char **argv)
{
    const char *expect = "ok";
    for (int i = 2; i + 1 < argc; i += 2)
        if (strcmp(argv[i], "--expect") == 0)
            expect = argv[i + 1];
    int rank = env_int("GS_RANK", "RANK", -1);
    int world = env_int("GS_WORLD_SIZE", "WORLD_SIZE", -1);
    gs_comm_t comm = GS_COMM_NULL;
    double t0 = tc_now_ms();
    gs_status_t st = gs_comm_init_env(&comm, NULL);
    double ms = tc_now_ms() - t0;
    const char *err = st == GS_OK ? "" : gs_last_error();
    printf("INIT rank=%d world=%d status=%s ms=%.0f err=%s\n", rank, world, gs_status_name(st), ms,
           err);
    if (st == GS_OK)
        (void)gs_comm_destroy(comm);
    const char *name = gs_status_name(st);
    const char *shortname = strncmp(name, "GS_ERR_", 7) == 0 ? name + 7 : name;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", expect);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        if ((strcmp(tok, "ok") == 0 && st == GS_OK) || strcmp(tok, name) == 0 ||
            strcmp(tok, shortname) == 0)
            return (st != GS_OK && !err[0]) ? 1 : 0;
    return 1;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGSEGV, on_crash);
    signal(SIGBUS, on_crash);
    signal(SIGABRT, on_crash);
    const char *mode = argc > 1 && argv[1][0] != '-' ? argv[1] : "args";
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--verbose") == 0)
            g_verbose = 1;
    if (strcmp(mode, "init") == 0)
        return run_init(argc, argv);
    if (strcmp(mode, "args") != 0 && strcmp(mode, "mismatch") != 0) {
        fprintf(stderr, "usage: badinput_check [args|mismatch [--short-ms T] [--port2 P]|"
                        "init [--expect LIST]] [--verbose]\n");
        return 2;
    }

    gs_comm_t comm = GS_COMM_NULL;
    gs_status_t st = gs_comm_init_env(&comm, NULL);
    if (st != GS_OK) {
        printf("FAIL badinput_check: gs_comm_init_env returned %s: %s\n", gs_status_name(st),
               gs_last_error());
        return 1;
    }
    (void)gs_comm_rank(comm, &g_rank);
    (void)gs_comm_size(comm, &g_world);
    if (strcmp(mode, "mismatch") == 0)
        return run_mismatch(comm, argc, argv);
    return run_args(comm);
}
