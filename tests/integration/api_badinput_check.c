/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_badinput_check: a bad-input case for EVERY public function. The table
 * below is keyed by function name; run_badinput.sh's "api" case extracts the
 * names of every GS_API function from the public headers (include/gradsync/) and passes them
 * in a file (--names FILE): a name without a row fails the test, so a new
 * public function cannot go in without a bad-input case. Each row calls its
 * function with NULL handles, pointers and outputs, out-of-range enums,
 * counts whose byte size overflows and ranks out of range, and expects a
 * clear error (GS_ERR_INVALID_ARG or GS_ERR_INVALID_USAGE) with a
 * gs_last_error() sentence, no crash, no output written. Functions that
 * cannot fail (gs_version, gs_strerror, ...) must return something sane for
 * out-of-range input. Rows that cannot run here say why (printed as SKIP).
 * Runs as one rank (RANK=0 WORLD_SIZE=1 or gsrun -n 1).
 *
 *   api_badinput_check --names FILE [--verbose]
 * Prints one line per function and "N functions, P passed, F failed, S
 * skipped, M missing"; exit status 1 on any failure or missing row.
 */
#include <gradsync/gradsync.h>
#include <gradsync/bucket.h>
#include <gradsync/compress.h>
#include <gradsync/ps.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static gs_comm_t C;  /* a working single-rank communicator */
static int g_bad;    /* failures in the current row */
static int g_checks; /* calls checked in the current row */
static int g_verbose;
static const char *volatile g_row = "startup";

static float A[64], B[64];
static const size_t HUGE_COUNT = SIZE_MAX / 2;
#define BAD_DT ((gs_dtype_t)99)
#define BAD_OP ((gs_op_t)99)

static void on_crash(int sig)
{
    const char *m = "\nFATAL api_badinput_check crashed in the row of ";
    ssize_t rc = write(2, m, strlen(m));
    rc = write(2, g_row, strlen(g_row));
    rc = write(2, "\n", 1);
    (void)rc;
    signal(sig, SIG_DFL);
    raise(sig);
}

/* One call that must be refused with INVALID_ARG or INVALID_USAGE and a sentence. */
static void bad_(gs_status_t st, const char *what)
{
    const char *err = gs_last_error();
    g_checks++;
    if ((st != GS_ERR_INVALID_ARG && st != GS_ERR_INVALID_USAGE) || !err || !err[0]) {
        printf("  FAIL %s: %s returned %s ('%s')\n", g_row, what, gs_status_name(st),
               err ? err : "(NULL)");
        g_bad++;
    } else if (g_verbose) {
        printf("  ok %s: %s: %s: %s\n", g_row, what, gs_status_name(st), err);
    }
}
#define BAD(_call) bad_((_call), #_call)

/* An options struct with an algorithm outside gs_algo_t: GS_ERR_INVALID_ARG, like any
 * other out-of-range enum (GS_ERR_UNSUPPORTED is for a real algorithm that does not
 * implement the call). */
#define BADALGO(_call) bad_((_call), #_call)

/* A call whose documented answer is GS_OK (e.g. destroy of a null handle). */
static void ok_(gs_status_t st, const char *what)
{
    g_checks++;
    if (st != GS_OK) {
        printf("  FAIL %s: %s returned %s, documented GS_OK (%s)\n", g_row, what,
               gs_status_name(st), gs_last_error());
        g_bad++;
    }
}
#define OKC(_call) ok_((_call), #_call)

static void truth_(int cond, const char *what)
{
    g_checks++;
    if (!cond) {
        printf("  FAIL %s: %s\n", g_row, what);
        g_bad++;
    }
}
#define TRUE_(_cond) truth_((_cond), #_cond)

/* ------------------------------------------------------------------ */
/* Rows                                                                */
/* ------------------------------------------------------------------ */

static gs_request_t R; /* request output; must stay unwritten */
static const size_t CNT[1] = {4};

