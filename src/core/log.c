/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logging: parses GS_DEBUG, GS_DEBUG_SUBSYS and GS_DEBUG_FILE once (the
 * gs_config_t fields of the same names override them from the gs_comm_init
 * that sets them, through gs__log_configure), and writes lines of the form
 *   host:pid:tid [rank] GS LEVEL SUBSYS message
 * to stderr or the debug file, each with a single write() under a mutex so
 * that lines from different threads never interleave. This is the only file
 * of the library that writes to stderr. It does not rotate or buffer the
 * log, and it never allocates: every line is formatted in a stack buffer and
 * long lines are truncated (ending in "...").
 */
#include "core/log.h"

#include "gradsync/version.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LOG_LINE_MAX 2048
#define LOG_HOST_MAX 64
#define LOG_PATH_MAX 4096
#define LOG_NUM_INIT_WARNINGS 3
#define LOG_DEFAULT_SUBSYS (GS_SUBSYS_INIT | GS_SUBSYS_BOOT | GS_SUBSYS_ENV)

atomic_int gs__log_level = -1;
atomic_uint gs__log_subsys_mask = LOG_DEFAULT_SUBSYS;

/* Names of the bits of gs__log_subsys_t, by bit (GS_SUBSYS_MAP). */
#define GS_SUBSYS_NAME_ROW(_name, _bit, _str) [_bit] = _str,
static const char *const gs__log_subsys_names[GS_SUBSYS_NUM] = {GS_SUBSYS_MAP(GS_SUBSYS_NAME_ROW)};
#undef GS_SUBSYS_NAME_ROW

static const char *const level_names[] = {"NONE", "VERSION", "WARN", "INFO", "TRACE"};

/* init_lock serialises gs__log_init() (and the test reset); write_lock
 * serialises writes and changes of log_fd. log_host is written only while
 * init_done is 0 and read only after init_done is 1. */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int init_done = 0;
static atomic_int log_rank = -1;
static int log_fd = STDERR_FILENO;
static char log_host[LOG_HOST_MAX] = "unknown";

static void log_emit_va(gs__log_level_t level, unsigned subsys, const char *file, int line,
                        const char *fmt, va_list ap) __attribute__((format(printf, 5, 0)));
