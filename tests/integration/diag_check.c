/* SPDX-License-Identifier: Apache-2.0 */
/*
 * diag_check: the diagnosis of jobs that cannot go on (issue 13), run under
 * gsrun, one mode per run:
 *   kind    rank 1 calls broadcast(root 0) where the others call allreduce:
 *           every rank gets GS_ERR_MISMATCH within 2 s, naming both calls in
 *           words and which ranks made them (with GS_TIMEOUT_MS=30000, so a
 *           timeout cannot pass)
 *   count   the same all-reduce, rank 1 with count 1001 instead of 1000
 *   dtype   the same all-reduce, rank 1 with f64 instead of f32
 *   mismatch WHAT ODD  as kind, count and dtype (WHAT, or op: max instead of
 *           sum) with rank ODD (a number or "last") the odd one
 *   timeout rank 1 sleeps 3 s before its all-reduce (GS_TIMEOUT_MS=1500): rank 0
 *           gets GS_ERR_TIMEOUT naming rank 1 and the operation, and its log
 *           (GS_DEBUG_FILE, %r expanded here) has the WARN with the waits
 *   dump    gs_comm_dump after five collectives lists them with seq, kind,
 *           bytes and algorithm
 *   signal  with GS_DUMP_SIGNAL=USR1 and GS_DEBUG_FILE set, kill(getpid(),
 *           SIGUSR1) puts the recorder in this rank's log within 2 s
 *   ifname  with GS_SOCKET_IFNAME=nonexistent0, gs_comm_init_env fails and
 *           its text lists the interfaces that exist (lo among them)
 *   refused rank 1 of 2 whose rank 0 never starts (a port nobody listens on,
 *           GS_TIMEOUT_MS 1000): GS_ERR_TIMEOUT naming host:port, rank 0 and
 *           the refusal
 * Prints one FAIL line per failed check and "N passed, M failed"; exit
 * status 1 when any check failed.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "gradsync/gradsync.h"

#include "check_report.h"
#include "tc_clock.h"

#define COUNT 1000

static void expect_has(const char *label, const char *text, const char *needle)
{
    if (strstr(text, needle) != NULL) {
        pass(label);
    } else {
        fail(label, "\"%s\" not in: %s", needle, text);
    }
}

/* A few good collectives first, so the mismatch is not operation #0. */
static int warm_up(gs_comm_t comm)
{
    float a[4] = {1, 2, 3, 4};
    float b[4];

    for (int i = 0; i < 3; i++) {
        if (gs_allreduce(comm, a, b, 4, GS_DTYPE_F32, GS_OP_SUM) != GS_OK) {
            fail("warm-up", "allreduce failed: %s", gs_last_error());
            return -1;
        }
    }
    return 0;
}

/* GS_DEBUG_FILE with %r expanded for this rank (the only pattern used here). */
static int log_path(char *out, size_t len)
{
    const char *tmpl = getenv("GS_DEBUG_FILE");
    const char *r;

    if ((tmpl == NULL) || ((r = strstr(tmpl, "%r")) == NULL)) {
        return -1;
    }
    snprintf(out, len, "%.*s%d%s", (int)(r - tmpl), tmpl, g_rank, r + 2);
    return 0;
}

/* 1 when the file at @p path holds every needle (NULL-terminated list). */
static int file_has(const char *path, const char *const *needles)
{
    static char text[1 << 20];
    FILE *f = fopen(path, "r");
    size_t n;

    if (f == NULL) {
        return 0;
    }
    n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    for (int i = 0; needles[i] != NULL; i++) {
        if (strstr(text, needles[i]) == NULL) {
            return 0;
        }
    }
    return 1;
}

/*
 * A mismatch at operation #3: rank @p odd makes the odd call of @p what, every
 * other rank the usual one (see mm_call). Every rank must fail with
 * GS_ERR_MISMATCH within 2 s, its error naming both calls in words and which
 * ranks made which ("rank 2 called X ... while this rank (0) called Y, as did
 * rank 1"; on the odd rank "ranks 0, 1 called Y ... while this rank (2) called
 * X"), and no WARN line of its log (GS_DEBUG_FILE, when set) may show a raw
 * tag or fingerprint ("0x").
 */
typedef struct mm_case {
    char usual[96];
    char odd[96];
} mm_case_t;

/* count, dtype, op: all-reduce of 1000 f32 with sum, the odd rank with 1001,
 * f64 or max; kind: the odd rank calls broadcast from the lowest other rank. */