static void r_version(void)
{
    TRUE_(gs_version() > 0);
}
static void r_version_string(void)
{
    const char *s = gs_version_string();
    TRUE_(s != NULL && s[0] != '\0');
}
static void r_strerror(void)
{
    const char *a = gs_strerror((gs_status_t)12345), *b = gs_strerror((gs_status_t)-99999);
    TRUE_(a != NULL && a[0] && b != NULL && b[0]);
}
static void r_status_name(void)
{
    const char *a = gs_status_name((gs_status_t)12345), *b = gs_status_name((gs_status_t)INT32_MIN);
    TRUE_(a != NULL && a[0] && b != NULL && b[0]);
}
static void r_status_scope(void)
{
    (void)gs_status_scope((gs_status_t)12345);
    (void)gs_status_scope((gs_status_t)INT32_MIN);
    TRUE_(1);
}
static void r_last_error(void)
{
    TRUE_(gs_last_error() != NULL);
}
static void r_algo_implements(void)
{
    TRUE_(gs_algo_implements((gs_coll_type_t)-1, GS_ALGO_RING) == 0);
    TRUE_(gs_algo_implements(GS_COLL_TYPE_COUNT, GS_ALGO_AUTO) == 0);
    TRUE_(gs_algo_implements(GS_COLL_TYPE_ALLREDUCE, (gs_algo_t)999) == 0);
    TRUE_(gs_algo_implements(GS_COLL_TYPE_ALLREDUCE, (gs_algo_t)-1) == 0);
    TRUE_(gs_algo_implements(GS_COLL_TYPE_BROADCAST, GS_ALGO_AUTO) == 1);
    TRUE_(gs_algo_implements(GS_COLL_TYPE_ALLREDUCE, GS_ALGO_RING) == 1);
    TRUE_(gs_algo_implements(GS_COLL_TYPE_ALLREDUCE, GS_ALGO_CHAIN) == 0);
}
static void r_config_init_v(void)
{
    gs_config_t cfg;
    BAD(gs_config_init_v(NULL, GS_VERSION_NUMBER, sizeof(gs_config_t)));
    BAD(gs_config_init_v(&cfg, GS_VERSION_NUMBER, 0));
}
static void r_comm_init(void)
{
    gs_comm_t c = (gs_comm_t)&c;
    gs_config_t cfg;
    BAD(gs_comm_init(NULL, NULL));
    (void)gs_config_init(&cfg);
    cfg.rank = 5;
    cfg.world_size = 2;
    BAD(gs_comm_init(&c, &cfg));
    (void)gs_config_init(&cfg);
    cfg.tcp_nsocks = 999;
    cfg.rank = 0;
    cfg.world_size = 1;
    BAD(gs_comm_init(&c, &cfg));
    TRUE_(c == (gs_comm_t)&c);
}
static void r_comm_init_env(void)
{
    gs_config_t cfg;
    gs_comm_t c = (gs_comm_t)&c;
    BAD(gs_comm_init_env(NULL, NULL));
    (void)gs_config_init(&cfg);
    cfg.world_size = -3;
    BAD(gs_comm_init_env(&c, &cfg));
    TRUE_(c == (gs_comm_t)&c);
}
static void r_comm_destroy(void)
{
    BAD(gs_comm_destroy(NULL));
}
static void r_comm_abort(void)
{
    BAD(gs_comm_abort(NULL));
}
static void r_comm_rank(void)
{
    int r = 7;
    BAD(gs_comm_rank(NULL, &r));
    BAD(gs_comm_rank(C, NULL));
    TRUE_(r == 7);
}
static void r_comm_size(void)
{
    int s = 7;
    BAD(gs_comm_size(NULL, &s));
    BAD(gs_comm_size(C, NULL));
    TRUE_(s == 7);
}
static void r_comm_split(void)
{
    gs_comm_t n = (gs_comm_t)&n;
    BAD(gs_comm_split(NULL, 0, 0, &n));
    BAD(gs_comm_split(C, 0, 0, NULL));
    TRUE_(n == (gs_comm_t)&n);
}
static void r_comm_dup(void)
{
    gs_comm_t n = (gs_comm_t)&n;
    BAD(gs_comm_dup(NULL, &n));
    BAD(gs_comm_dup(C, NULL));
    TRUE_(n == (gs_comm_t)&n);
}
static void r_comm_create_group(void)
{
    gs_comm_t n = (gs_comm_t)&n;
    int me = 0, other = 1;
    BAD(gs_comm_create_group(NULL, 1, &me, 0, &n));
    BAD(gs_comm_create_group(C, 1, NULL, 0, &n));
    BAD(gs_comm_create_group(C, 1, &me, 0, NULL));
    BAD(gs_comm_create_group(C, 0, &me, 0, &n));
    BAD(gs_comm_create_group(C, 1, &other, 0, &n)); /* out of range (or without this rank) */
    TRUE_(n == (gs_comm_t)&n);
}
static void r_comm_get_async_error(void)
{
    gs_status_t e;
    BAD(gs_comm_get_async_error(NULL, &e));
    BAD(gs_comm_get_async_error(C, NULL));
}
static void r_comm_counters(void)
{
    gs_counters_t c = {.size = sizeof(gs_counters_t)};
    BAD(gs_comm_counters(NULL, &c));
    BAD(gs_comm_counters(C, NULL));
}
static void r_comm_stats(void)
{
    gs_comm_stats_t s = GS_COMM_STATS_INIT;
    BAD(gs_comm_stats(NULL, &s));
    BAD(gs_comm_stats(C, NULL));
}
static void r_comm_shrink(void)
{
    gs_comm_t n = (gs_comm_t)&n;
    BAD(gs_comm_shrink(NULL, &n));
    BAD(gs_comm_shrink(C, NULL));
    TRUE_(n == (gs_comm_t)&n);
}
static void r_comm_revoke(void)
{
    BAD(gs_comm_revoke(NULL));
}
static void r_comm_get_unique_id(void)
{
    gs_unique_id_t id;
    BAD(gs_comm_get_unique_id(NULL, &id));
    BAD(gs_comm_get_unique_id(C, NULL));
}
static void r_comm_grow(void)
{
    gs_comm_t n = (gs_comm_t)&n;
    gs_unique_id_t junk;
    gs_config_t cfg;
    memset(&junk, 0x5a, sizeof(junk));
    gs_config_init(&cfg);
    BAD(gs_comm_grow(C, 2, NULL, NULL, NULL));
    BAD(gs_comm_grow(C, 1, NULL, NULL, &n));     /* not above the size */
    BAD(gs_comm_grow(C, 2, NULL, &cfg, &n));     /* cfg is a new rank's */
    BAD(gs_comm_grow(C, 2, NULL, NULL, &n));     /* rank 0 without the id it made */
    BAD(gs_comm_grow(C, 2, &junk, NULL, &n));    /* not an id of this communicator */
    BAD(gs_comm_grow(NULL, 2, NULL, &cfg, &n));  /* a new rank without an id */
    BAD(gs_comm_grow(NULL, 2, &junk, &cfg, &n)); /* a malformed id */
    TRUE_(n == (gs_comm_t)&n);
}
static void r_comm_dump(void)
{
    BAD(gs_comm_dump(NULL, stdout));
    BAD(gs_comm_dump(C, NULL));
}
static void r_comm_peer_stats(void)
{
    gs_peer_stats_t s = GS_PEER_STATS_INIT;
    BAD(gs_comm_peer_stats(NULL, 0, &s));
    BAD(gs_comm_peer_stats(C, 5, &s));
    BAD(gs_comm_peer_stats(C, -1, &s));
    BAD(gs_comm_peer_stats(C, 0, NULL));
}

