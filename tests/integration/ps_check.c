/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ps_check: multi-rank checks of the parameter server (gradsync/ps.h)
 * through the public API, run under gsrun (or by run_ps_fault.sh for kill).
 *
 *   ps_check exact    every worker pushes known integer values to small keys
 *                     (each on one server) and split keys (over every server,
 *                     several 1 MiB chunks) for --iters clocks, with --depth
 *                     pushes of a key in flight under ASP; SGD lr=1 without
 *                     momentum, so the final state must be init - (sum of all
 *                     pushes) exactly: a lost or doubled push shows. Under
 *                     BSP every pull of every clock is checked exactly too.
 *   ps_check bound    worker w pushes -1 into block w of one key each clock
 *                     and pulls it back; the pulled block w counts w's pushes
 *                     the server had applied. Checked on every pull: every
 *                     worker's count >= r - s + 1 (SSP; BSP: == r + 1), and a
 *                     shared-memory board of the workers' clocks shows no one
 *                     more than s clocks ahead of the slowest. --slow-rank R
 *                     --slow-ms M makes one worker slow; --expect-ahead
 *                     requires that some pull actually ran ahead (SSP).
 *   ps_check badinput wrong count, dtype, unknown key, NULL buffer, a second
 *                     push in one clock, a push on a server-only rank,
 *                     registrations and options that differ between ranks:
 *                     each rejected with the right status and a sentence,
 *                     and the state unchanged afterwards.
 *   ps_check rules    momentum SGD with weight decay, Adam and a callback
 *                     (BSP) against a reference computed here.
 *   ps_check codec    --codec fp16 (lossless for the small integers: exact
 *                     sums) or int8 with error feedback (the state converges
 *                     to the exact sum within a quantisation step).
 *   ps_check kill     BSP loop; --victim R raises SIGKILL at --kill-after
 *                     with pushes in flight; prints READY, RUNNING, KILL and
 *                     RESULT lines (CLOCK_REALTIME ms) for run_ps_fault.sh.
 *   ps_check ahead    BSP: rank 1 (a worker) pushes and clocks --iters times
 *                     without pulling. Its push of round --ahead-limit + 1
 *                     must fail with GS_ERR_INVALID_USAGE naming rank 1, the
 *                     key and the limit and saying to pull, and no rank's
 *                     peak RSS may grow by more than --hwm-mb (the servers
 *                     keep at most the limit's pushes per worker and shard,
 *                     as sent). Then the other workers catch up and every
 *                     worker pulls: the kept pushes were applied in their
 *                     rounds and the refused one was not, exactly, and a
 *                     pull right after the refusal waits for the previous
 *                     round, not for the refused push.
 *
 * Common: --consistency bsp|ssp|asp --staleness S --servers S --dtype
 * f32|f64|f16|bf16 --iters N --verbose. Exit status 0 when every check
 * passed.
 */
#include <gradsync/compress.h>
#include <gradsync/gradsync.h>
#include <gradsync/ps.h>

#include <ctype.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "check_report.h"
#include "tc_clock.h"

static struct {
    const char *mode;
    gs_ps_consistency_t consistency;
    int staleness;
    int servers;
    gs_dtype_t dtype;
    int iters;
    int depth;
    int slow_rank;
    int slow_ms;
    int expect_ahead;
    int expect_violation;
    const char *codec;
    int victim;
    int kill_after;
    double max_seconds;
    long big;
    int expect_servers;
    int ahead_limit;
    long hwm_mb;
} g_opt = {NULL, GS_PS_BSP, 2,  GS_UNSET, GS_DTYPE_F32, 40,     4,  -1, 0, 0,
           0,    NULL,      -1, 5,        60.0,         600011, -1, 2,  64};

static gs_comm_t g_comm;
static int g_world;

/* ====================================================================== */
/* Helpers                                                                */
/* ====================================================================== */

static long long wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static size_t esize(gs_dtype_t dt)
{
    return (dt == GS_DTYPE_F64) ? 8 : (dt == GS_DTYPE_F32) ? 4 : 2;
}

static float h2f(uint16_t h)
{
    const uint32_t s = (uint32_t)(h >> 15) << 31;
    const uint32_t e = (h >> 10) & 31u;
    const uint32_t m = h & 1023u;
    uint32_t bits;
    float f;

    if (e == 0) {
        f = ldexpf((float)m, -24);
        return s ? -f : f;
    }
    if (e == 31) {
        bits = s | 0x7f800000u | (m << 13);
    } else {
        bits = s | ((e + 112u) << 23) | (m << 13);
    }
    memcpy(&f, &bits, 4);
    return f;
}

/* Exact for the small integers the checks use (|x| <= 2048). */
static uint16_t f2h(float x)
{
    uint32_t bits;
    uint32_t s;
    int e;
    uint32_t m;

    if (x == 0.0f) {
        return 0;
    }
    memcpy(&bits, &x, 4);
    s = (bits >> 31) << 15;
    e = (int)((bits >> 23) & 255u) - 127 + 15;
    m = (bits >> 13) & 1023u;
    return (uint16_t)(s | ((uint32_t)e << 10) | m);
}

static double get(const void *p, gs_dtype_t dt, size_t i)
{
    switch (dt) {
    case GS_DTYPE_F64:
        return ((const double *)p)[i];
    case GS_DTYPE_F32:
        return ((const float *)p)[i];
    case GS_DTYPE_F16:
        return h2f(((const uint16_t *)p)[i]);
    default: {
        const uint32_t bits = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;

        memcpy(&f, &bits, 4);
        return f;
    }
    }
}

static void set(void *p, gs_dtype_t dt, size_t i, double v)
{
    switch (dt) {
    case GS_DTYPE_F64:
        ((double *)p)[i] = v;
        break;
    case GS_DTYPE_F32:
        ((float *)p)[i] = (float)v;
        break;
    case GS_DTYPE_F16:
        ((uint16_t *)p)[i] = f2h((float)v);
        break;
    default: {
        const float f = (float)v;
        uint32_t bits;

        memcpy(&bits, &f, 4);
        ((uint16_t *)p)[i] = (uint16_t)(bits >> 16); /* exact for small integers */
        break;
    }
    }
}

static int parse_dtype(const char *s, gs_dtype_t *out)
{
    static const struct {
        const char *name;
        gs_dtype_t dt;
    } t[] = {{"f32", GS_DTYPE_F32},
             {"f64", GS_DTYPE_F64},
             {"f16", GS_DTYPE_F16},
             {"bf16", GS_DTYPE_BF16}};

    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        if (strcmp(s, t[i].name) == 0) {
            *out = t[i].dt;
            return 0;
        }
    }
    return -1;
}

/* True when @p msg contains "rank N" or "peer N" with N == want (any N when want < 0). */
static int names_rank(const char *msg, int want)
{
    for (const char *p = msg; *p; p++) {
        const char *q;

        if ((strncasecmp(p, "rank", 4) != 0) && (strncasecmp(p, "peer", 4) != 0)) {
            continue;
        }
        q = p + 4;
        while ((*q == ' ') || (*q == 's')) {
            q++;
        }
        if (!isdigit((unsigned char)*q)) {
            continue;
        }
        if ((want < 0) || (strtol(q, NULL, 10) == want)) {
            return 1;
        }
    }
    return 0;
}

