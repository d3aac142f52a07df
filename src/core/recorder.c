/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The flight recorder (recorder.h): a ring of the last operations under a
 * mutex (the worker writes twice per operation, a dump reads it from any
 * thread), per-peer counters of requests in flight, the text dump, and the
 * GS_DUMP_SIGNAL machinery. The signal handler only writes one byte to a
 * pipe; a helper thread reads the pipe and dumps every registered recorder
 * through the log, so nothing unsafe ever runs in signal context. It does
 * not know what a collective is: names come from the owner's callbacks.
 */
#include "core/recorder.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "gradsync/gradsync.h"

gs_status_t gs__recorder_create(uint32_t cap, int rank, int size,
                                gs__recorder_describe_fn_t describe,
                                gs__recorder_algo_name_fn_t algo_name, gs__recorder_t **out)
{
    gs__recorder_t *t = calloc(1, sizeof(*t));

    if (cap == 0) {
        cap = 1;
    }
    if (t != NULL) {
        t->ops = calloc(cap, sizeof(*t->ops));
        t->pend_recv = calloc((size_t)size, sizeof(*t->pend_recv));
        t->pend_send = calloc((size_t)size, sizeof(*t->pend_send));
    }
    if ((t == NULL) || (t->ops == NULL) || (t->pend_recv == NULL) || (t->pend_send == NULL)) {
        if (t != NULL) {
            free(t->ops);
            free(t->pend_recv);
            free(t->pend_send);
            free(t);
        }
        return gs__error_set(GS_ERR_NO_MEMORY,
                             "gs_comm_init: out of memory for a flight recorder of %u operations",
                             cap);
    }
    for (int p = 0; p < size; p++) {
        atomic_init(&t->pend_recv[p], 0);
        atomic_init(&t->pend_send[p], 0);
    }
    pthread_mutex_init(&t->mu, NULL);
    t->rank = rank;
    t->size = size;
    t->cap = cap;
    t->t0_ns = gs__now_ns();
    t->describe = describe;
    t->algo_name = algo_name;
    *out = t;
    return GS_OK;
}

/* The signal dump's registry of live recorders. */
static pthread_mutex_t recorder_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static gs__recorder_t *recorder_reg_head;
static int recorder_sig_no; /* the signal handled, 0: none yet */
static int recorder_pipe[2] = {-1, -1};

static void recorder_unregister(gs__recorder_t *t)
{
    pthread_mutex_lock(&recorder_reg_mu);
    for (gs__recorder_t **pp = &recorder_reg_head; *pp != NULL; pp = &(*pp)->reg_next) {
        if (*pp == t) {
            *pp = t->reg_next;
            break;
        }
    }
    pthread_mutex_unlock(&recorder_reg_mu);
}

void gs__recorder_free(gs__recorder_t *t)
{
    if (t == NULL) {
        return;
    }
    recorder_unregister(t);
    pthread_mutex_destroy(&t->mu);
    free(t->ops);
    free(t->pend_recv);
    free(t->pend_send);
    free(t);
}

void gs__recorder_begin(gs__recorder_t *t, const gs__recorder_op_t *op)
{
    gs__recorder_op_t *e;

    pthread_mutex_lock(&t->mu);
    e = &t->ops[t->next % t->cap];
    *e = *op;
    e->algo = -1;
    e->t_end_ns = 0;
    e->status = GS_INPROGRESS;
    e->nwait = 0;
    t->next++;
    pthread_mutex_unlock(&t->mu);
}

void gs__recorder_end(gs__recorder_t *t, int algo, gs_status_t status, uint64_t t_end_ns)
{
    gs__recorder_op_t *e;

    pthread_mutex_lock(&t->mu);
    if (t->next == 0) {
        pthread_mutex_unlock(&t->mu);
        return;
    }
    e = &t->ops[(t->next - 1) % t->cap];
    e->algo = algo;
    e->status = status;
    e->t_end_ns = t_end_ns;
    e->nwait = 0;
    if ((status != GS_OK) && (status != GS_INPROGRESS)) {
        for (int p = 0; p < t->size; p++) {
            for (int s = 0; s < 2; s++) {
                const int n = atomic_load_explicit(s ? &t->pend_send[p] : &t->pend_recv[p],
                                                   memory_order_relaxed);
                if (n <= 0) {
                    continue;
                }
                if (e->nwait < GS_TRACE_WAIT_MAX) {
                    e->wait_peer[e->nwait] = p;
                    e->wait_send[e->nwait] = (uint8_t)s;
                }
                e->nwait++;
            }
        }
    }
    pthread_mutex_unlock(&t->mu);
}