/* The collectives: NULL comm, NULL buffers, bad dtype/op, overflow, bad root. */
static void r_allreduce(void)
{
    BAD(gs_allreduce(NULL, A, B, 4, GS_DTYPE_F32, GS_OP_SUM));
    BAD(gs_allreduce(C, NULL, B, 4, GS_DTYPE_F32, GS_OP_SUM));
    BAD(gs_allreduce(C, A, B, 4, BAD_DT, GS_OP_SUM));
    BAD(gs_allreduce(C, A, B, 4, GS_DTYPE_F32, BAD_OP));
    BAD(gs_allreduce(C, A, B, HUGE_COUNT, GS_DTYPE_F32, GS_OP_SUM));
}
static void r_broadcast(void)
{
    BAD(gs_broadcast(NULL, A, 4, GS_DTYPE_F32, 0));
    BAD(gs_broadcast(C, NULL, 4, GS_DTYPE_F32, 0));
    BAD(gs_broadcast(C, A, 4, GS_DTYPE_F32, 3));
    BAD(gs_broadcast(C, A, 4, BAD_DT, 0));
}
static void r_reduce(void)
{
    BAD(gs_reduce(NULL, A, B, 4, GS_DTYPE_F32, GS_OP_SUM, 0));
    BAD(gs_reduce(C, A, B, 4, GS_DTYPE_F32, GS_OP_SUM, -1));
    BAD(gs_reduce(C, A, B, 4, GS_DTYPE_F32, BAD_OP, 0));
}
static void r_allgather(void)
{
    BAD(gs_allgather(NULL, A, B, 4, GS_DTYPE_F32));
    BAD(gs_allgather(C, A, NULL, 4, GS_DTYPE_F32));
    BAD(gs_allgather(C, A, B, HUGE_COUNT, GS_DTYPE_F32));
}
static void r_reduce_scatter(void)
{
    BAD(gs_reduce_scatter(NULL, A, B, 4, GS_DTYPE_F32, GS_OP_SUM));
    BAD(gs_reduce_scatter(C, A, B, 4, BAD_DT, GS_OP_SUM));
}
static void r_alltoall(void)
{
    BAD(gs_alltoall(NULL, A, B, 4, GS_DTYPE_F32));
    BAD(gs_alltoall(C, NULL, B, 4, GS_DTYPE_F32));
}
static void r_barrier(void)
{
    BAD(gs_barrier(NULL));
}
static void r_gather(void)
{
    BAD(gs_gather(NULL, A, B, 4, GS_DTYPE_F32, 0));
    BAD(gs_gather(C, A, B, 4, GS_DTYPE_F32, 2));
    BAD(gs_gather(C, A, NULL, 4, GS_DTYPE_F32, 0));
}
static void r_scatter(void)
{
    BAD(gs_scatter(NULL, A, B, 4, GS_DTYPE_F32, 0));
    BAD(gs_scatter(C, A, B, 4, GS_DTYPE_F32, 2));
    BAD(gs_scatter(C, NULL, B, 4, GS_DTYPE_F32, 0));
}
static void r_allgatherv(void)
{
    BAD(gs_allgatherv(NULL, A, 4, B, 64, CNT, NULL, GS_DTYPE_F32));
    BAD(gs_allgatherv(C, A, 4, B, 64, NULL, NULL, GS_DTYPE_F32));
    BAD(gs_allgatherv(C, A, 4, B, 2, CNT, NULL, GS_DTYPE_F32));
}
static void r_alltoallv(void)
{
    BAD(gs_alltoallv(NULL, A, 64, CNT, NULL, B, 64, CNT, NULL, GS_DTYPE_F32));
    BAD(gs_alltoallv(C, A, 64, NULL, NULL, B, 64, CNT, NULL, GS_DTYPE_F32));
    BAD(gs_alltoallv(C, A, 64, CNT, NULL, B, 64, CNT, NULL, BAD_DT));
}
static void r_reduce_scatterv(void)
{
    BAD(gs_reduce_scatterv(NULL, A, B, CNT, GS_DTYPE_F32, GS_OP_SUM));
    BAD(gs_reduce_scatterv(C, A, B, NULL, GS_DTYPE_F32, GS_OP_SUM));
    BAD(gs_reduce_scatterv(C, A, B, CNT, GS_DTYPE_F32, BAD_OP));
}
static void r_igather(void)
{
    BAD(gs_igather(NULL, A, B, 4, GS_DTYPE_F32, 0, &R));
    BAD(gs_igather(C, A, B, 4, GS_DTYPE_F32, 0, NULL));
}
static void r_iscatter(void)
{
    BAD(gs_iscatter(NULL, A, B, 4, GS_DTYPE_F32, 0, &R));
    BAD(gs_iscatter(C, A, B, 4, GS_DTYPE_F32, 9, &R));
}
static void r_igather_ex(void)
{
    BAD(gs_igather_ex(NULL, A, B, 4, GS_DTYPE_F32, 0, NULL, &R));
    BAD(gs_igather_ex(C, A, B, 4, GS_DTYPE_F32, 0, NULL, NULL));
}
static void r_iscatter_ex(void)
{
    BAD(gs_iscatter_ex(NULL, A, B, 4, GS_DTYPE_F32, 0, NULL, &R));
    BAD(gs_iscatter_ex(C, A, B, 4, GS_DTYPE_F32, 9, NULL, &R));
}
static void r_iallgatherv(void)
{
    BAD(gs_iallgatherv(NULL, A, 4, B, 64, CNT, NULL, GS_DTYPE_F32, &R));
    BAD(gs_iallgatherv(C, A, 4, B, 64, CNT, NULL, GS_DTYPE_F32, NULL));
}
static void r_ialltoallv(void)
{
    BAD(gs_ialltoallv(NULL, A, 64, CNT, NULL, B, 64, CNT, NULL, GS_DTYPE_F32, &R));
    BAD(gs_ialltoallv(C, A, 64, CNT, NULL, B, 64, CNT, NULL, GS_DTYPE_F32, NULL));
}
static void r_ialltoallv_ex(void)
{
    BAD(gs_ialltoallv_ex(NULL, A, 64, CNT, NULL, B, 64, CNT, NULL, GS_DTYPE_F32, NULL, &R));
    BAD(gs_ialltoallv_ex(C, A, 64, CNT, NULL, B, 64, CNT, NULL, GS_DTYPE_F32, NULL, NULL));
}
static void r_ireduce_scatterv(void)
{
    BAD(gs_ireduce_scatterv(NULL, A, B, CNT, GS_DTYPE_F32, GS_OP_SUM, &R));
    BAD(gs_ireduce_scatterv(C, A, B, CNT, GS_DTYPE_F32, GS_OP_SUM, NULL));
}