static gs_status_t mm_call(gs_comm_t comm, const char *what, int odd, mm_case_t *c)
{
    static double in[COUNT + 1];
    static double out[COUNT + 1];
    const int me_odd = (g_rank == odd);
    const int r0 = (odd == 0) ? 1 : 0;

    snprintf(c->usual, sizeof(c->usual), "allreduce(count=1000, f32, sum)");
    if (strcmp(what, "count") == 0) {
        snprintf(c->odd, sizeof(c->odd), "allreduce(count=1001, f32, sum)");
        return gs_allreduce(comm, in, out, me_odd ? COUNT + 1 : COUNT, GS_DTYPE_F32, GS_OP_SUM);
    }
    if (strcmp(what, "dtype") == 0) {
        snprintf(c->odd, sizeof(c->odd), "allreduce(count=1000, f64, sum)");
        return gs_allreduce(comm, in, out, COUNT, me_odd ? GS_DTYPE_F64 : GS_DTYPE_F32, GS_OP_SUM);
    }
    if (strcmp(what, "op") == 0) {
        snprintf(c->odd, sizeof(c->odd), "allreduce(count=1000, f32, max)");
        return gs_allreduce(comm, in, out, COUNT, GS_DTYPE_F32, me_odd ? GS_OP_MAX : GS_OP_SUM);
    }
    snprintf(c->odd, sizeof(c->odd), "broadcast(count=1000, f32, root %d)", r0);
    if (me_odd) {
        return gs_broadcast(comm, in, COUNT, GS_DTYPE_F32, r0);
    }
    return gs_allreduce(comm, in, out, COUNT, GS_DTYPE_F32, GS_OP_SUM);
}

/* "rank 2", "ranks 0, 1", "ranks 0-2, 4": the ranks below @p size that are not
 * @p skip1 or @p skip2 (or only @p only when it is >= 0); runs of three or more
 * as a range. */
static void mm_ranks(int size, int only, int skip1, int skip2, char *buf, size_t len)
{
    int in[64];
    int n = 0;
    size_t used;

    for (int p = 0; (p < size) && (p < 64); p++) {
        in[p] = (only >= 0) ? (p == only) : ((p != skip1) && (p != skip2));
        n += in[p];
    }
    used = (size_t)snprintf(buf, len, "%s", (n == 1) ? "rank " : "ranks ");
    for (int p = 0, sep = 0; (p < size) && (p < 64) && (used < len); p++) {
        int e = p;

        if (!in[p]) {
            continue;
        }
        while ((e + 1 < size) && in[e + 1]) {
            e++;
        }
        if (e - p >= 2) {
            used += (size_t)snprintf(buf + used, len - used, "%s%d-%d", sep ? ", " : "", p, e);
            p = e;
        } else {
            used += (size_t)snprintf(buf + used, len - used, "%s%d", sep ? ", " : "", p);
        }
        sep = 1;
    }
}

static void run_mm(gs_comm_t comm, const char *what, const char *odd_arg, int size)
{
    char want[256];
    char ranks[96];
    char path[512];
    mm_case_t c;
    gs_status_t status;
    const int odd = (strcmp(odd_arg, "last") == 0) ? size - 1 : atoi(odd_arg);
    const char *err;
    double t0;
    double ms;

    if ((odd < 0) || (odd >= size) || (size > 64)) {
        fail("usage", "odd rank %s outside 0..%d", odd_arg, size - 1);
        return;
    }
    if (warm_up(comm) != 0) {
        return;
    }
    t0 = tc_now_ms();
    status = mm_call(comm, what, odd, &c);
    ms = tc_now_ms() - t0;
    err = gs_last_error();
    printf("rank %d: %s after %.0f ms: %s\n", g_rank, gs_status_name(status), ms, err);
    if (status != GS_ERR_MISMATCH) {
        fail("status", "%s, expected GS_ERR_MISMATCH: %s", gs_status_name(status), err);
        return;
    }
    pass("status");
    if (ms > 2000.0) {
        fail("within 2 s", "took %.0f ms", ms);
    } else {
        pass("within 2 s");
    }
    snprintf(want, sizeof(want), "this rank (%d) called %s", g_rank,
             (g_rank == odd) ? c.odd : c.usual);
    expect_has("own call in words", err, want);
    if (g_rank == odd) {
        mm_ranks(size, -1, odd, -1, ranks, sizeof(ranks));
        snprintf(want, sizeof(want), "%s called %s as operation #3", ranks, c.usual);
        expect_has("the others' call in words, with their ranks", err, want);
    } else {
        snprintf(want, sizeof(want), "rank %d called %s as operation #3", odd, c.odd);
        expect_has("the odd call in words, with its rank", err, want);
        if (size > 2) {
            mm_ranks(size, -1, odd, g_rank, ranks, sizeof(ranks));
            snprintf(want, sizeof(want), ", as did %s;", ranks);
            expect_has("the ranks that called as this one did", err, want);
        }
    }
    if (strstr(err, "0x") != NULL) {
        fail("no hex", "the error shows a raw number: %s", err);
    } else {
        pass("no hex");
    }
    /* The communicator is failed: the next call says so at once. */
    status = gs_barrier(comm);
    if (status == GS_ERR_MISMATCH) {
        pass("sticky");
    } else {
        fail("sticky", "the next barrier returned %s", gs_status_name(status));
    }
    if (log_path(path, sizeof(path)) == 0) {
        FILE *f = fopen(path, "r");
        char line[1024];
        int warns = 0;
        int hex = 0;

        while ((f != NULL) && (fgets(line, sizeof(line), f) != NULL)) {
            if (strstr(line, " WARN ") != NULL) {
                warns++;
                if (strstr(line, "0x") != NULL) {
                    hex++;
                    fail("log", "a WARN line shows a raw number: %s", line);
                }
            }
        }
        if (f != NULL) {
            fclose(f);
        }
        if ((f != NULL) && (warns > 0) && (hex == 0)) {
            pass("log: WARN lines in words");
        } else if (hex == 0) {
            fail("log", "%s has no WARN line", path);
        }
    }
}