static void log_emit(gs__log_level_t level, unsigned subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static const char *subsys_name(unsigned subsys)
{
    int i;

    for (i = 0; i < GS_SUBSYS_NUM; i++) {
        if (subsys == (1u << i)) {
            return gs__log_subsys_names[i];
        }
    }
    /* GS_WARN lines (GS_SUBSYS_ALL) belong to no single subsystem. */
    return "-";
}

static void log_write_all(int fd, const char *buf, size_t len)
{
    size_t off = 0;
    ssize_t ret;

    while (off < len) {
        ret = write(fd, buf + off, len - off);
        if (ret < 0) {
            if (errno == EINTR) {
                continue;
            }
            return; /* nowhere left to report a failing log write */
        }
        if (ret == 0) {
            return;
        }
        off += (size_t)ret;
    }
}

static void log_emit_va(gs__log_level_t level, unsigned subsys, const char *file, int line,
                        const char *fmt, va_list ap)
{
    char buf[LOG_LINE_MAX];
    char rank_str[16];
    const int rank = atomic_load_explicit(&log_rank, memory_order_relaxed);
    const size_t cap = sizeof(buf) - 1; /* room kept for the final newline */
    size_t len;
    int n;

    if (rank < 0) {
        (void)snprintf(rank_str, sizeof(rank_str), "-");
    } else {
        (void)snprintf(rank_str, sizeof(rank_str), "%d", rank);
    }
    n = snprintf(buf, cap, "%s:%ld:%ld [%s] GS %s %s ", log_host, (long)getpid(),
                 (long)syscall(SYS_gettid), rank_str, level_names[level], subsys_name(subsys));
    if (n < 0) {
        return;
    }
    len = ((size_t)n < cap) ? (size_t)n : cap - 1;

    n = vsnprintf(buf + len, cap - len, fmt, ap);
    if (n > 0) {
        if ((size_t)n >= cap - len) {
            len = cap - 1;
            /* NOLINTNEXTLINE(bugprone-not-null-terminated-result): before the terminator. */
            memcpy(buf + len - 3, "...", 3);
        } else {
            len += (size_t)n;
        }
    }
    while ((len > 0) && (buf[len - 1] == '\n')) {
        len--;
    }
    if ((level == GS_LOG_TRACE) && (file != NULL) && (len < cap - 1)) {
        const char *base = strrchr(file, '/');

        n = snprintf(buf + len, cap - len, " [%s:%d]", (base != NULL) ? base + 1 : file, line);
        if (n > 0) {
            len += ((size_t)n < cap - len) ? (size_t)n : cap - len - 1;
        }
    }
    buf[len++] = '\n';

    pthread_mutex_lock(&write_lock);
    log_write_all(log_fd, buf, len);
    pthread_mutex_unlock(&write_lock);
}

static void log_emit(gs__log_level_t level, unsigned subsys, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    log_emit_va(level, subsys, NULL, 0, fmt, ap);
    va_end(ap);
}

/* Strict decimal parse of a whole string into a non-negative int; -1 when invalid. */
static int parse_rank(const char *s)
{
    char *end = NULL;
    long long v;

    if ((s == NULL) || (*s == '\0')) {
        return -1;
    }
    errno = 0;
    v = strtoll(s, &end, 10);
    if ((errno != 0) || (*end != '\0') || (v < 0) || (v > INT_MAX)) {
        return -1;
    }
    return (int)v;
}

static int parse_level(const char *s)
{
    int i;

    for (i = GS_LOG_NONE; i <= GS_LOG_TRACE; i++) {
        if (strcasecmp(s, level_names[i]) == 0) {
            return i;
        }
    }
    return -1;
}

/*
 * Parse a GS_DEBUG_SUBSYS list ("NET,COLL", "^NET", "ALL"). Unknown names are
 * skipped; the first is copied to @p bad (empty when every name was known).
 */
static unsigned parse_subsys(const char *s, char *bad, size_t bad_len)
{
    const char *p = s;
    unsigned mask = 0;
    int invert = 0;
    int i;

    bad[0] = '\0';
    if (*p == '^') {
        invert = 1;
        p++;
    }
    while (*p != '\0') {
        const char *tok;
        size_t tok_len;
        int known = 0;

        while ((*p == ' ') || (*p == ',')) {
            p++;
        }
        tok = p;
        while ((*p != '\0') && (*p != ',') && (*p != ' ')) {
            p++;
        }
        tok_len = (size_t)(p - tok);
        if (tok_len == 0) {
            continue;
        }
        if ((tok_len == 3) && (strncasecmp(tok, "ALL", 3) == 0)) {
            mask = GS_SUBSYS_ALL;
            known = 1;
        }
        for (i = 0; (i < GS_SUBSYS_NUM) && !known; i++) {
            if ((strlen(gs__log_subsys_names[i]) == tok_len) &&
                (strncasecmp(tok, gs__log_subsys_names[i], tok_len) == 0)) {
                mask |= 1u << i;
                known = 1;
            }
        }
        if (!known && (bad[0] == '\0')) {
            (void)snprintf(bad, bad_len, "%.*s", (int)tok_len, tok);
        }
    }
    return invert ? (GS_SUBSYS_ALL & ~mask) : mask;
}

/* Expand %h, %p, %r and %% in @p tmpl. Returns 0, or -1 when the result does not fit. */
static int expand_path(const char *tmpl, char *out, size_t out_len, int rank)
{
    size_t o = 0;
    const char *p;

    for (p = tmpl; *p != '\0'; p++) {
        char piece[32];
        const char *add = piece;
        size_t add_len;

        if ((p[0] == '%') && (p[1] == 'h')) {
            add = log_host;
            p++;
        } else if ((p[0] == '%') && (p[1] == 'p')) {
            (void)snprintf(piece, sizeof(piece), "%ld", (long)getpid());
            p++;
        } else if ((p[0] == '%') && (p[1] == 'r')) {
            if (rank < 0) {
                (void)snprintf(piece, sizeof(piece), "-");
            } else {
                (void)snprintf(piece, sizeof(piece), "%d", rank);
            }
            p++;
        } else if ((p[0] == '%') && (p[1] == '%')) {
            (void)snprintf(piece, sizeof(piece), "%%");
            p++;
        } else {
            piece[0] = *p;
            piece[1] = '\0';
        }
        add_len = strlen(add);
        if (o + add_len >= out_len) {
            return -1;
        }
        memcpy(out + o, add, add_len);
        o += add_len;
    }
    out[o] = '\0';
    return 0;
}

int gs__log_expand_path(const char *tmpl, char *out, size_t out_len, int rank)
{
    gs__log_init(); /* reads the host name */
    return expand_path(tmpl, out, out_len, rank);
}

static void log_read_host(void)
{
    char *dot;

    if (gethostname(log_host, sizeof(log_host)) != 0) {
        (void)snprintf(log_host, sizeof(log_host), "unknown");
        return;
    }
    log_host[sizeof(log_host) - 1] = '\0';
    /* Short host name, as NCCL prints it: enough to tell nodes apart. */
    dot = strchr(log_host, '.');
    if (dot != NULL) {
        *dot = '\0';
    }
}

void gs__log_init(void)
{
    char warnings[LOG_NUM_INIT_WARNINGS][512];
    char bad[64];
    char path[LOG_PATH_MAX];
    const char *env;
    int nwarn = 0;
    int level = GS_LOG_WARN;
    unsigned mask = LOG_DEFAULT_SUBSYS;
    int fd = STDERR_FILENO;
    int saved_errno;
    int i;

    if (atomic_load_explicit(&init_done, memory_order_acquire)) {
        return;
    }
    saved_errno = errno; /* called from the log macros, which must not clobber errno */
    pthread_mutex_lock(&init_lock);
    if (atomic_load_explicit(&init_done, memory_order_acquire)) {
        pthread_mutex_unlock(&init_lock);
        errno = saved_errno;
        return;
    }

    log_read_host();
    if (atomic_load_explicit(&log_rank, memory_order_relaxed) < 0) {
        /* Until gs__log_set_rank() runs, use the rank the launcher gave us. */
        int rank = parse_rank(getenv("GS_RANK"));

        if (rank < 0) {
            rank = parse_rank(getenv("RANK"));
        }
        atomic_store_explicit(&log_rank, rank, memory_order_relaxed);
    }

    env = getenv("GS_DEBUG");
    if ((env != NULL) && (*env != '\0')) {
        level = parse_level(env);
        if (level < 0) {
            level = GS_LOG_WARN;
            (void)snprintf(warnings[nwarn++], sizeof(warnings[0]),
                           "GS_DEBUG=%.64s is not a log level (NONE, VERSION, WARN, INFO or "
                           "TRACE); using WARN",
                           env);
        }
    }

    env = getenv("GS_DEBUG_SUBSYS");
    if ((env != NULL) && (*env != '\0')) {
        mask = parse_subsys(env, bad, sizeof(bad));
        if (bad[0] != '\0') {
            (void)snprintf(warnings[nwarn++], sizeof(warnings[0]),
                           "GS_DEBUG_SUBSYS: unknown subsystem %s ignored (known: INIT, BOOT, NET, "
                           "COLL, ALGO, COMP, PS, CUDA, ENV, ALLOC, P2P, ALL)",
                           bad);
        }
    }

    env = getenv("GS_DEBUG_FILE");
    if ((env != NULL) && (*env != '\0')) {
        if (expand_path(env, path, sizeof(path),
                        atomic_load_explicit(&log_rank, memory_order_relaxed)) != 0) {
            (void)snprintf(warnings[nwarn++], sizeof(warnings[0]),
                           "GS_DEBUG_FILE: expanded path is longer than %d bytes; logging to "
                           "stderr",
                           LOG_PATH_MAX - 1);
        } else {
            fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
            if (fd < 0) {
                (void)snprintf(warnings[nwarn++], sizeof(warnings[0]),
                               "GS_DEBUG_FILE: cannot open %.256s (%s); logging to stderr", path,
                               strerror(errno));
                fd = STDERR_FILENO;
            }
        }
    }

    pthread_mutex_lock(&write_lock);
    log_fd = fd;
    pthread_mutex_unlock(&write_lock);
    atomic_store_explicit(&gs__log_subsys_mask, mask, memory_order_relaxed);
    atomic_store_explicit(&gs__log_level, level, memory_order_release);
    atomic_store_explicit(&init_done, 1, memory_order_release);

    if ((level == GS_LOG_VERSION) || (level >= GS_LOG_INFO)) {
        log_emit(GS_LOG_VERSION, GS_SUBSYS_INIT, "gradsync version %s", GS_VERSION_STRING);
    }
    for (i = 0; (i < nwarn) && (level >= GS_LOG_WARN); i++) {
        log_emit(GS_LOG_WARN, GS_SUBSYS_ALL, "%s", warnings[i]);
    }
    pthread_mutex_unlock(&init_lock);
    errno = saved_errno;
}

int gs__log_configure(const char *level, const char *subsys, const char *file, char *why,
                      size_t why_len)
{
    static char cur_path[LOG_PATH_MAX]; /* under init_lock: the file opened here, if any */
    char bad[64];
    char path[LOG_PATH_MAX];
    int lvl = -1;
    unsigned mask = 0;
    int fd = -1;

    gs__log_init();
    why[0] = '\0';
    if ((level != NULL) && ((lvl = parse_level(level)) < 0)) {
        (void)snprintf(why, why_len,
                       "debug level \"%.64s\" is not one of NONE, VERSION, WARN, INFO, TRACE",
                       level);
        return -1;
    }
    if (subsys != NULL) {
        mask = parse_subsys(subsys, bad, sizeof(bad));
        if (bad[0] != '\0') {
            (void)snprintf(why, why_len,
                           "debug subsystem \"%s\" is not known (known: INIT, BOOT, NET, COLL, "
                           "ALGO, COMP, PS, CUDA, ENV, ALLOC, P2P, ALL)",
                           bad);
            return -1;
        }
    }
    pthread_mutex_lock(&init_lock);
    if ((file != NULL) && (file[0] != '\0')) {
        if (expand_path(file, path, sizeof(path),
                        atomic_load_explicit(&log_rank, memory_order_relaxed)) != 0) {
            pthread_mutex_unlock(&init_lock);
            (void)snprintf(why, why_len, "debug file: expanded path is longer than %d bytes",
                           LOG_PATH_MAX - 1);
            return -1;
        }
        if (strcmp(path, cur_path) != 0) {
            /* A second communicator with the same setting keeps the file. */
            fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
            if (fd < 0) {
                pthread_mutex_unlock(&init_lock);
                (void)snprintf(why, why_len, "debug file: cannot open %.256s (%s)", path,
                               strerror(errno));
                return -1;
            }
            (void)snprintf(cur_path, sizeof(cur_path), "%s", path);
            pthread_mutex_lock(&write_lock);
            if (log_fd != STDERR_FILENO) {
                (void)close(log_fd);
            }
            log_fd = fd;
            pthread_mutex_unlock(&write_lock);
        }
    }
    if (subsys != NULL) {
        atomic_store_explicit(&gs__log_subsys_mask, mask, memory_order_relaxed);
    }
    if (lvl >= 0) {
        atomic_store_explicit(&gs__log_level, lvl, memory_order_release);
    }
    pthread_mutex_unlock(&init_lock);
    return 0;
}

void gs__log_set_rank(int rank)
{
    atomic_store_explicit(&log_rank, (rank < 0) ? -1 : rank, memory_order_relaxed);
}

void gs__log_reset_for_test(void)
{
    pthread_mutex_lock(&init_lock);
    pthread_mutex_lock(&write_lock);
    if (log_fd != STDERR_FILENO) {
        (void)close(log_fd);
    }
    log_fd = STDERR_FILENO;
    pthread_mutex_unlock(&write_lock);
    atomic_store_explicit(&log_rank, -1, memory_order_relaxed);
    atomic_store_explicit(&gs__log_subsys_mask, LOG_DEFAULT_SUBSYS, memory_order_relaxed);
    atomic_store_explicit(&gs__log_level, -1, memory_order_relaxed);
    atomic_store_explicit(&init_done, 0, memory_order_release);
    pthread_mutex_unlock(&init_lock);
}

void gs__log(gs__log_level_t level, unsigned subsys, const char *file, int line, const char *fmt,
             ...)
{
    const int saved_errno = errno; /* callers log first and read errno after */
    va_list ap;

    if ((level <= GS_LOG_NONE) || (level > GS_LOG_TRACE)) {
        return;
    }
    gs__log_init();
    va_start(ap, fmt);
    log_emit_va(level, subsys, file, line, fmt, ap);
    va_end(ap);
    errno = saved_errno;
}