/* _ex forms: the same checks, and an options struct with size 0 or a bad algorithm. */
static void r_codec_shard(void);
static gs_coll_opts_t bad_opts(void)
{
    gs_coll_opts_t o = GS_COLL_OPTS_INIT;
    o.algo = (gs_algo_t)999;
    return o;
}
static void r_allreduce_ex(void)
{
    gs_allreduce_opts_t o = GS_ALLREDUCE_OPTS_INIT;
    gs_codec_config_t cc = GS_CODEC_CONFIG_INIT;
    BAD(gs_allreduce_ex(NULL, A, B, 4, GS_DTYPE_F32, GS_OP_SUM, NULL));
    o.algo = (gs_algo_t)999;
    BADALGO(gs_allreduce_ex(C, A, B, 4, GS_DTYPE_F32, GS_OP_SUM, &o));
    o.algo = GS_ALGO_AUTO;
    cc.kind = (gs_codec_kind_t)77;
    o.codec = &cc;
    BAD(gs_allreduce_ex(C, A, B, 4, GS_DTYPE_F32, GS_OP_SUM, &o));
}
static void r_broadcast_ex(void)
{
    gs_coll_opts_t o = bad_opts();
    BAD(gs_broadcast_ex(NULL, A, 4, GS_DTYPE_F32, 0, NULL));
    BADALGO(gs_broadcast_ex(C, A, 4, GS_DTYPE_F32, 0, &o));
}
static void r_reduce_ex(void)
{
    gs_coll_opts_t o = bad_opts();
    BAD(gs_reduce_ex(NULL, A, B, 4, GS_DTYPE_F32, GS_OP_SUM, 0, NULL));
    BADALGO(gs_reduce_ex(C, A, B, 4, GS_DTYPE_F32, GS_OP_SUM, 0, &o));
}
static void r_allgather_ex(void)
{
    gs_coll_opts_t o = bad_opts();
    BAD(gs_allgather_ex(NULL, A, B, 4, GS_DTYPE_F32, NULL));
    BADALGO(gs_allgather_ex(C, A, B, 4, GS_DTYPE_F32, &o));
}
static void r_reduce_scatter_ex(void)
{
    gs_coll_opts_t o = bad_opts();
    BAD(gs_reduce_scatter_ex(NULL, A, B, 4, GS_DTYPE_F32, GS_OP_SUM, NULL));
    BADALGO(gs_reduce_scatter_ex(C, A, B, 4, GS_DTYPE_F32, GS_OP_SUM, &o));
    r_codec_shard();
}
static void r_alltoall_ex(void)
{
    gs_coll_opts_t o = bad_opts();
    BAD(gs_alltoall_ex(NULL, A, B, 4, GS_DTYPE_F32, NULL));
    BADALGO(gs_alltoall_ex(C, A, B, 4, GS_DTYPE_F32, &o));
}
static void r_gather_ex(void)
{
    gs_coll_opts_t o = bad_opts();
    BAD(gs_gather_ex(NULL, A, B, 4, GS_DTYPE_F32, 0, NULL));
    BADALGO(gs_gather_ex(C, A, B, 4, GS_DTYPE_F32, 0, &o));
}
static void r_scatter_ex(void)
{
    gs_coll_opts_t o = bad_opts();
    BAD(gs_scatter_ex(NULL, A, B, 4, GS_DTYPE_F32, 0, NULL));
    BADALGO(gs_scatter_ex(C, A, B, 4, GS_DTYPE_F32, 0, &o));
}
static void r_allgatherv_ex(void)
{
    gs_coll_opts_t o = bad_opts();
    BAD(gs_allgatherv_ex(NULL, A, 4, B, 64, CNT, NULL, GS_DTYPE_F32, NULL));
    BADALGO(gs_allgatherv_ex(C, A, 4, B, 64, CNT, NULL, GS_DTYPE_F32, &o));
}
static void r_alltoallv_ex(void)
{
    gs_coll_opts_t o = bad_opts();
    BAD(gs_alltoallv_ex(NULL, A, 64, CNT, NULL, B, 64, CNT, NULL, GS_DTYPE_F32, NULL));
    BADALGO(gs_alltoallv_ex(C, A, 64, CNT, NULL, B, 64, CNT, NULL, GS_DTYPE_F32, &o));
}
static void r_reduce_scatterv_ex(void)
{
    gs_coll_opts_t o = bad_opts();
    BAD(gs_reduce_scatterv_ex(NULL, A, B, CNT, GS_DTYPE_F32, GS_OP_SUM, NULL));
    BADALGO(gs_reduce_scatterv_ex(C, A, B, CNT, GS_DTYPE_F32, GS_OP_SUM, &o));
}
static void r_iallgatherv_ex(void)
{
    gs_coll_opts_t o = bad_opts();
    BAD(gs_iallgatherv_ex(NULL, A, 4, B, 64, CNT, NULL, GS_DTYPE_F32, NULL, &R));
    BAD(gs_iallgatherv_ex(C, A, 4, B, 64, CNT, NULL, GS_DTYPE_F32, NULL, NULL));
    BADALGO(gs_iallgatherv_ex(C, A, 4, B, 64, CNT, NULL, GS_DTYPE_F32, &o, &R));
}
static void r_ireduce_scatterv_ex(void)
{
    gs_coll_opts_t o = bad_opts();
    BAD(gs_ireduce_scatterv_ex(NULL, A, B, CNT, GS_DTYPE_F32, GS_OP_SUM, NULL, &R));
    BAD(gs_ireduce_scatterv_ex(C, A, B, CNT, GS_DTYPE_F32, GS_OP_SUM, NULL, NULL));
    BADALGO(gs_ireduce_scatterv_ex(C, A, B, CNT, GS_DTYPE_F32, GS_OP_SUM, &o, &R));
}
/* A codec where the call cannot take one: an integer dtype, an unknown codec. */
static void r_codec_shard(void)
{
    gs_coll_opts_t o = GS_COLL_OPTS_INIT;
    gs_codec_config_t cc = GS_CODEC_CONFIG_INIT;
    cc.kind = GS_CODEC_INT8;
    o.codec = &cc;
    BAD(gs_reduce_scatter_ex(C, A, B, 4, GS_DTYPE_I32, GS_OP_SUM, &o));
    BAD(gs_allgather_ex(C, A, B, 4, GS_DTYPE_I32, &o));
    BAD(gs_alltoall_ex(C, A, B, 4, GS_DTYPE_F32, &o));
    cc.kind = (gs_codec_kind_t)77;
    BAD(gs_reduce_scatter_ex(C, A, B, 4, GS_DTYPE_F32, GS_OP_SUM, &o));
    BAD(gs_allgatherv_ex(C, A, 4, B, 64, CNT, NULL, GS_DTYPE_F32, &o));
}