static gs_ps_opts_t base_opts(void)
{
    gs_ps_opts_t o = GS_PS_OPTS_INIT;

    o.consistency = g_opt.consistency;
    o.staleness = g_opt.staleness;
    o.servers = g_opt.servers;
    o.lr = 1.0;
    return o;
}

#define CHECK_OK(_label, _expr)                                                                    \
    do {                                                                                           \
        gs_status_t _st = (_expr);                                                                 \
        if (_st != GS_OK) {                                                                        \
            fail(_label, "%s: %s", gs_status_name(_st), gs_last_error());                          \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

/* ====================================================================== */
/* exact: no push lost or applied twice                                   */
/* ====================================================================== */

/* Value worker w pushes at iteration i, element j: a small integer. */
static double push_value(int w, int i, size_t j, int bound)
{
    return (double)((long)((size_t)w * 7u + (size_t)i * 3u + j) % (2 * bound + 1)) - bound;
}

static double init_value(size_t j)
{
    return (double)(j % 11);
}

typedef struct key_spec {
    uint64_t id;
    size_t count;
} key_spec_t;

static int run_exact(gs_ps_t ps, const gs_ps_info_t *info)
{
    key_spec_t keys[] = {{101, 1}, {102, 7}, {103, 1031}, {104, 65537}, {105, 0}, {106, 3}};
    const size_t nkeys = sizeof(keys) / sizeof(keys[0]);
    const gs_dtype_t dt = g_opt.dtype;
    const int bound = (dt == GS_DTYPE_BF16) ? 1 : 2;
    const int W = info->nworkers;
    const int iters = g_opt.iters;
    const int depth = (g_opt.consistency == GS_PS_ASP) ? g_opt.depth : 1;
    void *bufs[6][16];
    double *want[6];
    void *out;
    gs_ps_request_t reqs[6][16];
    size_t maxc = 0;
    long bad = 0;

    keys[4].count = (size_t)g_opt.big;
    memset(reqs, 0, sizeof(reqs));
    for (size_t k = 0; k < nkeys; k++) {
        void *init = malloc(keys[k].count * esize(dt));

        want[k] = malloc(keys[k].count * sizeof(double));
        if ((init == NULL) || (want[k] == NULL)) {
            fail("exact", "out of memory");
            return -1;
        }
        for (size_t j = 0; j < keys[k].count; j++) {
            set(init, dt, j, init_value(j));
            want[k][j] = init_value(j);
        }
        CHECK_OK("exact register", gs_ps_register(ps, keys[k].id, keys[k].count, dt,
                                                  (info->rank == 0) ? init : NULL));
        free(init);
        if (keys[k].count > maxc) {
            maxc = keys[k].count;
        }
    }
    out = malloc(maxc * esize(dt));
    for (size_t k = 0; k < nkeys; k++) {
        for (int d = 0; d < depth; d++) {
            bufs[k][d] = malloc(keys[k].count * esize(dt));
        }
    }
    for (int i = 0; i < iters; i++) {
        const int slot = i % depth;

        /* Every rank knows what every worker pushes in round i. */
        for (size_t k = 0; k < nkeys; k++) {
            for (size_t j = 0; j < keys[k].count; j++) {
                for (int w = 0; w < W; w++) {
                    want[k][j] -= push_value(w, i, j, bound);
                }
            }
        }
        if (info->worker < 0) {
            continue;
        }
        for (size_t k = 0; k < nkeys; k++) {
            if (reqs[k][slot] != GS_PS_REQUEST_NULL) {
                CHECK_OK("exact wait push", gs_ps_wait(&reqs[k][slot]));
            }
            for (size_t j = 0; j < keys[k].count; j++) {
                set(bufs[k][slot], dt, j, push_value(info->worker, i, j, bound));
            }
            CHECK_OK("exact push",
                     gs_ps_push(ps, keys[k].id, bufs[k][slot], keys[k].count, dt, &reqs[k][slot]));
        }
        if (g_opt.consistency == GS_PS_BSP) {
            /* The state after round i, exactly. */
            for (size_t k = 0; k < nkeys; k++) {
                gs_ps_request_t r = GS_PS_REQUEST_NULL;

                CHECK_OK("exact wait push", gs_ps_wait(&reqs[k][slot]));
                CHECK_OK("exact pull", gs_ps_pull(ps, keys[k].id, out, keys[k].count, dt, &r));
                CHECK_OK("exact wait pull", gs_ps_wait(&r));
                for (size_t j = 0; j < keys[k].count; j++) {
                    if ((get(out, dt, j) != want[k][j]) && (bad++ < 5)) {
                        fail("exact bsp round",
                             "key %llu element %zu after round %d is %g, "
                             "expected %g",
                             (unsigned long long)keys[k].id, j, i, get(out, dt, j), want[k][j]);
                    }
                }
            }
        }
        if (g_opt.consistency != GS_PS_ASP) {
            for (size_t k = 0; k < nkeys; k++) {
                CHECK_OK("exact wait push", gs_ps_wait(&reqs[k][slot]));
            }
        }
        CHECK_OK("exact clock", gs_ps_clock(ps));
    }
    if (info->worker >= 0) {
        for (size_t k = 0; k < nkeys; k++) {
            CHECK_OK("exact wait push", gs_ps_waitall((size_t)depth, reqs[k]));
        }
    }
    /* Every push was taken (acknowledged) before anyone passes here. */
    CHECK_OK("exact barrier", gs_barrier(g_comm));
    if (info->worker >= 0) {
        for (size_t k = 0; k < nkeys; k++) {
            gs_ps_request_t r = GS_PS_REQUEST_NULL;
            long badk = 0;

            CHECK_OK("exact final pull", gs_ps_pull(ps, keys[k].id, out, keys[k].count, dt, &r));
            CHECK_OK("exact final wait", gs_ps_wait(&r));
            for (size_t j = 0; j < keys[k].count; j++) {
                if ((get(out, dt, j) != want[k][j]) && (badk++ < 3)) {
                    fail("exact final",
                         "key %llu element %zu is %g, expected %g (%d workers x %d "
                         "pushes)",
                         (unsigned long long)keys[k].id, j, get(out, dt, j), want[k][j], W, iters);
                }
            }
            if (badk == 0) {
                pass("exact final");
            }
        }
    }
    for (size_t k = 0; k < nkeys; k++) {
        for (int d = 0; d < depth; d++) {
            free(bufs[k][d]);
        }
        free(want[k]);
    }
    free(out);
    return 0;
}

/* ====================================================================== */
/* bound: SSP's staleness bound                                           */
/* ====================================================================== */

static int64_t *board_open(int nworkers, char *path, size_t plen)
{
    const char *port = getenv("GS_MASTER_PORT");
    int fd;
    void *p;

    snprintf(path, plen, "/tmp/gs_ps_board.%s", (port != NULL) ? port : "0");
    fd = open(path, O_RDWR | O_CREAT, 0600);
    if (fd < 0) {
        return NULL;
    }
    if (ftruncate(fd, (off_t)((size_t)nworkers * sizeof(int64_t))) != 0) {
        close(fd);
        return NULL;
    }
    p = mmap(NULL, (size_t)nworkers * sizeof(int64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return (p == MAP_FAILED) ? NULL : (int64_t *)p;
}

static int run_bound(gs_ps_t ps, const gs_ps_info_t *info)
{
    const int W = info->nworkers;
    const size_t B = 3;
    const size_t count = (size_t)W * B;
    const int s = (g_opt.consistency == GS_PS_BSP) ? 0 : g_opt.staleness;
    const int w = info->worker;
    char path[128];
    int64_t *board = board_open(W, path, sizeof(path));
    float *grad = calloc(count, sizeof(float));
    float *out = calloc(count, sizeof(float));
    long violations = 0;
    int max_ahead = 0;
    int max_board_lag = 0;

    if ((board == NULL) || (grad == NULL) || (out == NULL)) {
        fail("bound", "setup failed");
        return -1;
    }
    CHECK_OK("bound register", gs_ps_register(ps, 7, count, GS_DTYPE_F32, NULL));
    if (w >= 0) {
        board[w] = -1;
        for (size_t j = 0; j < B; j++) {
            grad[(size_t)w * B + j] = -1.0f; /* lr 1: +1 per applied push */
        }
    }
    CHECK_OK("bound barrier", gs_barrier(g_comm));
    if (w >= 0) {
        for (int t = 0; t < g_opt.iters; t++) {
            gs_ps_request_t r = GS_PS_REQUEST_NULL;
            int64_t minb = INT64_MAX;

            if ((info->rank == g_opt.slow_rank) && (g_opt.slow_ms > 0)) {
                usleep((useconds_t)g_opt.slow_ms * 1000u);
            }
            __atomic_store_n(&board[w], (int64_t)t, __ATOMIC_SEQ_CST);
            CHECK_OK("bound push", gs_ps_push(ps, 7, grad, count, GS_DTYPE_F32, &r));
            CHECK_OK("bound wait push", gs_ps_wait(&r));
            CHECK_OK("bound pull", gs_ps_pull(ps, 7, out, count, GS_DTYPE_F32, &r));
            CHECK_OK("bound wait pull", gs_ps_wait(&r));
            /* Pulled after pushing in clock t: round r = t. */
            for (int v = 0; v < W; v++) {
                const int64_t seen = (int64_t)out[(size_t)v * B];
                const int64_t b = __atomic_load_n(&board[v], __ATOMIC_SEQ_CST);
                const int ok_ssp = seen >= (int64_t)t - s + 1;
                const int ok_bsp = (g_opt.consistency != GS_PS_BSP) || (seen == t + 1);

                if (b < minb) {
                    minb = b;
                }
                if ((!ok_ssp || !ok_bsp) && (violations++ < 5) && !g_opt.expect_violation) {
                    fail("bound values",
                         "worker %d at clock %d pulled %lld pushes of worker %d; "
                         "staleness %d needs %s %d",
                         w, t, (long long)seen, v, s, ok_ssp ? "exactly" : "at least",
                         ok_ssp ? t + 1 : t - s + 1);
                }
                if ((int)(t + 1 - seen) > max_ahead) {
                    max_ahead = (int)(t + 1 - seen);
                }
            }
            if ((int)(t - minb) > max_board_lag) {
                max_board_lag = (int)(t - minb);
            }
            if ((t - minb > s) && (violations++ < 5) && !g_opt.expect_violation) {
                fail("bound board",
                     "worker %d finished a pull at clock %d while the slowest "
                     "worker was at clock %lld (staleness %d)",
                     w, t, (long long)minb, s);
            }
            CHECK_OK("bound clock", gs_ps_clock(ps));
        }
        if (g_opt.expect_violation) {
            /* The negative control: a server that does not wait (ASP under the
             * SSP check) must be caught by the checks above. */
            if ((violations == 0) && (info->rank != g_opt.slow_rank)) {
                fail("bound control", "no violation seen although nothing waits: the check "
                                      "cannot catch a broken bound");
            } else {
                pass("bound control");
            }
        } else if (violations == 0) {
            pass("bound");
        }
        /* ahead_board: clocks between this worker and the slowest one when a
         * pull completed (at most s); missing: the most pushes of another
         * worker a pull lacked against this worker's own count (at most s - 1). */
        printf("BOUND rank=%d worker=%d staleness=%d ahead_board=%d missing=%d\n", info->rank, w, s,
               max_board_lag, max_ahead - 1);
        if (g_opt.expect_ahead && (info->rank != g_opt.slow_rank) && (s > 0) &&
            (max_board_lag < 1)) {
            fail("bound ahead",
                 "worker %d never ran ahead of the slow worker: the test did not "
                 "exercise the bound",
                 w);
        }
    }
    CHECK_OK("bound barrier", gs_barrier(g_comm));
    munmap(board, (size_t)W * sizeof(int64_t));
    if (info->rank == 0) {
        unlink(path);
    }
    free(grad);
    free(out);
    return 0;
}

/* ====================================================================== */
/* badinput                                                               */
/* ====================================================================== */

static void expect_status(const char *label, gs_status_t got, gs_status_t want, const char *needle)
{
    if (got != want) {
        fail(label, "got %s, expected %s (%s)", gs_status_name(got), gs_status_name(want),
             gs_last_error());
        return;
    }
    if ((needle != NULL) && (strstr(gs_last_error(), needle) == NULL)) {
        fail(label, "the error \"%s\" does not mention \"%s\"", gs_last_error(), needle);
        return;
    }
    pass(label);
}

static int run_badinput(gs_ps_t ps, const gs_ps_info_t *info)
{
    float a[10];
    float a_bad[11];
    double d[10];
    float out[10];
    gs_ps_request_t r = GS_PS_REQUEST_NULL;
    gs_ps_request_t r2 = GS_PS_REQUEST_NULL;
    gs_status_t st;

    for (int i = 0; i < 10; i++) {
        a[i] = 1.0f;
        d[i] = 1.0;
    }
    CHECK_OK("bad register", gs_ps_register(ps, 1, 10, GS_DTYPE_F32, NULL));
    if (info->worker >= 0) {
        expect_status("push short count", gs_ps_push(ps, 1, a, 9, GS_DTYPE_F32, &r),
                      GS_ERR_INVALID_ARG, "10 elements");
        expect_status("push long count", gs_ps_push(ps, 1, a_bad, 11, GS_DTYPE_F32, &r),
                      GS_ERR_INVALID_ARG, "11 elements");
        expect_status("push wrong dtype", gs_ps_push(ps, 1, d, 10, GS_DTYPE_F64, &r),
                      GS_ERR_INVALID_ARG, "f64");
        expect_status("push unknown key", gs_ps_push(ps, 99, a, 10, GS_DTYPE_F32, &r),
                      GS_ERR_INVALID_ARG, "not registered");
        expect_status("pull unknown key", gs_ps_pull(ps, 99, out, 10, GS_DTYPE_F32, &r),
                      GS_ERR_INVALID_ARG, "key 99 is not registered");
        expect_status("pull wrong count", gs_ps_pull(ps, 1, out, 3, GS_DTYPE_F32, &r),
                      GS_ERR_INVALID_ARG, "3 elements");
        expect_status("push NULL", gs_ps_push(ps, 1, NULL, 10, GS_DTYPE_F32, &r),
                      GS_ERR_INVALID_ARG, "NULL");
        expect_status("push NULL req", gs_ps_push(ps, 1, a, 10, GS_DTYPE_F32, NULL),
                      GS_ERR_INVALID_ARG, "req_out");
        if (r != GS_PS_REQUEST_NULL) {
            fail("bad request untouched", "a rejected call wrote *req_out");
        }
        /* One real push, then a second one in the same clock. */
        CHECK_OK("bad push", gs_ps_push(ps, 1, a, 10, GS_DTYPE_F32, &r));
        st = gs_ps_push(ps, 1, a, 10, GS_DTYPE_F32, &r2);
        if (g_opt.consistency == GS_PS_ASP) {
            CHECK_OK("bad second push (asp)", st);
            CHECK_OK("bad wait", gs_ps_wait(&r2));
        } else {
            expect_status("second push in a clock", st, GS_ERR_INVALID_USAGE, "already pushed");
        }
        CHECK_OK("bad wait", gs_ps_wait(&r));
        CHECK_OK("bad clock", gs_ps_clock(ps));
    } else {
        expect_status("push on a server", gs_ps_push(ps, 1, a, 10, GS_DTYPE_F32, &r),
                      GS_ERR_INVALID_USAGE, "server-only");
        expect_status("clock on a server", gs_ps_clock(ps), GS_ERR_INVALID_USAGE, "server-only");
    }
    CHECK_OK("bad barrier", gs_barrier(g_comm));
    if (info->worker >= 0) {
        const int per = (g_opt.consistency == GS_PS_ASP) ? 2 : 1;
        const float want = -(float)(per * info->nworkers);

        CHECK_OK("bad pull", gs_ps_pull(ps, 1, out, 10, GS_DTYPE_F32, &r));
        CHECK_OK("bad wait pull", gs_ps_wait(&r));
        for (int i = 0; i < 10; i++) {
            if (out[i] != want) {
                fail("nothing changed",
                     "element %d is %g, expected %g: a rejected call changed "
                     "the state",
                     i, (double)out[i], (double)want);
                break;
            }
            if (i == 9) {
                pass("nothing changed");
            }
        }
    }
    /* A registration that differs on one rank fails everywhere, naming it. */
    if (g_world > 1) {
        st = gs_ps_register(ps, 50, (info->rank == 1) ? 3 : 4, GS_DTYPE_F32, NULL);
        expect_status("register mismatch", st, GS_ERR_INVALID_ARG, NULL);
        if ((st == GS_ERR_INVALID_ARG) && !names_rank(gs_last_error(), info->rank == 1 ? 0 : 1) &&
            (info->rank != 1)) {
            fail("register mismatch names", "\"%s\" does not name rank 1", gs_last_error());
        }
    }
    expect_status("register int", gs_ps_register(ps, 51, 4, GS_DTYPE_I32, NULL), GS_ERR_INVALID_ARG,
                  "f32");
    expect_status("register twice", gs_ps_register(ps, 1, 10, GS_DTYPE_F32, NULL),
                  GS_ERR_INVALID_ARG, "already registered");
    /* The handle still works. */
    CHECK_OK("bad register after", gs_ps_register(ps, 52, 4, GS_DTYPE_F32, NULL));
    if (info->worker >= 0) {
        CHECK_OK("bad pull after", gs_ps_pull(ps, 52, out, 4, GS_DTYPE_F32, &r));
        CHECK_OK("bad wait after", gs_ps_wait(&r));
    }
    /* Options that differ between ranks, and invalid ones. */
    {
        gs_ps_opts_t o = base_opts();
        gs_ps_t ps2 = GS_PS_NULL;

        if (g_world > 1) {
            o.lr = (info->rank == g_world - 1) ? 0.5 : 1.0;
            st = gs_ps_create(g_comm, &o, &ps2);
            expect_status("create mismatch", st, GS_ERR_INVALID_ARG, "differ");
            if (st == GS_OK) {
                (void)gs_ps_destroy(ps2);
            }
        }
        o = base_opts();
        o.staleness = -1;
        o.consistency = GS_PS_SSP;
        st = gs_ps_create(g_comm, &o, &ps2);
        expect_status("create bad staleness", st, GS_ERR_INVALID_ARG, "staleness");
        o = base_opts();
        o.servers = g_world;
        st = gs_ps_create(g_comm, &o, &ps2);
        expect_status("create all servers", st, GS_ERR_INVALID_ARG, "server");
        o = base_opts();
        o.rule = GS_PS_RULE_CALLBACK;
        st = gs_ps_create(g_comm, &o, &ps2);
        expect_status("create callback NULL", st, GS_ERR_INVALID_ARG, "update_fn");
    }
    /* A malformed GS_PS_SERVERS is named (every rank sets the same). */
    {
        gs_ps_opts_t o = GS_PS_OPTS_INIT;
        gs_ps_t ps2 = GS_PS_NULL;
        const char *saved = getenv("GS_PS_SERVERS");
        char keep[64] = "";

        if (saved != NULL) {
            snprintf(keep, sizeof(keep), "%s", saved);
        }
        setenv("GS_PS_SERVERS", "two", 1);
        st = gs_ps_create(g_comm, &o, &ps2);
        expect_status("create GS_PS_SERVERS", st, GS_ERR_INVALID_ARG, "GS_PS_SERVERS=two");
        if (st == GS_OK) {
            (void)gs_ps_destroy(ps2);
        }
        if (saved != NULL) {
            setenv("GS_PS_SERVERS", keep, 1);
        } else {
            unsetenv("GS_PS_SERVERS");
        }
    }
    expect_status("wait NULL", gs_ps_wait(NULL), GS_ERR_INVALID_ARG, NULL);
    r = GS_PS_REQUEST_NULL;
    expect_status("wait request NULL", gs_ps_wait(&r), GS_OK, NULL);
    return 0;
}

/* ====================================================================== */
/* rules                                                                  */
/* ====================================================================== */

static gs_status_t double_it(void *user, uint64_t key, size_t offset, size_t count, void *weights,
                             gs_dtype_t dtype, const void *grad, gs_dtype_t grad_dtype)
{
    long *calls = (long *)user;
    float *w = (float *)weights;
    const float *g = (const float *)grad;

    (void)key;
    (void)offset;
    if ((dtype != GS_DTYPE_F32) || (grad_dtype != GS_DTYPE_F32)) {
        return GS_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < count; i++) {
        w[i] += 2.0f * g[i];
    }
    (*calls)++;
    return GS_OK;
}

static double rule_grad(int w, int i, size_t j)
{
    return 0.01 * (double)((w + 1) * (int)(j % 5) - i) + 0.003 * (double)w;
}

/* One rule over a few BSP rounds against a double-precision reference. */
static int rules_one(const char *label, const gs_ps_opts_t *o, int nworkers, int worker)
{
    const size_t n = 2053; /* split over the servers (split_bytes 1 KiB) */
    const int rounds = 6;
    gs_ps_t ps = GS_PS_NULL;
    float *w0 = malloc(n * sizeof(float));
    float *g = malloc(n * sizeof(float));
    float *out = malloc(n * sizeof(float));
    double *ref = malloc(n * sizeof(double));
    double *m = calloc(n, sizeof(double));
    double *v = calloc(n, sizeof(double));
    double maxerr = 0;

    CHECK_OK(label, gs_ps_create(g_comm, o, &ps));
    for (size_t j = 0; j < n; j++) {
        w0[j] = (float)(0.5 - 0.001 * (double)j);
        ref[j] = w0[j];
    }
    CHECK_OK(label, gs_ps_register(ps, 9, n, GS_DTYPE_F32, w0));
    for (int i = 0; i < rounds; i++) {
        gs_ps_request_t r = GS_PS_REQUEST_NULL;

        /* Reference: one step with the sum of the workers' gradients. */
        for (size_t j = 0; j < n; j++) {
            double gs = 0;

            for (int ww = 0; ww < nworkers; ww++) {
                gs += (double)(float)rule_grad(ww, i, j);
            }
            if (o->rule == GS_PS_RULE_CALLBACK) {
                ref[j] += 2.0 * gs;
                continue;
            }
            gs += o->weight_decay * ref[j];
            if (o->rule == GS_PS_RULE_SGD) {
                m[j] = o->momentum * m[j] + gs;
                ref[j] -= o->lr * m[j];
            } else {
                m[j] = o->beta1 * m[j] + (1 - o->beta1) * gs;
                v[j] = o->beta2 * v[j] + (1 - o->beta2) * gs * gs;
                ref[j] -= o->lr * (m[j] / (1 - pow(o->beta1, i + 1))) /
                          (sqrt(v[j] / (1 - pow(o->beta2, i + 1))) + o->eps);
            }
        }
        if (worker < 0) {
            continue;
        }
        for (size_t j = 0; j < n; j++) {
            g[j] = (float)rule_grad(worker, i, j);
        }
        CHECK_OK(label, gs_ps_push(ps, 9, g, n, GS_DTYPE_F32, &r));
        CHECK_OK(label, gs_ps_wait(&r));
        CHECK_OK(label, gs_ps_pull(ps, 9, out, n, GS_DTYPE_F32, &r));
        CHECK_OK(label, gs_ps_wait(&r));
        for (size_t j = 0; j < n; j++) {
            const double e = fabs((double)out[j] - ref[j]) / (1.0 + fabs(ref[j]));

            if (e > maxerr) {
                maxerr = e;
            }
        }
        CHECK_OK(label, gs_ps_clock(ps));
    }
    if (maxerr > 2e-5) {
        fail(label, "relative error %.3g against the reference after %d rounds", maxerr, rounds);
    } else {
        pass(label);
    }
    CHECK_OK(label, gs_ps_destroy(ps));
    free(w0);
    free(g);
    free(out);
    free(ref);
    free(m);
    free(v);
    return 0;
}

/* Refuses any round whose gradient holds a value of 1000 or more. */
static gs_status_t refuse_big(void *user, uint64_t key, size_t offset, size_t count, void *weights,
                              gs_dtype_t dtype, const void *grad, gs_dtype_t grad_dtype)
{
    const float *g = (const float *)grad;
    float *w = (float *)weights;

    (void)user;
    (void)key;
    (void)offset;
    (void)dtype;
    (void)grad_dtype;
    for (size_t i = 0; i < count; i++) {
        if (g[i] >= 1000.0f) {
            return GS_ERR_INVALID_ARG;
        }
    }
    for (size_t i = 0; i < count; i++) {
        w[i] -= g[i];
    }
    return GS_OK;
}

/* BSP: a round the callback refuses fails exactly the pulls of that round,
 * leaves the values alone, and the next rounds go on. */
static int rules_refused(int nworkers, int worker)
{
    const size_t n = 1031;
    gs_ps_opts_t o = base_opts();
    gs_ps_t ps = GS_PS_NULL;
    float g[1031];
    float out[1031];
    int bad = 0;

    o.consistency = GS_PS_BSP;
    o.split_bytes = 1024;
    o.rule = GS_PS_RULE_CALLBACK;
    o.update_fn = refuse_big;
    CHECK_OK("rules refused", gs_ps_create(g_comm, &o, &ps));
    CHECK_OK("rules refused", gs_ps_register(ps, 3, n, GS_DTYPE_F32, NULL));
    for (int i = 0; (i < 3) && (worker >= 0); i++) {
        gs_ps_request_t r = GS_PS_REQUEST_NULL;
        gs_status_t st;

        for (size_t j = 0; j < n; j++) {
            g[j] = (i == 1) ? 5000.0f : 1.0f;
        }
        CHECK_OK("rules refused", gs_ps_push(ps, 3, g, n, GS_DTYPE_F32, &r));
        CHECK_OK("rules refused", gs_ps_wait(&r));
        CHECK_OK("rules refused", gs_ps_pull(ps, 3, out, n, GS_DTYPE_F32, &r));
        st = gs_ps_wait(&r);
        if (i == 1) {
            if ((st != GS_ERR_INVALID_ARG) || (strstr(gs_last_error(), "callback") == NULL)) {
                fail("rules refused", "the pull of the refused round returned %s (%s)",
                     gs_status_name(st), gs_last_error());
                bad = 1;
            }
        } else if (st != GS_OK) {
            fail("rules refused", "round %d: %s: %s", i, gs_status_name(st), gs_last_error());
            bad = 1;
        } else if (out[0] != -(float)(nworkers * ((i == 0) ? 1 : 2))) {
            fail("rules refused", "round %d: value %g, expected %g (the refused round skipped)", i,
                 (double)out[0], -(double)(nworkers * ((i == 0) ? 1 : 2)));
            bad = 1;
        }
        CHECK_OK("rules refused", gs_ps_clock(ps));
    }
    if (!bad) {
        pass("rules refused");
    }
    CHECK_OK("rules refused", gs_ps_destroy(ps));
    return 0;
}

static int run_rules(const gs_ps_info_t *info)
{
    gs_ps_opts_t o = base_opts();
    long calls = 0;

    o.consistency = GS_PS_BSP;
    o.split_bytes = 1024;
    o.lr = 0.05;
    o.momentum = 0.9;
    o.weight_decay = 0.01;
    if (rules_one("rules sgd momentum wd", &o, info->nworkers, info->worker) != 0) {
        return -1;
    }
    o = base_opts();
    o.consistency = GS_PS_BSP;
    o.split_bytes = 1024;
    o.rule = GS_PS_RULE_ADAM;
    o.lr = 0.01;
    o.weight_decay = 0.001;
    o.beta1 = 0.9;
    o.beta2 = 0.999;
    o.eps = 1e-8;
    if (rules_one("rules adam", &o, info->nworkers, info->worker) != 0) {
        return -1;
    }
    o = base_opts();
    o.consistency = GS_PS_BSP;
    o.split_bytes = 1024;
    o.rule = GS_PS_RULE_CALLBACK;
    o.weight_decay = 0.0;
    o.update_fn = double_it;
    o.user = &calls;
    if (rules_one("rules callback", &o, info->nworkers, info->worker) != 0) {
        return -1;
    }
    if ((info->server >= 0) && (calls == 0)) {
        fail("rules callback calls", "the callback never ran on server rank %d", info->rank);
    }
    return rules_refused(info->nworkers, info->worker);
}

/* ====================================================================== */
/* codec                                                                  */
/* ====================================================================== */

static int run_codec_int8(gs_ps_t ps, const gs_ps_info_t *info)
{
    const size_t n = 5003;
    const int T = g_opt.iters;
    float *g = malloc(n * sizeof(float));
    float *out = malloc(n * sizeof(float));
    double maxg = 0;
    double maxerr = 0;

    CHECK_OK("codec register", gs_ps_register(ps, 11, n, GS_DTYPE_F32, NULL));
    for (size_t j = 0; j < n; j++) {
        g[j] = (float)sin(0.37 * (double)j + (double)info->worker);
    }
    if (info->worker >= 0) {
        for (int i = 0; i < T; i++) {
            gs_ps_request_t r = GS_PS_REQUEST_NULL;

            CHECK_OK("codec push", gs_ps_push(ps, 11, g, n, GS_DTYPE_F32, &r));
            CHECK_OK("codec wait", gs_ps_wait(&r));
            CHECK_OK("codec clock", gs_ps_clock(ps));
        }
    }
    CHECK_OK("codec barrier", gs_barrier(g_comm));
    if (info->worker >= 0) {
        gs_ps_request_t r = GS_PS_REQUEST_NULL;

        CHECK_OK("codec pull", gs_ps_pull(ps, 11, out, n, GS_DTYPE_F32, &r));
        CHECK_OK("codec wait", gs_ps_wait(&r));
        for (size_t j = 0; j < n; j++) {
            double want = 0;

            for (int w = 0; w < info->nworkers; w++) {
                const double x = (double)(float)sin(0.37 * (double)j + (double)w);

                want -= (double)T * x;
                if (fabs(x) > maxg) {
                    maxg = fabs(x);
                }
            }
            if (fabs(out[j] - want) > maxerr) {
                maxerr = fabs(out[j] - want);
            }
        }
        /* With error feedback only the last residual is missing: at most one
         * int8 step (max|g| / 127) per worker, plus f32 rounding. */
        if (maxerr > (double)info->nworkers * (maxg / 127.0) + 1e-3 * T) {
            fail("codec int8 ef", "max error %.4g after %d pushes per worker", maxerr, T);
        } else {
            pass("codec int8 ef");
        }
        printf("CODEC rank=%d int8 max_error=%.4g bound=%.4g\n", info->rank, maxerr,
               (double)info->nworkers * (maxg / 127.0));
    }
    free(g);
    free(out);
    return 0;
}

/* ====================================================================== */
/* kill                                                                   */
/* ====================================================================== */

static int run_kill(gs_ps_t ps, const gs_ps_info_t *info)
{
    const size_t big = 1u << 20; /* 4 MiB of f32, split over every server */
    float *g = malloc(big * sizeof(float));
    float *out = malloc(big * sizeof(float));
    gs_status_t st = GS_OK;
    const double start = tc_now_ms();
    long it = 0;
    int ok;

    for (size_t j = 0; j < big; j++) {
        g[j] = 1.0f;
    }
    CHECK_OK("kill register", gs_ps_register(ps, 1, big, GS_DTYPE_F32, NULL));
    CHECK_OK("kill register", gs_ps_register(ps, 2, 16, GS_DTYPE_F32, NULL));
    printf("READY rank=%d pid=%ld world=%d t_ms=%lld\n", info->rank, (long)getpid(), g_world,
           wall_ms());
    fflush(stdout);
    if (info->worker >= 0) {
        for (it = 0; tc_now_ms() - start < g_opt.max_seconds * 1e3; it++) {
            gs_ps_request_t r[4] = {GS_PS_REQUEST_NULL, GS_PS_REQUEST_NULL, GS_PS_REQUEST_NULL,
                                    GS_PS_REQUEST_NULL};

            st = gs_ps_push(ps, 1, g, big, GS_DTYPE_F32, &r[0]);
            if (st == GS_OK) {
                st = gs_ps_push(ps, 2, g, 16, GS_DTYPE_F32, &r[1]);
            }
            if ((info->rank == g_opt.victim) && (it == g_opt.kill_after)) {
                printf("KILL rank=%d t_ms=%lld\n", info->rank, wall_ms());
                fflush(stdout);
                raise(SIGKILL);
            }
            if (st == GS_OK) {
                st = gs_ps_waitall(2, r);
            }
            if (st == GS_OK) {
                st = gs_ps_pull(ps, 1, out, big, GS_DTYPE_F32, &r[2]);
            }
            if (st == GS_OK) {
                st = gs_ps_pull(ps, 2, out, 16, GS_DTYPE_F32, &r[3]);
            }
            if (st == GS_OK) {
                st = gs_ps_waitall(2, &r[2]);
            }
            if (st == GS_OK) {
                st = gs_ps_clock(ps);
            }
            (void)gs_ps_waitall(4, r);
            if (st != GS_OK) {
                break;
            }
            if (it == 2) {
                printf("RUNNING rank=%d t_ms=%lld\n", info->rank, wall_ms());
                fflush(stdout);
            }
        }
    } else {
        printf("RUNNING rank=%d t_ms=%lld\n", info->rank, wall_ms());
        fflush(stdout);
        if (info->rank == g_opt.victim) {
            usleep(1500u * 1000u); /* let the workers run a while, then die serving */
            printf("KILL rank=%d t_ms=%lld\n", info->rank, wall_ms());
            fflush(stdout);
            raise(SIGKILL);
        }
        st = gs_ps_destroy(ps); /* a server serves until every worker is done */
        ps = GS_PS_NULL;
    }
    {
        const long long t = wall_ms();
        char err[600];

        snprintf(err, sizeof(err), "%s", (st == GS_OK) ? "" : gs_last_error());
        printf("RESULT rank=%d status=%s iters=%ld t_ms=%lld err=%s\n", info->rank,
               gs_status_name(st), it, t, err);
        fflush(stdout);
        ok = (g_opt.victim < 0) ? (st == GS_OK)
                                : ((st == GS_ERR_PEER_FAILED) && names_rank(err, g_opt.victim));
        if ((st != GS_OK) && (ps != GS_PS_NULL)) {
            gs_ps_request_t r = GS_PS_REQUEST_NULL;
            const gs_status_t again = gs_ps_push(ps, 2, g, 16, GS_DTYPE_F32, &r);

            printf("STICKY rank=%d status=%s\n", info->rank, gs_status_name(again));
            if (again != st) {
                ok = 0;
            }
        }
    }
    if (ps != GS_PS_NULL) {
        (void)gs_ps_destroy(ps);
    }
    printf("DESTROY rank=%d t_ms=%lld\n", info->rank, wall_ms());
    fflush(stdout);
    free(g);
    free(out);
    exit(ok ? 0 : 1);
}

/* ====================================================================== */
/* ahead: a BSP worker that never pulls                                   */
/* ====================================================================== */

/* A "Key:   N kB" line of /proc/self/status, in kB; -1 when missing. */
static long status_kb(const char *key)
{
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");

    while ((f != NULL) && (fgets(line, sizeof(line), f) != NULL)) {
        if (strncmp(line, key, strlen(key)) == 0) {
            kb = atol(line + strlen(key));
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return kb;
}

/* Pull key 9 and check every element is @p want. */
static int ahead_pull_check(gs_ps_t ps, float *out, size_t count, double want, const char *label)
{
    gs_ps_request_t r = GS_PS_REQUEST_NULL;
    size_t bad = 0;

    CHECK_OK(label, gs_ps_pull(ps, 9, out, count, GS_DTYPE_F32, &r));
    CHECK_OK(label, gs_ps_wait(&r));
    for (size_t j = 0; j < count; j++) {
        if (((double)out[j] != want) && (bad++ < 3)) {
            fail(label, "element %zu is %g, expected %g", j, (double)out[j], want);
        }
    }
    if (bad == 0) {
        pass(label);
    }
    return 0;
}

static int run_ahead(gs_ps_t ps, const gs_ps_info_t *info)
{
    const size_t count = (size_t)1 << 18; /* 1 MiB of f32, split over the servers */
    const int ahead = 1;                  /* the rank that runs ahead */
    const int K = g_opt.ahead_limit;
    float *g = malloc(count * sizeof(float));
    float *out = malloc(count * sizeof(float));
    int64_t refused = -1; /* the clock of rank 1's refused push */
    long hwm0;
    long hwm1;

    if ((g == NULL) || (out == NULL) || (info->nworkers < 2)) {
        fail("ahead", "setup: needs 2 workers or more (rank 1 a worker)");
        return -1;
    }
    for (size_t j = 0; j < count; j++) {
        g[j] = 1.0f; /* lr 1: every applied push subtracts 1 */
    }
    CHECK_OK("ahead register", gs_ps_register(ps, 9, count, GS_DTYPE_F32, NULL));
    hwm0 = status_kb("VmHWM:");
    CHECK_OK("ahead barrier", gs_barrier(g_comm));
    if (info->rank == ahead) {
        gs_status_t st = GS_OK;
        char err[600] = "";
        char want[64];
        int64_t i;

        for (i = 0; i < g_opt.iters; i++) {
            gs_ps_request_t r = GS_PS_REQUEST_NULL;

            st = gs_ps_push(ps, 9, g, count, GS_DTYPE_F32, &r);
            if (st == GS_OK) {
                st = gs_ps_wait(&r);
            }
            if (st != GS_OK) {
                snprintf(err, sizeof(err), "%s", gs_last_error());
                break;
            }
            CHECK_OK("ahead clock", gs_ps_clock(ps));
        }
        printf("AHEAD rank=%d pushed=%lld status=%s err=%s\n", info->rank, (long long)i,
               gs_status_name(st), err);
        snprintf(want, sizeof(want), "limit %d", K);
        if (st == GS_OK) {
            fail("ahead refused", "%lld pushes and clocks without a pull were all taken",
                 (long long)i);
        } else if ((st != GS_ERR_INVALID_USAGE) || (i != K + 1) || !names_rank(err, ahead) ||
                   (strstr(err, "key 9") == NULL) || (strstr(err, want) == NULL) ||
                   (strstr(err, "pull") == NULL)) {
            fail("ahead refused",
                 "push of clock %lld got %s, expected GS_ERR_INVALID_USAGE at clock %d naming "
                 "rank %d, key 9, the %s and saying to pull: %s",
                 (long long)i, gs_status_name(st), K + 1, ahead, want, err);
        } else {
            pass("ahead refused");
            refused = i;
        }
    }
    /* Everyone learns where rank 1 stopped (and the servers have answered
     * all of its pushes by then). */
    CHECK_OK("ahead broadcast", gs_broadcast(g_comm, &refused, 1, GS_DTYPE_I64, ahead));
    hwm1 = status_kb("VmHWM:");
    printf("AHEAD rank=%d hwm_growth_kb=%ld\n", info->rank, hwm1 - hwm0);
    if ((hwm0 < 0) || (hwm1 - hwm0 > g_opt.hwm_mb * 1024)) {
        fail("ahead memory", "peak RSS grew by %ld kB (limit %ld MiB)", hwm1 - hwm0, g_opt.hwm_mb);
    } else {
        pass("ahead memory");
    }
    if (refused >= 0) {
        /* The server kept serving: rounds 0 .. c-1 hold every worker's push,
         * round c the others' only (rank 1's push of clock c was refused). */
        const int64_t c = refused;
        const double W = (double)info->nworkers;

        if (info->rank == ahead) {
            /* Pushed key 9 in clock c does not count: round c - 1. */
            ahead_pull_check(ps, out, count, -W * (double)c, "ahead pull before clock");
            CHECK_OK("ahead clock", gs_ps_clock(ps));
        } else if (info->worker >= 0) {
            for (int64_t i = 0; i <= c; i++) {
                gs_ps_request_t r = GS_PS_REQUEST_NULL;

                CHECK_OK("ahead catch-up push", gs_ps_push(ps, 9, g, count, GS_DTYPE_F32, &r));
                CHECK_OK("ahead catch-up wait", gs_ps_wait(&r));
                if (i < c) {
                    /* A BSP loop pulls (round i): with more than one of
                     * them, the catching-up workers stay together. */
                    CHECK_OK("ahead catch-up pull",
                             gs_ps_pull(ps, 9, out, count, GS_DTYPE_F32, &r));
                    CHECK_OK("ahead catch-up wait", gs_ps_wait(&r));
                }
                CHECK_OK("ahead catch-up clock", gs_ps_clock(ps));
            }
        }
        if (info->worker >= 0) {
            ahead_pull_check(ps, out, count, -(W * (double)c + (W - 1.0)), "ahead pull after");
        }
    }
    CHECK_OK("ahead barrier", gs_barrier(g_comm));
    free(g);
    free(out);
    return 0;
}

/* ====================================================================== */
/* main                                                                   */
/* ====================================================================== */

static void usage(void)
{
    fprintf(stderr, "usage: ps_check exact|bound|badinput|rules|codec|kill|ahead\n"
                    "       [--consistency bsp|ssp|asp] [--staleness S] [--servers S]\n"
                    "       [--dtype f32|f64|f16|bf16] [--iters N] [--depth D] [--big N]\n"
                    "       [--slow-rank R --slow-ms M] [--expect-ahead] [--expect-violation]\n"
                    "       [--expect-servers S] [--codec fp16|int8] [--victim R --kill-after K]\n"
                    "       [--max-seconds S] [--ahead-limit K] [--hwm-mb M] [--verbose]\n");
}

static int parse_args(int argc, char **argv)
{
    static const struct option longopts[] = {{"consistency", required_argument, NULL, 'c'},
                                             {"staleness", required_argument, NULL, 's'},
                                             {"servers", required_argument, NULL, 'S'},
                                             {"dtype", required_argument, NULL, 'd'},
                                             {"iters", required_argument, NULL, 'n'},
                                             {"depth", required_argument, NULL, 'D'},
                                             {"big", required_argument, NULL, 'b'},
                                             {"slow-rank", required_argument, NULL, 'r'},
                                             {"slow-ms", required_argument, NULL, 'm'},
                                             {"expect-ahead", no_argument, NULL, 'a'},
                                             {"expect-violation", no_argument, NULL, 'E'},
                                             {"expect-servers", required_argument, NULL, 'X'},
                                             {"codec", required_argument, NULL, 'C'},
                                             {"victim", required_argument, NULL, 'v'},
                                             {"kill-after", required_argument, NULL, 'k'},
                                             {"max-seconds", required_argument, NULL, 'x'},
                                             {"ahead-limit", required_argument, NULL, 'K'},
                                             {"hwm-mb", required_argument, NULL, 'H'},
                                             {"verbose", no_argument, NULL, 'V'},
                                             {NULL, 0, NULL, 0}};
    int c;

    if (argc < 2) {
        return -1;
    }
    g_opt.mode = argv[1];
    optind = 2;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            if (strcmp(optarg, "bsp") == 0) {
                g_opt.consistency = GS_PS_BSP;
            } else if (strcmp(optarg, "ssp") == 0) {
                g_opt.consistency = GS_PS_SSP;
            } else if (strcmp(optarg, "asp") == 0) {
                g_opt.consistency = GS_PS_ASP;
            } else {
                return -1;
            }
            break;
        case 's':
            g_opt.staleness = atoi(optarg);
            break;
        case 'S':
            g_opt.servers = atoi(optarg);
            break;
        case 'X':
            g_opt.expect_servers = atoi(optarg);
            break;
        case 'd':
            if (parse_dtype(optarg, &g_opt.dtype) != 0) {
                return -1;
            }
            break;
        case 'n':
            g_opt.iters = atoi(optarg);
            break;
        case 'D':
            g_opt.depth = atoi(optarg);
            if ((g_opt.depth < 1) || (g_opt.depth > 16)) {
                return -1;
            }
            break;
        case 'b':
            g_opt.big = atol(optarg);
            break;
        case 'r':
            g_opt.slow_rank = atoi(optarg);
            break;
        case 'm':
            g_opt.slow_ms = atoi(optarg);
            break;
        case 'a':
            g_opt.expect_ahead = 1;
            break;
        case 'E':
            g_opt.expect_violation = 1;
            break;
        case 'C':
            g_opt.codec = optarg;
            break;
        case 'v':
            g_opt.victim = atoi(optarg);
            break;
        case 'k':
            g_opt.kill_after = atoi(optarg);
            break;
        case 'x':
            g_opt.max_seconds = atof(optarg);
            break;
        case 'K':
            g_opt.ahead_limit = atoi(optarg);
            break;
        case 'H':
            g_opt.hwm_mb = atol(optarg);
            break;
        case 'V':
            g_verbose = 1;
            break;
        default:
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    gs_ps_opts_t o;
    gs_codec_config_t codec = GS_CODEC_CONFIG_INIT;
    gs_ps_info_t info = GS_PS_INFO_INIT;
    gs_ps_t ps = GS_PS_NULL;
    gs_status_t st;
    int rc = 0;

    if (parse_args(argc, argv) != 0) {
        usage();
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    st = gs_comm_init_env(&g_comm, NULL);
    if (st != GS_OK) {
        printf("INIT failed: %s: %s\n", gs_status_name(st), gs_last_error());
        return 1;
    }
    (void)gs_comm_rank(g_comm, &g_rank);
    (void)gs_comm_size(g_comm, &g_world);
    if (strcmp(g_opt.mode, "rules") == 0) {
        gs_ps_opts_t b = base_opts();
        gs_ps_t p0 = GS_PS_NULL;

        st = gs_ps_create(g_comm, &b, &p0);
        if (st == GS_OK) {
            (void)gs_ps_info(p0, &info);
            st = gs_ps_destroy(p0);
        }
        if (st != GS_OK) {
            fail("rules create", "%s", gs_last_error());
            rc = -1;
        } else {
            rc = run_rules(&info);
        }
        goto out;
    }
    o = base_opts();
    if (g_opt.codec != NULL) {
        codec.kind = (strcmp(g_opt.codec, "int8") == 0) ? GS_CODEC_INT8 : GS_CODEC_FP16;
        o.codec = &codec;
    }
    if ((strcmp(g_opt.mode, "exact") == 0) || (strcmp(g_opt.mode, "codec") == 0)) {
        o.split_bytes = 4096; /* the mid keys split too */
    }
    st = gs_ps_create(g_comm, &o, &ps);
    if (st != GS_OK) {
        printf("FAIL rank %d create: %s: %s\n", g_rank, gs_status_name(st), gs_last_error());
        return 1;
    }
    CHECK_OK("info", gs_ps_info(ps, &info));
    if (g_opt.expect_servers >= 0) {
        /* --servers unset: the roles come from GS_PS_SERVERS. */
        if ((info.nservers != g_opt.expect_servers) ||
            ((info.server >= 0) != (g_rank >= g_world - g_opt.expect_servers))) {
            fail("roles", "%d servers (this rank's server index %d), expected the last %d ranks",
                 info.nservers, info.server, g_opt.expect_servers);
        } else {
            pass("roles");
        }
    }
    if (strcmp(g_opt.mode, "exact") == 0) {
        rc = run_exact(ps, &info);
    } else if (strcmp(g_opt.mode, "codec") == 0) {
        rc = (codec.kind == GS_CODEC_INT8) ? run_codec_int8(ps, &info) : run_exact(ps, &info);
    } else if (strcmp(g_opt.mode, "bound") == 0) {
        rc = run_bound(ps, &info);
    } else if (strcmp(g_opt.mode, "badinput") == 0) {
        rc = run_badinput(ps, &info);
    } else if (strcmp(g_opt.mode, "kill") == 0) {
        rc = run_kill(ps, &info);
    } else if (strcmp(g_opt.mode, "ahead") == 0) {
        rc = run_ahead(ps, &info);
    } else {
        usage();
        rc = -1;
    }
    st = gs_ps_destroy(ps);
    if (st != GS_OK) {
        fail("destroy", "%s: %s", gs_status_name(st), gs_last_error());
    }
out:
    (void)gs_comm_destroy(g_comm);
    printf("ps_check %s rank %d: %ld passed, %ld failed\n", g_opt.mode, g_rank, g_passed, g_failed);
    return ((rc == 0) && (g_failed == 0)) ? 0 : 1;
}
