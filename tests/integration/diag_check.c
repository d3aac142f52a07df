/* SPDX-License-Identifier: Apache-2.0 */
/*
 * diag_check: the diagnosis of jobs that cannot go on (issue 13), run under
 * gsrun, one mode per run:
 *   kind    rank 1 calls broadcast(root 0) where the others call allreduce:
 *           every rank gets GS_ERR_MISMATCH within 2 s, naming both calls in
 *           words (with GS_TIMEOUT_MS=30000, so a timeout cannot pass)
 *   count   the same all-reduce, rank 1 with count 1001 instead of 1000
 *   dtype   the same all-reduce, rank 1 with f64 instead of f32
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

static void run_mismatch(gs_comm_t comm, const char *mode, int size)
{
    static double buf_in[COUNT + 1];
    static double buf_out[COUNT + 1];
    const char *me;
    const char *other;
    gs_status_t status;
    double t0;
    double ms;

    if (warm_up(comm) != 0) {
        return;
    }
    t0 = tc_now_ms();
    if (strcmp(mode, "kind") == 0) {
        me = (g_rank == 1) ? "broadcast(count=1000, f32, root 0)"
                           : "allreduce(count=1000, f32, sum)";
        other = (g_rank == 1) ? "allreduce(count=1000, f32, sum)"
                              : "broadcast(count=1000, f32, root 0)";
        if (g_rank == 1) {
            status = gs_broadcast(comm, buf_in, COUNT, GS_DTYPE_F32, 0);
        } else {
            status = gs_allreduce(comm, buf_in, buf_out, COUNT, GS_DTYPE_F32, GS_OP_SUM);
        }
    } else if (strcmp(mode, "count") == 0) {
        me = (g_rank == 1) ? "allreduce(count=1001, f32, sum)" : "allreduce(count=1000, f32, sum)";
        other =
            (g_rank == 1) ? "allreduce(count=1000, f32, sum)" : "allreduce(count=1001, f32, sum)";
        status = gs_allreduce(comm, buf_in, buf_out, (g_rank == 1) ? COUNT + 1 : COUNT,
                              GS_DTYPE_F32, GS_OP_SUM);
    } else {
        me = (g_rank == 1) ? "allreduce(count=1000, f64, sum)" : "allreduce(count=1000, f32, sum)";
        other =
            (g_rank == 1) ? "allreduce(count=1000, f32, sum)" : "allreduce(count=1000, f64, sum)";
        status = gs_allreduce(comm, buf_in, buf_out, COUNT,
                              (g_rank == 1) ? GS_DTYPE_F64 : GS_DTYPE_F32, GS_OP_SUM);
    }
    ms = tc_now_ms() - t0;
    printf("rank %d: %s after %.0f ms: %s\n", g_rank, gs_status_name(status), ms, gs_last_error());
    if (status != GS_ERR_MISMATCH) {
        fail("status", "%s, expected GS_ERR_MISMATCH: %s", gs_status_name(status), gs_last_error());
        return;
    }
    pass("status");
    if (ms > 2000.0) {
        fail("within 2 s", "took %.0f ms", ms);
    } else {
        pass("within 2 s");
    }
    expect_has("own call in words", gs_last_error(), me);
    /* In a job of 3 or more, a rank whose call matches the reporter's hears the
     * reporter's side and its own, which are then the same words. */
    if ((size == 2) || (g_rank == 1) || (strcmp(mode, "kind") == 0)) {
        expect_has("other call in words", gs_last_error(), other);
    }
    expect_has("operation number", gs_last_error(), "as operation #3");
    /* The communicator is failed: the next call says so at once. */
    status = gs_barrier(comm);
    if (status == GS_ERR_MISMATCH) {
        pass("sticky");
    } else {
        fail("sticky", "the next barrier returned %s", gs_status_name(status));
    }
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
        run_mismatch(comm, mode, size);
    } else if (strcmp(mode, "timeout") == 0) {
        run_timeout(comm);
    } else if (strcmp(mode, "dump") == 0) {
        run_dump(comm);
    } else if (strcmp(mode, "signal") == 0) {
        run_signal(comm);
    } else {
        fail("usage",
             "unknown mode \"%s\" (kind, count, dtype, timeout, dump, signal, ifname, "
             "refused)",
             mode);
    }
    gs_comm_destroy(comm);
    printf("diag_check %s rank %d: %ld passed, %ld failed\n", mode, g_rank, g_passed, g_failed);
    return g_failed > 0;
}