static void run_timeout(gs_comm_t comm)
{
    static float in[COUNT];
    static float out[COUNT];
    char path[512];
    gs_status_t status;
    double t0;
    double ms;

    if (warm_up(comm) != 0) {
        return;
    }
    if (g_rank == 1) {
        sleep(3);
        (void)gs_allreduce(comm, in, out, COUNT, GS_DTYPE_F32, GS_OP_SUM); /* any result */
        pass("late rank");
        return;
    }
    t0 = tc_now_ms();
    status = gs_allreduce(comm, in, out, COUNT, GS_DTYPE_F32, GS_OP_SUM);
    ms = tc_now_ms() - t0;
    printf("rank %d: %s after %.0f ms: %s\n", g_rank, gs_status_name(status), ms, gs_last_error());
    if (status != GS_ERR_TIMEOUT) {
        fail("status", "%s, expected GS_ERR_TIMEOUT", gs_status_name(status));
        return;
    }
    pass("status");
    if ((ms < 1400.0) || (ms > 4000.0)) {
        fail("deadline", "took %.0f ms with GS_TIMEOUT_MS=1500", ms);
    } else {
        pass("deadline");
    }
    expect_has("missing rank", gs_last_error(), "receive from rank 1");
    expect_has("operation", gs_last_error(), "operation #3, allreduce(count=1000, f32, sum)");
    if (log_path(path, sizeof(path)) != 0) {
        fail("warn", "GS_DEBUG_FILE with %%r is not set");
    } else {
        const char *const needles[] = {"WARN", "still waiting to receive from rank 1", NULL};
        if (file_has(path, needles)) {
            pass("warn");
        } else {
            fail("warn", "%s has no WARN naming the waited-on rank", path);
        }
    }
}

/* Five collectives of known shapes (every rank alike). */
static int run_five(gs_comm_t comm)
{
    static float in[256];
    static float out[256];
    gs_status_t status = GS_OK;

    for (int i = 0; (i < 3) && (status == GS_OK); i++) {
        status = gs_allreduce(comm, in, out, 256, GS_DTYPE_F32, GS_OP_SUM);
    }
    if (status == GS_OK) {
        status = gs_broadcast(comm, in, 100, GS_DTYPE_F32, 0);
    }
    if (status == GS_OK) {
        status = gs_barrier(comm);
    }
    if (status != GS_OK) {
        fail("collectives", "%s: %s", gs_status_name(status), gs_last_error());
        return -1;
    }
    return 0;
}

static void run_dump(gs_comm_t comm)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f;

    if (run_five(comm) != 0) {
        return;
    }
    f = open_memstream(&text, &len);
    if ((f == NULL) || (gs_comm_dump(comm, f) != GS_OK)) {
        fail("dump", "gs_comm_dump failed: %s", gs_last_error());
        return;
    }
    fclose(f);
    printf("%s", text);
    expect_has("dump: header", text, "flight recorder");
    expect_has("dump: allreduce", text, "seq 2 allreduce(count=256, f32, sum) bytes 1024 algo ");
    expect_has("dump: broadcast", text, "seq 3 broadcast(count=100, f32, root 0) bytes 400 algo ");
    expect_has("dump: barrier", text, "seq 4 barrier()");
    expect_has("dump: status", text, "status GS_OK");
    free(text);
    if (gs_comm_dump(comm, NULL) == GS_ERR_INVALID_ARG) {
        pass("dump: NULL stream");
    } else {
        fail("dump: NULL stream", "not GS_ERR_INVALID_ARG");
    }
}