/* Point-to-point: NULL comm, peer out of range (and self at world size 1), NULL buffers. */
static void r_send(void)
{
    BAD(gs_send(NULL, A, 4, GS_DTYPE_F32, 0, 1));
    BAD(gs_send(C, A, 4, GS_DTYPE_F32, 5, 1));
    BAD(gs_send(C, NULL, 4, GS_DTYPE_F32, 0, 1));
}
static void r_recv(void)
{
    BAD(gs_recv(NULL, A, 4, GS_DTYPE_F32, 0, 1));
    BAD(gs_recv(C, A, 4, GS_DTYPE_F32, -7, 1));
    BAD(gs_recv(C, A, HUGE_COUNT, GS_DTYPE_F32, 0, 1));
}
static void r_send_ex(void)
{
    BAD(gs_send_ex(NULL, A, 4, GS_DTYPE_F32, 0, 1, NULL));
    BAD(gs_send_ex(C, A, 4, BAD_DT, 0, 1, NULL));
}
static void r_recv_ex(void)
{
    BAD(gs_recv_ex(NULL, A, 4, GS_DTYPE_F32, 0, 1, NULL));
    BAD(gs_recv_ex(C, NULL, 4, GS_DTYPE_F32, 0, 1, NULL));
}
static void r_recv_status(void)
{
    gs_p2p_status_t s;
    BAD(gs_recv_status(NULL, A, 4, GS_DTYPE_F32, 0, 1, &s));
    BAD(gs_recv_status(C, A, 4, GS_DTYPE_F32, 9, 1, &s));
}
static void r_probe(void)
{
    gs_p2p_status_t s;
    BAD(gs_probe(NULL, 0, 1, GS_DTYPE_F32, &s));
    BAD(gs_probe(C, 9, 1, GS_DTYPE_F32, &s));
    BAD(gs_probe(C, GS_ANY_SOURCE, 1, BAD_DT, &s));
}
static void r_iprobe(void)
{
    gs_p2p_status_t s;
    int flag = 3;
    BAD(gs_iprobe(NULL, 0, 1, GS_DTYPE_F32, &flag, &s));
    BAD(gs_iprobe(C, 0, 1, GS_DTYPE_F32, NULL, &s));
    BAD(gs_iprobe(C, 9, 1, GS_DTYPE_F32, &flag, &s));
}
static void r_group_start(void)
{
    /* A start inside a group is refused or nests; either way end() must close it. */
    gs_status_t a = gs_group_start();
    gs_status_t b = gs_group_start();
    gs_status_t c = gs_group_end();
    gs_status_t d = (b == GS_OK) ? gs_group_end() : GS_OK;
    TRUE_(a == GS_OK && (b == GS_OK || b == GS_ERR_INVALID_USAGE) && c == GS_OK && d == GS_OK);
}
static void r_group_end(void)
{
    BAD(gs_group_end());
}
static void r_iallreduce(void)
{
    BAD(gs_iallreduce(NULL, A, B, 4, GS_DTYPE_F32, GS_OP_SUM, &R));
    BAD(gs_iallreduce(C, A, B, 4, GS_DTYPE_F32, GS_OP_SUM, NULL));
    BAD(gs_iallreduce(C, A, B, HUGE_COUNT, GS_DTYPE_F32, GS_OP_SUM, &R));
}
static void r_iallreduce_ex(void)
{
    gs_allreduce_opts_t o = GS_ALLREDUCE_OPTS_INIT;
    o.algo = (gs_algo_t)999;
    BAD(gs_iallreduce_ex(NULL, A, B, 4, GS_DTYPE_F32, GS_OP_SUM, NULL, &R));
    BADALGO(gs_iallreduce_ex(C, A, B, 4, GS_DTYPE_F32, GS_OP_SUM, &o, &R));
}
static void r_ibroadcast(void)
{
    BAD(gs_ibroadcast(NULL, A, 4, GS_DTYPE_F32, 0, &R));
    BAD(gs_ibroadcast(C, A, 4, GS_DTYPE_F32, 1, &R));
}
static void r_ireduce(void)
{
    BAD(gs_ireduce(NULL, A, B, 4, GS_DTYPE_F32, GS_OP_SUM, 0, &R));
    BAD(gs_ireduce(C, A, B, 4, GS_DTYPE_F32, BAD_OP, 0, &R));
}
static void r_iallgather(void)
{
    BAD(gs_iallgather(NULL, A, B, 4, GS_DTYPE_F32, &R));
    BAD(gs_iallgather(C, A, B, 4, BAD_DT, &R));
}
static void r_ireduce_scatter(void)
{
    BAD(gs_ireduce_scatter(NULL, A, B, 4, GS_DTYPE_F32, GS_OP_SUM, &R));
    BAD(gs_ireduce_scatter(C, A, B, 4, GS_DTYPE_F32, GS_OP_SUM, NULL));
}
static void r_ialltoall(void)
{
    BAD(gs_ialltoall(NULL, A, B, 4, GS_DTYPE_F32, &R));
    BAD(gs_ialltoall(C, A, B, HUGE_COUNT, GS_DTYPE_F32, &R));
}
static void r_ibarrier(void)
{
    BAD(gs_ibarrier(NULL, &R));
    BAD(gs_ibarrier(C, NULL));
}
static void r_isend(void)
{
    BAD(gs_isend(NULL, A, 4, GS_DTYPE_F32, 0, 1, &R));
    BAD(gs_isend(C, A, 4, GS_DTYPE_F32, 3, 1, &R));
    BAD(gs_isend(C, A, 4, GS_DTYPE_F32, 0, 1, NULL));
}
static void r_irecv(void)
{
    BAD(gs_irecv(NULL, A, 4, GS_DTYPE_F32, 0, 1, &R));
    BAD(gs_irecv(C, NULL, 4, GS_DTYPE_F32, 0, 1, &R));
}
static void r_ibroadcast_ex(void)
{
    gs_coll_opts_t o = bad_opts();
    BAD(gs_ibroadcast_ex(NULL, A, 4, GS_DTYPE_F32, 0, NULL, &R));
    BADALGO(gs_ibroadcast_ex(C, A, 4, GS_DTYPE_F32, 0, &o, &R));
}
static void r_ireduce_ex(void)
{
    gs_coll_opts_t o = bad_opts();
    BAD(gs_ireduce_ex(NULL, A, B, 4, GS_DTYPE_F32, GS_OP_SUM, 0, NULL, &R));
    BADALGO(gs_ireduce_ex(C, A, B, 4, GS_DTYPE_F32, GS_OP_SUM, 0, &o, &R));
}
static void r_iallgather_ex(void)
{
    gs_coll_opts_t o = bad_opts();
    BAD(gs_iallgather_ex(NULL, A, B, 4, GS_DTYPE_F32, NULL, &R));
    BADALGO(gs_iallgather_ex(C, A, B, 4, GS_DTYPE_F32, &o, &R));
}
static void r_ireduce_scatter_ex(void)
{
    gs_coll_opts_t o = bad_opts();
    BAD(gs_ireduce_scatter_ex(NULL, A, B, 4, GS_DTYPE_F32, GS_OP_SUM, NULL, &R));
    BADALGO(gs_ireduce_scatter_ex(C, A, B, 4, GS_DTYPE_F32, GS_OP_SUM, &o, &R));
}
static void r_ialltoall_ex(void)
{
    gs_coll_opts_t o = bad_opts();
    BAD(gs_ialltoall_ex(NULL, A, B, 4, GS_DTYPE_F32, NULL, &R));
    BADALGO(gs_ialltoall_ex(C, A, B, 4, GS_DTYPE_F32, &o, &R));
}
static void r_isend_ex(void)
{
    BAD(gs_isend_ex(NULL, A, 4, GS_DTYPE_F32, 0, 1, NULL, &R));
    BAD(gs_isend_ex(C, A, 4, GS_DTYPE_F32, 0, 1, NULL, NULL));
}
static void r_irecv_ex(void)
{
    BAD(gs_irecv_ex(NULL, A, 4, GS_DTYPE_F32, 0, 1, NULL, &R));
    BAD(gs_irecv_ex(C, A, 4, GS_DTYPE_F32, 0, 1, NULL, NULL));
}
static void r_wait(void)
{
    gs_request_t n = GS_REQUEST_NULL;
    BAD(gs_wait(NULL));
    OKC(gs_wait(&n)); /* a released (destroyed) request is GS_REQUEST_NULL: documented GS_OK */
}
static void r_test(void)
{
    gs_request_t n = GS_REQUEST_NULL;
    BAD(gs_test(NULL));
    OKC(gs_test(&n));
}
static void r_waitall(void)
{
    BAD(gs_waitall(3, NULL));
}
static void r_irecv_status(void)
{
    gs_p2p_status_t s;
    BAD(gs_irecv_status(NULL, A, 4, GS_DTYPE_F32, 0, 1, &s, &R));
    BAD(gs_irecv_status(C, A, 4, GS_DTYPE_F32, 0, 1, &s, NULL));
}
static void r_waitany(void)
{
    gs_request_t rs[2] = {GS_REQUEST_NULL, GS_REQUEST_NULL};
    int idx = 5;
    BAD(gs_waitany(2, NULL, &idx));
    BAD(gs_waitany(2, rs, NULL));
}
static void r_testall(void)
{
    BAD(gs_testall(2, NULL));
}

