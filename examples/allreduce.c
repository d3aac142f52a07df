/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The smallest complete gradsync program: every rank fills a "gradient"
 * with its rank number, averages it across all ranks in place and checks
 * the result. Run it with the local launcher:
 *
 *     gsrun -n 4 ./allreduce [count] [--report] [--hold MS]
 *
 * The options serve bench/scale/bench_scale.sh and are not needed to use
 * gradsync. --report: each rank also prints one "scale:" line of key=value
 * pairs: how long gs_comm_init_env and the all-reduce took, when main
 * started and when each ended (CLOCK_REALTIME, ns, to compare across the
 * ranks of one host), the CPU time init used (all threads, user and
 * system), and what the process held right after init and again after the
 * all-reduce: open descriptors, threads, resident memory and its peak (from
 * /proc/self; -1 where there is no /proc).
 * --hold MS: sleep MS milliseconds before gs_comm_destroy. A rank that
 * destroys its communicator closes its sockets, and its peers then close
 * theirs: the hold keeps every rank's count after the all-reduce clean of
 * that, and lets a tool outside look at the ranks while they hold them.
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <gradsync/gradsync.h>

/* What the process holds at one moment (bench_scale.sh's columns). */
typedef struct {
    long fds;
    long threads;
    long rss_kib;
    long hwm_kib;
} usage_t;

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static long long wall_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* CPU time this process has used, all threads, user and system (ms). */
static double cpu_ms(void)
{
    struct rusage ru;

    if (getrusage(RUSAGE_SELF, &ru) != 0) {
        return -1.0;
    }
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

static void usage_read(usage_t *u)
{
    char line[256];
    DIR *dir = opendir("/proc/self/fd");
    FILE *f;

    u->fds = u->threads = u->rss_kib = u->hwm_kib = -1;
    if (dir != NULL) {
        const struct dirent *e;
        long count = -1; /* not the directory's own descriptor */
        while ((e = readdir(dir)) != NULL) {
            count += (e->d_name[0] != '.');
        }
        closedir(dir);
        u->fds = count;
    }
    f = fopen("/proc/self/status", "r");
    if (f == NULL) {
        return;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "Threads:", 8) == 0) {
            u->threads = strtol(line + 8, NULL, 10);
        } else if (strncmp(line, "VmRSS:", 6) == 0) {
            u->rss_kib = strtol(line + 6, NULL, 10);
        } else if (strncmp(line, "VmHWM:", 6) == 0) {
            u->hwm_kib = strtol(line + 6, NULL, 10);
        }
    }
    fclose(f);
}

int main(int argc, char **argv)
{
    size_t n = 1000000;
    int report = 0;
    long hold_ms = 0;
    gs_comm_t comm;
    int rank, size;
    float *grad;
    size_t wrong = 0;
    usage_t at_init, at_end;
    double t0, t_init, t_ar, cpu0, cpu_init;
    long long init_done_ns, ar_done_ns;
    const long long start_ns = wall_ns();

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--report") == 0) {
            report = 1;
        } else if ((strcmp(argv[i], "--hold") == 0) && (i + 1 < argc)) {
            hold_ms = strtol(argv[++i], NULL, 10);
        } else {
            n = strtoull(argv[i], NULL, 10);
        }
    }

    t0 = now_ms();
    cpu0 = cpu_ms();
    if (gs_comm_init_env(&comm, NULL) != GS_OK) {
        fprintf(stderr, "%s\n", gs_last_error());
        return 1;
    }
    t_init = now_ms() - t0;
    cpu_init = cpu_ms() - cpu0;
    init_done_ns = wall_ns();
    if (report) {
        usage_read(&at_init);
    }
    gs_comm_rank(comm, &rank);
    gs_comm_size(comm, &size);

    grad = malloc(n * sizeof(float));
    if (grad == NULL) {
        fprintf(stderr, "out of memory\n");
        gs_comm_destroy(comm);
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        grad[i] = (float)rank;
    }

    t0 = now_ms();
    if (gs_allreduce(comm, grad, grad, n, GS_DTYPE_F32, GS_OP_AVG) != GS_OK) { /* in place */
        fprintf(stderr, "allreduce failed: %s\n", gs_last_error());
        gs_comm_destroy(comm);
        free(grad);
        return 1;
    }
    t_ar = now_ms() - t0;
    ar_done_ns = wall_ns();
    if (report) {
        usage_read(&at_end);
    }

    /* The average of 0, 1, ..., size-1. */
    const float expect = (float)(size - 1) / 2.0f;
    for (size_t i = 0; i < n; i++) {
        wrong += (grad[i] != expect);
    }
    printf("rank %d of %d: averaged %zu floats, %zu wrong (expected %.1f everywhere)\n", rank, size,
           n, wrong, (double)expect);
    if (report) {
        printf(
            "scale: rank=%d size=%d init_ms=%.3f init_cpu_ms=%.3f allreduce_ms=%.3f start_ns=%lld "
            "init_done_ns=%lld allreduce_done_ns=%lld fds_init=%ld fds=%ld "
            "threads_init=%ld threads=%ld rss_init_kib=%ld rss_kib=%ld hwm_kib=%ld\n",
            rank, size, t_init, cpu_init, t_ar, start_ns, init_done_ns, ar_done_ns, at_init.fds,
            at_end.fds, at_init.threads, at_end.threads, at_init.rss_kib, at_end.rss_kib,
            at_end.hwm_kib);
    }
    fflush(stdout);
    if (hold_ms > 0) {
        const struct timespec ts = {.tv_sec = hold_ms / 1000,
                                    .tv_nsec = (hold_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }

    free(grad);
    gs_comm_destroy(comm);
    return wrong == 0 ? 0 : 1;
}