static void run_signal(gs_comm_t comm)
{
    const char *const needles[] = {"flight recorder", "seq 3 broadcast(count=100, f32, root 0)",
                                   "seq 4 barrier()", NULL};
    char path[512];
    double t0;

    if (run_five(comm) != 0) {
        return;
    }
    if (log_path(path, sizeof(path)) != 0) {
        fail("signal", "GS_DEBUG_FILE with %%r is not set");
        return;
    }
    kill(getpid(), SIGUSR1);
    t0 = tc_now_ms();
    while (!file_has(path, needles) && (tc_now_ms() - t0 < 2000.0)) {
        usleep(20000);
    }
    if (file_has(path, needles)) {
        pass("signal");
    } else {
        fail("signal", "no dump in %s within 2 s of SIGUSR1", path);
    }
}

/* A loopback port nobody listens on (bound, then closed), or 0. */
static int dead_port(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port = 0;

    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if ((fd >= 0) && (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0) &&
        (getsockname(fd, (struct sockaddr *)&a, &len) == 0)) {
        port = ntohs(a.sin_port);
    }
    if (fd >= 0) {
        close(fd);
    }
    return port;
}

static int run_refused(void)
{
    gs_config_t cfg;
    gs_comm_t comm = GS_COMM_NULL;
    char want[64];
    gs_status_t status;
    int port = dead_port();

    gs_config_init(&cfg);
    cfg.rank = 1;
    cfg.world_size = 2;
    cfg.master_addr = "127.0.0.1";
    cfg.master_port = port;
    cfg.timeout_ms = 1000;
    status = gs_comm_init(&comm, &cfg);
    printf("rank %d: init %s: %s\n", g_rank, gs_status_name(status), gs_last_error());
    if (status == GS_OK) {
        fail("refused", "gs_comm_init succeeded without a rank 0");
        gs_comm_destroy(comm);
    } else {
        snprintf(want, sizeof(want), "127.0.0.1:%d", port);
        expect_has("refused: names host:port", gs_last_error(), want);
        expect_has("refused: names rank 0", gs_last_error(), "rank 0");
        expect_has("refused: says it was refused", gs_last_error(), "refused");
        if (status != GS_ERR_TIMEOUT) {
            fail("refused", "status %s, expected GS_ERR_TIMEOUT", gs_status_name(status));
        }
    }
    printf("diag_check refused rank %d: %ld passed, %ld failed\n", g_rank, g_passed, g_failed);
    return g_failed > 0;
}

int main(int argc, char **argv)
{
    const char *mode = (argc > 1) ? argv[1] : "";
    gs_comm_t comm = GS_COMM_NULL;
    gs_status_t status;
    int size = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    g_verbose = 1;
    if (getenv("RANK") != NULL) {
        g_rank = atoi(getenv("RANK"));
    }
    {
        char path[512];

        if (log_path(path, sizeof(path)) == 0) {
            (void)unlink(path); /* no stale log from an earlier run may pass a check */
        }
    }
    if (strcmp(mode, "refused") == 0) {
        return run_refused();
    }
    status = gs_comm_init_env(&comm, NULL);
    if (strcmp(mode, "ifname") == 0) {
        printf("rank %d: init %s: %s\n", g_rank, gs_status_name(status), gs_last_error());
        if (status == GS_OK) {
            fail("ifname", "gs_comm_init_env succeeded with GS_SOCKET_IFNAME=nonexistent0");
            gs_comm_destroy(comm);
        } else {
            expect_has("ifname: names it", gs_last_error(), "nonexistent0");
            expect_has("ifname: lists lo", gs_last_error(), "lo");
            expect_has("ifname: says which exist", gs_last_error(), "interfaces here:");
        }
        printf("diag_check %s rank %d: %ld passed, %ld failed\n", mode, g_rank, g_passed, g_failed);
        return g_failed > 0;
    }
    if (status != GS_OK) {
        printf("FAIL rank %d init: %s: %s\n", g_rank, gs_status_name(status), gs_last_error());
        return 1;
    }
    gs_comm_rank(comm, &g_rank);
    gs_comm_size(comm, &size);
    if ((strcmp(mode, "kind") == 0) || (strcmp(mode, "count") == 0) ||
        (strcmp(mode, "dtype") == 0)) {
        run_mm(comm, mode, "1", size);
    } else if ((strcmp(mode, "mismatch") == 0) && (argc > 3)) {
        run_mm(comm, argv[2], argv[3], size);
    } else if (strcmp(mode, "timeout") == 0) {
        run_timeout(comm);
    } else if (strcmp(mode, "dump") == 0) {
        run_dump(comm);
    } else if (strcmp(mode, "signal") == 0) {
        run_signal(comm);
    } else {
        fail("usage",
             "unknown mode \"%s\" (kind, count, dtype, mismatch WHAT ODD, timeout, dump, "
             "signal, ifname, refused)",
             mode);
    }
    gs_comm_destroy(comm);
    printf("diag_check %s rank %d: %ld passed, %ld failed\n", mode, g_rank, g_passed, g_failed);
    return g_failed > 0;
}