/* compress.h */
static void r_ef_create(void)
{
    gs_ef_t ef = (gs_ef_t)&ef;
    BAD(gs_ef_create(16, BAD_DT, &ef));
    BAD(gs_ef_create(16, GS_DTYPE_F32, NULL));
    BAD(gs_ef_create(HUGE_COUNT, GS_DTYPE_F32, &ef));
    TRUE_(ef == (gs_ef_t)&ef);
}
static void r_ef_reset(void)
{
    BAD(gs_ef_reset(GS_EF_NULL));
}
static void r_ef_destroy(void)
{
    OKC(gs_ef_destroy(GS_EF_NULL));
}
static void r_codec_encoded_size(void)
{
    gs_codec_config_t cc = GS_CODEC_CONFIG_INIT;
    size_t b = 7;
    BAD(gs_codec_encoded_size(NULL, 16, GS_DTYPE_F32, &b));
    cc.kind = GS_CODEC_INT8;
    BAD(gs_codec_encoded_size(&cc, 16, GS_DTYPE_F32, NULL));
    BAD(gs_codec_encoded_size(&cc, 16, BAD_DT, &b));
    BAD(gs_codec_encoded_size(&cc, HUGE_COUNT, GS_DTYPE_F32, &b));
    cc.kind = (gs_codec_kind_t)99;
    BAD(gs_codec_encoded_size(&cc, 16, GS_DTYPE_F32, &b));
    TRUE_(b == 7);
}
static void r_codec_scratch_size(void)
{
    gs_codec_config_t cc = GS_CODEC_CONFIG_INIT;
    size_t b = 7;
    BAD(gs_codec_scratch_size(NULL, 16, GS_DTYPE_F32, &b));
    cc.kind = GS_CODEC_TOPK;
    cc.ratio = 7.0;
    BAD(gs_codec_scratch_size(&cc, 16, GS_DTYPE_F32, &b));
}
static void r_codec_encode(void)
{
    gs_codec_config_t cc = GS_CODEC_CONFIG_INIT;
    size_t len = 7;
    unsigned char dst[16];
    cc.kind = GS_CODEC_INT8;
    BAD(gs_codec_encode(NULL, A, 16, GS_DTYPE_F32, GS_EF_NULL, NULL, 0, dst, sizeof(dst), &len));
    BAD(gs_codec_encode(&cc, NULL, 16, GS_DTYPE_F32, GS_EF_NULL, NULL, 0, dst, sizeof(dst), &len));
    BAD(gs_codec_encode(&cc, A, 16, GS_DTYPE_F32, GS_EF_NULL, NULL, 0, dst, 4, &len));
    BAD(gs_codec_encode(&cc, A, 16, GS_DTYPE_F32, GS_EF_NULL, NULL, 0, dst, sizeof(dst), NULL));
    TRUE_(len == 7);
}
static void r_codec_decode(void)
{
    gs_codec_config_t cc = GS_CODEC_CONFIG_INIT;
    cc.kind = GS_CODEC_INT8;
    BAD(gs_codec_decode(NULL, A, 64, 16, GS_DTYPE_F32, NULL, 0, B));
    BAD(gs_codec_decode(&cc, NULL, 64, 16, GS_DTYPE_F32, NULL, 0, B));
    BAD(gs_codec_decode(&cc, A, 64, 16, GS_DTYPE_F32, NULL, 0, NULL));
}
static void r_codec_decode_accumulate(void)
{
    gs_codec_config_t cc = GS_CODEC_CONFIG_INIT;
    cc.kind = GS_CODEC_INT8;
    BAD(gs_codec_decode_accumulate(NULL, A, 64, 16, GS_DTYPE_F32, NULL, 0, B));
    BAD(gs_codec_decode_accumulate(&cc, A, 64, 16, BAD_DT, NULL, 0, B));
}

/* bucket.h */
static void r_bucketer_create(void)
{
    gs_bucketer_t b = (gs_bucketer_t)&b;
    gs_bucketer_opts_t o = GS_BUCKETER_OPTS_INIT;
    BAD(gs_bucketer_create(NULL, NULL, &b));
    BAD(gs_bucketer_create(C, NULL, NULL));
    o.op = BAD_OP;
    BAD(gs_bucketer_create(C, &o, &b));
    o = (gs_bucketer_opts_t)GS_BUCKETER_OPTS_INIT;
    o.flags = 0x40u;
    BAD(gs_bucketer_create(C, &o, &b));
    TRUE_(b == (gs_bucketer_t)&b);
}
static gs_bucketer_t make_bucketer(void)
{
    gs_bucketer_t b = GS_BUCKETER_NULL;
    if (gs_bucketer_create(C, NULL, &b) != GS_OK)
        return GS_BUCKETER_NULL;
    return b;
}
static void r_bucketer_add(void)
{
    size_t id = 99;
    gs_bucketer_t b = make_bucketer();
    BAD(gs_bucketer_add(GS_BUCKETER_NULL, A, 4, GS_DTYPE_F32, &id));
    if (b) {
        BAD(gs_bucketer_add(b, NULL, 4, GS_DTYPE_F32, &id));
        BAD(gs_bucketer_add(b, A, 4, BAD_DT, &id));
        BAD(gs_bucketer_add(b, A, HUGE_COUNT, GS_DTYPE_F32, &id));
        BAD(gs_bucketer_add(b, A, 4, GS_DTYPE_F32, NULL));
        (void)gs_bucketer_destroy(b);
    }
    TRUE_(b != GS_BUCKETER_NULL && id == 99);
}
static void r_bucketer_destroy(void)
{
    OKC(gs_bucketer_destroy(GS_BUCKETER_NULL));
}
static void r_bucketer_ready(void)
{
    gs_bucketer_t b = make_bucketer();
    BAD(gs_bucketer_ready(GS_BUCKETER_NULL, 0));
    if (b) {
        BAD(gs_bucketer_ready(b, 12345)); /* no tensor 12345 */
        (void)gs_bucketer_destroy(b);
    }
}
static void r_bucketer_wait(void)
{
    BAD(gs_bucketer_wait(GS_BUCKETER_NULL));
}
static void r_bucketer_stats(void)
{
    gs_bucketer_stats_t s = GS_BUCKETER_STATS_INIT;
    gs_bucketer_t b = make_bucketer();
    BAD(gs_bucketer_stats(GS_BUCKETER_NULL, &s));
    if (b) {
        BAD(gs_bucketer_stats(b, NULL));
        (void)gs_bucketer_destroy(b);
    }
}
static void r_bucketer_bucket_info(void)
{
    gs_bucket_info_t i = GS_BUCKET_INFO_INIT;
    gs_bucketer_t b = make_bucketer();
    BAD(gs_bucketer_bucket_info(GS_BUCKETER_NULL, 0, &i));
    if (b) {
        BAD(gs_bucketer_bucket_info(b, 777, &i));
        BAD(gs_bucketer_bucket_info(b, 0, NULL));
        (void)gs_bucketer_destroy(b);
    }
}
static void r_bucketer_locate(void)
{
    size_t bk = 5, off = 5;
    gs_bucketer_t b = make_bucketer();
    BAD(gs_bucketer_locate(GS_BUCKETER_NULL, 0, &bk, &off));
    if (b) {
        BAD(gs_bucketer_locate(b, 4242, &bk, &off));
        (void)gs_bucketer_destroy(b);
    }
    TRUE_(bk == 5 && off == 5);
}