int gs__recorder_find(gs__recorder_t *t, uint64_t seq, gs__recorder_op_t *out)
{
    int found = 0;

    pthread_mutex_lock(&t->mu);
    for (uint64_t i = t->next; (i > 0) && (t->next - i < t->cap); i--) {
        const gs__recorder_op_t *e = &t->ops[(i - 1) % t->cap];
        if (e->seq == seq) {
            *out = *e;
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return found;
}

/* Append "rank 3" or ", 3" to a list in buf. */
static size_t recorder_list_add(char *buf, size_t len, size_t used, const char *head, int *nin,
                                int peer)
{
    int ret;

    if (used >= len) {
        return used;
    }
    if (*nin == 0) {
        ret = snprintf(buf + used, len - used, "%s%s %d", (used > 0) ? "; " : "", head, peer);
    } else {
        ret = snprintf(buf + used, len - used, ", %d", peer);
    }
    (*nin)++;
    return (ret < 0) ? used : used + (size_t)ret;
}

int gs__recorder_waiting(gs__recorder_t *t, char *buf, size_t len)
{
    size_t used = 0;
    int named = 0;

    if (len == 0) {
        return 0;
    }
    buf[0] = '\0';
    for (int s = 0; s < 2; s++) {
        int nin = 0;
        int total = 0;

        for (int p = 0; p < t->size; p++) {
            total += atomic_load_explicit(s ? &t->pend_send[p] : &t->pend_recv[p],
                                          memory_order_relaxed) > 0;
        }
        for (int p = 0; p < t->size; p++) {
            if (atomic_load_explicit(s ? &t->pend_send[p] : &t->pend_recv[p],
                                     memory_order_relaxed) > 0) {
                used = recorder_list_add(
                    buf, len, used,
                    s ? ((total > 1) ? "send to ranks" : "send to rank")
                      : ((total > 1) ? "receive from ranks" : "receive from rank"),
                    &nin, p);
                named++;
            }
        }
    }
    if (named == 0) {
        snprintf(buf, len, "nothing");
    }
    return named;
}

static double recorder_ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

void gs__recorder_dump(gs__recorder_t *t, void (*emit)(void *arg, const char *line), void *arg)
{
    char line[1024];
    char desc[256];
    char waits[256];
    gs__recorder_op_t e;
    uint64_t first;
    uint64_t next;
    const uint64_t now = gs__now_ns();

    pthread_mutex_lock(&t->mu);
    next = t->next;
    first = (next > t->cap) ? next - t->cap : 0;
    snprintf(line, sizeof(line),
             "gradsync flight recorder: rank %d of %d, %llu operation(s), the last %llu below "
             "(GS_TRACE_SIZE %u); times in ms since the communicator started",
             t->rank, t->size, (unsigned long long)next, (unsigned long long)(next - first),
             t->cap);
    pthread_mutex_unlock(&t->mu);
    emit(arg, line);
    for (uint64_t i = first; i < next; i++) {
        size_t used;

        pthread_mutex_lock(&t->mu);
        if (i + t->cap < t->next) {
            pthread_mutex_unlock(&t->mu);
            continue; /* overwritten meanwhile */
        }
        e = t->ops[i % t->cap];
        pthread_mutex_unlock(&t->mu);
        t->describe(&e, desc, sizeof(desc));
        used = (size_t)snprintf(
            line, sizeof(line), "  seq %llu %s bytes %zu algo %s fp 0x%04x start %.3f ",
            (unsigned long long)e.seq, desc, e.bytes, (e.algo >= 0) ? t->algo_name(e.algo) : "-",
            (unsigned)e.fp, recorder_ms(e.t_start_ns - t->t0_ns));
        if (used >= sizeof(line)) {
            used = sizeof(line) - 1;
        }
        if (e.t_end_ns == 0) {
            (void)gs__recorder_waiting(t, waits, sizeof(waits));
            snprintf(line + used, sizeof(line) - used,
                     "end - (running for %.3f ms) status in progress, waiting on: %s",
                     recorder_ms(now - e.t_start_ns), waits);
        } else {
            size_t w = 0;

            waits[0] = '\0';
            for (int k = 0; (k < e.nwait) && (k < GS_TRACE_WAIT_MAX) && (w < sizeof(waits)); k++) {
                const int ret =
                    snprintf(waits + w, sizeof(waits) - w, "%s%s rank %d", (k > 0) ? ", " : "",
                             e.wait_send[k] ? "send to" : "receive from", e.wait_peer[k]);
                w = (ret < 0) ? w : w + (size_t)ret;
            }
            snprintf(line + used, sizeof(line) - used, "end %.3f (%.3f ms) status %s%s%s%s",
                     recorder_ms(e.t_end_ns - t->t0_ns), recorder_ms(e.t_end_ns - e.t_start_ns),
                     gs_status_name(e.status), (e.nwait > 0) ? ", was waiting on: " : "", waits,
                     (e.nwait > GS_TRACE_WAIT_MAX) ? ", ..." : "");
        }
        emit(arg, line);
    }
}

/* ---------------------------------------------------------------------- */
/* GS_DUMP_SIGNAL                                                         */
/* ---------------------------------------------------------------------- */

/* Async-signal-safe: one write(2), errno preserved. */
static void recorder_on_signal(int sig)
{
    const int saved = errno;
    const char byte = 'd';

    (void)sig;
    if (write(recorder_pipe[1], &byte, 1) < 0) {
        /* Nothing can be done in a handler; a full pipe already has a dump pending. */
    }
    errno = saved;
}

static void recorder_emit_log(void *arg, const char *line)
{
    (void)arg;
    GS_WARN("%s", line);
}

static void *recorder_dump_thread(void *arg)
{
    (void)arg;
    for (;;) {
        char buf[16];
        const ssize_t ret = read(recorder_pipe[0], buf, sizeof(buf));

        if ((ret < 0) && (errno == EINTR)) {
            continue;
        }
        if (ret <= 0) {
            return NULL;
        }
        pthread_mutex_lock(&recorder_reg_mu);
        if (recorder_reg_head == NULL) {
            GS_WARN("GS_DUMP_SIGNAL: no live communicator to dump");
        }
        for (gs__recorder_t *t = recorder_reg_head; t != NULL; t = t->reg_next) {
            gs__recorder_dump(t, recorder_emit_log, NULL);
        }
        pthread_mutex_unlock(&recorder_reg_mu);
    }
}

static int recorder_parse_signal(const char *s)
{
    static const struct {
        const char *name;
        int sig;
    } names[] = {{"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP},
                 {"QUIT", SIGQUIT}, {"PWR", SIGPWR},   {"WINCH", SIGWINCH}};
    char *end = NULL;
    long v;

    if (strncasecmp(s, "SIG", 3) == 0) {
        s += 3;
    }
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcasecmp(s, names[i].name) == 0) {
            return names[i].sig;
        }
    }
    v = strtol(s, &end, 10);
    if ((end != s) && (*end == '\0') && (v > 0) && (v < NSIG) && (v != SIGKILL) && (v != SIGSTOP)) {
        return (int)v;
    }
    return -1;
}

gs_status_t gs__recorder_signal_setup(const char *signame, gs__recorder_t *t)
{
    struct sigaction sa;
    pthread_t th;
    int sig;
    int ret;

    if ((signame == NULL) || (signame[0] == '\0')) {
        return GS_OK;
    }
    sig = recorder_parse_signal(signame);
    if (sig < 0) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "GS_DUMP_SIGNAL=%s is not a signal: give USR1, USR2, HUP, QUIT, "
                             "PWR, WINCH or a number",
                             signame);
    }
    pthread_mutex_lock(&recorder_reg_mu);
    if (recorder_sig_no == 0) {
        if (pipe(recorder_pipe) != 0) {
            pthread_mutex_unlock(&recorder_reg_mu);
            return gs__error_set(GS_ERR_SYSTEM, "GS_DUMP_SIGNAL: pipe failed: %s", strerror(errno));
        }
        (void)fcntl(recorder_pipe[0], F_SETFD, FD_CLOEXEC);
        (void)fcntl(recorder_pipe[1], F_SETFD, FD_CLOEXEC);
        (void)fcntl(recorder_pipe[1], F_SETFL, O_NONBLOCK);
        ret = pthread_create(&th, NULL, recorder_dump_thread, NULL);
        if (ret != 0) {
            close(recorder_pipe[0]);
            close(recorder_pipe[1]);
            recorder_pipe[0] = recorder_pipe[1] = -1;
            pthread_mutex_unlock(&recorder_reg_mu);
            return gs__error_set(GS_ERR_SYSTEM, "GS_DUMP_SIGNAL: cannot start the dump thread: %s",
                                 strerror(ret));
        }
        (void)pthread_detach(th);
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = recorder_on_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(sig, &sa, NULL) != 0) {
            pthread_mutex_unlock(&recorder_reg_mu);
            return gs__error_set(GS_ERR_SYSTEM, "GS_DUMP_SIGNAL: sigaction(%d) failed: %s", sig,
                                 strerror(errno));
        }
        recorder_sig_no = sig;
        GS_INFO(INIT, "GS_DUMP_SIGNAL: signal %d dumps the flight recorders", sig);
    } else if (recorder_sig_no != sig) {
        GS_WARN("GS_DUMP_SIGNAL=%s ignored: signal %d already dumps the flight recorders", signame,
                recorder_sig_no);
    }
    t->reg_next = recorder_reg_head;
    recorder_reg_head = t;
    pthread_mutex_unlock(&recorder_reg_mu);
    return GS_OK;
}