/* ps.h */
static void r_ps_create(void)
{
    gs_ps_t p = (gs_ps_t)&p;
    gs_ps_opts_t o = GS_PS_OPTS_INIT;
    BAD(gs_ps_create(NULL, NULL, &p));
    BAD(gs_ps_create(C, NULL, NULL));
    o.consistency = (gs_ps_consistency_t)42;
    BAD(gs_ps_create(C, &o, &p));
    o = (gs_ps_opts_t)GS_PS_OPTS_INIT;
    o.staleness = -4;
    o.consistency = GS_PS_SSP;
    BAD(gs_ps_create(C, &o, &p));
    TRUE_(p == (gs_ps_t)&p);
}
static void r_ps_register(void)
{
    BAD(gs_ps_register(NULL, 1, 4, GS_DTYPE_F32, NULL));
}
static void r_ps_destroy(void)
{
    gs_status_t st = gs_ps_destroy(NULL);
    TRUE_(st == GS_OK || st == GS_ERR_INVALID_ARG);
}
static void r_ps_push(void)
{
    gs_ps_request_t q = (gs_ps_request_t)&q;
    BAD(gs_ps_push(NULL, 1, A, 4, GS_DTYPE_F32, &q));
    TRUE_(q == (gs_ps_request_t)&q);
}
static void r_ps_pull(void)
{
    gs_ps_request_t q = (gs_ps_request_t)&q;
    BAD(gs_ps_pull(NULL, 1, A, 4, GS_DTYPE_F32, &q));
}
static void r_ps_clock(void)
{
    BAD(gs_ps_clock(NULL));
}
static void r_ps_wait(void)
{
    BAD(gs_ps_wait(NULL));
}
static void r_ps_test(void)
{
    BAD(gs_ps_test(NULL));
}
static void r_ps_waitall(void)
{
    BAD(gs_ps_waitall(2, NULL));
}
static void r_ps_info(void)
{
    gs_ps_info_t i = GS_PS_INFO_INIT;
    BAD(gs_ps_info(NULL, &i));
}

/* ------------------------------------------------------------------ */
/* The table                                                           */
/* ------------------------------------------------------------------ */

typedef struct row {
    const char *name;
    void (*fn)(void);
    const char *skip; /* non-NULL: cannot run here, and why */
} row_t;

static const row_t ROWS[] = {
    {"gs_version", r_version, NULL},
    {"gs_version_string", r_version_string, NULL},
    {"gs_strerror", r_strerror, NULL},
    {"gs_status_name", r_status_name, NULL},
    {"gs_status_scope", r_status_scope, NULL},
    {"gs_last_error", r_last_error, NULL},
    {"gs_algo_implements", r_algo_implements, NULL},
    {"gs_config_init_v", r_config_init_v, NULL},
    {"gs_comm_init", r_comm_init, NULL},
    {"gs_comm_init_env", r_comm_init_env, NULL},
    {"gs_comm_destroy", r_comm_destroy, NULL},
    {"gs_comm_abort", r_comm_abort, NULL},
    {"gs_comm_rank", r_comm_rank, NULL},
    {"gs_comm_size", r_comm_size, NULL},
    {"gs_comm_split", r_comm_split, NULL},
    {"gs_comm_dup", r_comm_dup, NULL},
    {"gs_comm_create_group", r_comm_create_group, NULL},
    {"gs_comm_get_async_error", r_comm_get_async_error, NULL},
    {"gs_comm_counters", r_comm_counters, NULL},
    {"gs_comm_stats", r_comm_stats, NULL},
    {"gs_comm_peer_stats", r_comm_peer_stats, NULL},
    {"gs_comm_dump", r_comm_dump, NULL},
    {"gs_comm_shrink", r_comm_shrink, NULL},
    {"gs_comm_revoke", r_comm_revoke, NULL},
    {"gs_comm_get_unique_id", r_comm_get_unique_id, NULL},
    {"gs_comm_grow", r_comm_grow, NULL},
    {"gs_allreduce", r_allreduce, NULL},
    {"gs_broadcast", r_broadcast, NULL},
    {"gs_reduce", r_reduce, NULL},
    {"gs_allgather", r_allgather, NULL},
    {"gs_reduce_scatter", r_reduce_scatter, NULL},
    {"gs_alltoall", r_alltoall, NULL},
    {"gs_barrier", r_barrier, NULL},
    {"gs_gather", r_gather, NULL},
    {"gs_scatter", r_scatter, NULL},
    {"gs_allgatherv", r_allgatherv, NULL},
    {"gs_alltoallv", r_alltoallv, NULL},
    {"gs_reduce_scatterv", r_reduce_scatterv, NULL},
    {"gs_igather", r_igather, NULL},
    {"gs_iscatter", r_iscatter, NULL},
    {"gs_igather_ex", r_igather_ex, NULL},
    {"gs_iscatter_ex", r_iscatter_ex, NULL},
    {"gs_iallgatherv", r_iallgatherv, NULL},
    {"gs_ialltoallv", r_ialltoallv, NULL},
    {"gs_ialltoallv_ex", r_ialltoallv_ex, NULL},
    {"gs_ireduce_scatterv", r_ireduce_scatterv, NULL},
    {"gs_allreduce_ex", r_allreduce_ex, NULL},
    {"gs_broadcast_ex", r_broadcast_ex, NULL},
    {"gs_reduce_ex", r_reduce_ex, NULL},
    {"gs_allgather_ex", r_allgather_ex, NULL},
    {"gs_reduce_scatter_ex", r_reduce_scatter_ex, NULL},
    {"gs_alltoall_ex", r_alltoall_ex, NULL},
    {"gs_gather_ex", r_gather_ex, NULL},
    {"gs_scatter_ex", r_scatter_ex, NULL},
    {"gs_allgatherv_ex", r_allgatherv_ex, NULL},
    {"gs_alltoallv_ex", r_alltoallv_ex, NULL},
    {"gs_reduce_scatterv_ex", r_reduce_scatterv_ex, NULL},
    {"gs_iallgatherv_ex", r_iallgatherv_ex, NULL},
    {"gs_ireduce_scatterv_ex", r_ireduce_scatterv_ex, NULL},
    {"gs_send", r_send, NULL},
    {"gs_recv", r_recv, NULL},
    {"gs_send_ex", r_send_ex, NULL},
    {"gs_recv_ex", r_recv_ex, NULL},
    {"gs_recv_status", r_recv_status, NULL},
    {"gs_probe", r_probe, NULL},
    {"gs_iprobe", r_iprobe, NULL},
    {"gs_group_start", r_group_start, NULL},
    {"gs_group_end", r_group_end, NULL},
    {"gs_iallreduce", r_iallreduce, NULL},
    {"gs_iallreduce_ex", r_iallreduce_ex, NULL},
    {"gs_ibroadcast", r_ibroadcast, NULL},
    {"gs_ireduce", r_ireduce, NULL},
    {"gs_iallgather", r_iallgather, NULL},
    {"gs_ireduce_scatter", r_ireduce_scatter, NULL},
    {"gs_ialltoall", r_ialltoall, NULL},
    {"gs_ibarrier", r_ibarrier, NULL},
    {"gs_isend", r_isend, NULL},
    {"gs_irecv", r_irecv, NULL},
    {"gs_ibroadcast_ex", r_ibroadcast_ex, NULL},
    {"gs_ireduce_ex", r_ireduce_ex, NULL},
    {"gs_iallgather_ex", r_iallgather_ex, NULL},
    {"gs_ireduce_scatter_ex", r_ireduce_scatter_ex, NULL},
    {"gs_ialltoall_ex", r_ialltoall_ex, NULL},
    {"gs_isend_ex", r_isend_ex, NULL},
    {"gs_irecv_ex", r_irecv_ex, NULL},
    {"gs_wait", r_wait, NULL},
    {"gs_test", r_test, NULL},
    {"gs_waitall", r_waitall, NULL},
    {"gs_irecv_status", r_irecv_status, NULL},
    {"gs_waitany", r_waitany, NULL},
    {"gs_testall", r_testall, NULL},
    {"gs_ef_create", r_ef_create, NULL},
    {"gs_ef_reset", r_ef_reset, NULL},
    {"gs_ef_destroy", r_ef_destroy, NULL},
    {"gs_codec_encoded_size", r_codec_encoded_size, NULL},
    {"gs_codec_scratch_size", r_codec_scratch_size, NULL},
    {"gs_codec_encode", r_codec_encode, NULL},
    {"gs_codec_decode", r_codec_decode, NULL},
    {"gs_codec_decode_accumulate", r_codec_decode_accumulate, NULL},
    {"gs_bucketer_create", r_bucketer_create, NULL},
    {"gs_bucketer_add", r_bucketer_add, NULL},
    {"gs_bucketer_destroy", r_bucketer_destroy, NULL},
    {"gs_bucketer_ready", r_bucketer_ready, NULL},
    {"gs_bucketer_wait", r_bucketer_wait, NULL},
    {"gs_bucketer_stats", r_bucketer_stats, NULL},
    {"gs_bucketer_bucket_info", r_bucketer_bucket_info, NULL},
    {"gs_bucketer_locate", r_bucketer_locate, NULL},
    {"gs_ps_create", r_ps_create, NULL},
    {"gs_ps_register", r_ps_register, NULL},
    {"gs_ps_destroy", r_ps_destroy, NULL},
    {"gs_ps_push", r_ps_push, NULL},
    {"gs_ps_pull", r_ps_pull, NULL},
    {"gs_ps_clock", r_ps_clock, NULL},
    {"gs_ps_wait", r_ps_wait, NULL},
    {"gs_ps_test", r_ps_test, NULL},
    {"gs_ps_waitall", r_ps_waitall, NULL},
    {"gs_ps_info", r_ps_info, NULL},
    /* gradsync/mpi.h needs <mpi.h> and an MPI job; its bad input is tests/mpi's. */
    {"gs_comm_init_mpi", NULL,
     "needs <mpi.h> and MPI_Init: its bad input (NULL comm_out, "
     "MPI_COMM_NULL) belongs in tests/mpi and is not written yet"},
};
#define NROWS (sizeof(ROWS) / sizeof(ROWS[0]))

static const row_t *find_row(const char *name)
{
    for (size_t i = 0; i < NROWS; i++)
        if (strcmp(ROWS[i].name, name) == 0)
            return &ROWS[i];
    return NULL;
}

int main(int argc, char **argv)
{
    const char *names = NULL;
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGSEGV, on_crash);
    signal(SIGBUS, on_crash);
    signal(SIGABRT, on_crash);
    signal(SIGFPE, on_crash);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--names") == 0 && i + 1 < argc)
            names = argv[++i];
        else if (strcmp(argv[i], "--verbose") == 0)
            g_verbose = 1;
        else {
            fprintf(stderr, "usage: api_badinput_check --names FILE [--verbose]\n");
            return 2;
        }
    }
    if (!names) {
        fprintf(stderr, "api_badinput_check: --names FILE (the GS_API functions) is required\n");
        return 2;
    }
    FILE *f = fopen(names, "r");
    if (!f) {
        perror(names);
        return 2;
    }
    gs_status_t st = gs_comm_init_env(&C, NULL);
    if (st != GS_OK) {
        printf("FAIL: gs_comm_init_env: %s: %s\n", gs_status_name(st), gs_last_error());
        fclose(f);
        return 1;
    }
    int nfun = 0, npass = 0, nfail = 0, nskip = 0, nmiss = 0;
    char line[256];
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\r\n \t")] = '\0';
        if (!line[0])
            continue;
        nfun++;
        const row_t *r = find_row(line);
        if (!r) {
            printf("MISSING %s: a public function without a bad-input row in "
                   "api_badinput_check.c\n",
                   line);
            nmiss++;
            continue;
        }
        if (!r->fn) {
            printf("SKIP %s: %s\n", line, r->skip);
            nskip++;
            continue;
        }
        g_row = r->name;
        g_bad = 0;
        g_checks = 0;
        R = (gs_request_t)&R;
        r->fn();
        if (R != (gs_request_t)&R) {
            printf("  FAIL %s: a refused call wrote its request output\n", r->name);
            g_bad++;
            R = (gs_request_t)&R;
        }
        if (g_bad) {
            printf("FAIL %s (%d of %d checks)\n", r->name, g_bad, g_checks);
            nfail++;
        } else {
            printf("ok   %s (%d checks)\n", r->name, g_checks);
            npass++;
        }
    }
    fclose(f);
    /* The communicator survived every refused call. */
    float x = 1, y = 0;
    g_row = "final allreduce";
    st = gs_allreduce(C, &x, &y, 1, GS_DTYPE_F32, GS_OP_SUM);
    if (st != GS_OK || y != 1.0f) {
        printf("FAIL the communicator no longer works: %s\n", gs_status_name(st));
        nfail++;
    }
    (void)gs_comm_destroy(C);
    printf("api_badinput_check: %d functions, %d passed, %d failed, %d skipped, %d missing\n", nfun,
           npass, nfail, nskip, nmiss);
    return (nfail || nmiss || nfun == 0) ? 1 : 0;
}
