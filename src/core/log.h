/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logging: GS_DEBUG=NONE|VERSION|WARN|INFO|TRACE, GS_DEBUG_SUBSYS=INIT,NET,..
 * and GS_DEBUG_FILE (with %h host, %p pid, %r rank). Line format:
 *   host:pid:tid [rank] GS LEVEL SUBSYS message
 * The level is checked with one relaxed atomic load before any formatting.
 * Only log.c writes to stderr or the log file.
 */
#ifndef GS_CORE_LOG_H
#define GS_CORE_LOG_H

#include <stdatomic.h>
#include <stddef.h>

typedef enum gs__log_level {
    GS_LOG_NONE = 0,
    GS_LOG_VERSION = 1,
    GS_LOG_WARN = 2,
    GS_LOG_INFO = 3,
    GS_LOG_TRACE = 4
} gs__log_level_t;

/* GS_SUBSYS_MAP(X): X(name, bit, GS_DEBUG_SUBSYS name), one row per log
 * subsystem: the enum (bit flags), the names log.c parses and prints, and
 * the count come from it. Rows are only appended. */
#define GS_SUBSYS_MAP(X)                                                                           \
    X(GS_SUBSYS_INIT, 0, "INIT")                                                                   \
    X(GS_SUBSYS_BOOT, 1, "BOOT")                                                                   \
    X(GS_SUBSYS_NET, 2, "NET")                                                                     \
    X(GS_SUBSYS_COLL, 3, "COLL")                                                                   \
    X(GS_SUBSYS_ALGO, 4, "ALGO")                                                                   \
    X(GS_SUBSYS_COMP, 5, "COMP")                                                                   \
    X(GS_SUBSYS_PS, 6, "PS")                                                                       \
    X(GS_SUBSYS_CUDA, 7, "CUDA")                                                                   \
    X(GS_SUBSYS_ENV, 8, "ENV")                                                                     \
    X(GS_SUBSYS_ALLOC, 9, "ALLOC")                                                                 \
    X(GS_SUBSYS_P2P, 10, "P2P")

#define GS_SUBSYS_ENUM_ROW(_name, _bit, _str) _name = 1u << (_bit),
#define GS_SUBSYS_COUNT_ROW(_name, _bit, _str) +1

/* Log subsystems (bit flags). */
typedef enum gs__log_subsys {
    GS_SUBSYS_MAP(GS_SUBSYS_ENUM_ROW) GS_SUBSYS_ALL = 0xffffffffu
} gs__log_subsys_t;

#define GS_SUBSYS_NUM (0 GS_SUBSYS_MAP(GS_SUBSYS_COUNT_ROW))

/* -1 until gs__log_init() has read the environment. */
extern atomic_int gs__log_level;
extern atomic_uint gs__log_subsys_mask;

/* Read GS_DEBUG, GS_DEBUG_SUBSYS and GS_DEBUG_FILE once (thread-safe, idempotent). */
void gs__log_init(void);
/*
 * Override what gs__log_init() read from GS_DEBUG, GS_DEBUG_SUBSYS and
 * GS_DEBUG_FILE (the gs_config_t fields debug, debug_subsys, debug_file):
 * each NULL argument leaves its setting alone. Process-wide from now on;
 * thread-safe. @p file is expanded like GS_DEBUG_FILE with the rank set by
 * gs__log_set_rank(); naming the file already opened here keeps it open.
 * Returns 0, or -1 with a sentence in @p why (a level or subsystem that is
 * not known, a file that cannot be opened), changing nothing.
 */
int gs__log_configure(const char *level, const char *subsys, const char *file, char *why,
                      size_t why_len);
/* Set the rank printed in the line prefix of this process (-1: none). */
void gs__log_set_rank(int rank);

/* Expand %h (short host name), %p (pid), %r (@p rank, "-" when negative) and
 * %% in @p tmpl, as for GS_DEBUG_FILE. Returns 0, or -1 when it does not fit. */
int gs__log_expand_path(const char *tmpl, char *out, size_t out_len, int rank);

/* Test hook: close the log file and forget the parsed environment, so the
 * next gs__log_init() reads GS_DEBUG* again. Not thread-safe against logging
 * threads; unit tests only. */
void gs__log_reset_for_test(void);

void gs__log(gs__log_level_t level, unsigned subsys, const char *file, int line, const char *fmt,
             ...) __attribute__((format(printf, 5, 6)));

static inline int gs__log_enabled(gs__log_level_t level, unsigned subsys)
{
    int cur = atomic_load_explicit(&gs__log_level, memory_order_relaxed);
    if (cur < 0) {
        gs__log_init();
        cur = atomic_load_explicit(&gs__log_level, memory_order_relaxed);
    }
    return ((int)level <= cur) &&
           ((level == GS_LOG_WARN) ||
            ((atomic_load_explicit(&gs__log_subsys_mask, memory_order_relaxed) & subsys) != 0));
}

#define GS_WARN(...)                                                                               \
    do {                                                                                           \
        if (gs__log_enabled(GS_LOG_WARN, GS_SUBSYS_ALL)) {                                         \
            gs__log(GS_LOG_WARN, GS_SUBSYS_ALL, __FILE__, __LINE__, __VA_ARGS__);                  \
        }                                                                                          \
    } while (0)

#define GS_INFO(_subsys, ...)                                                                      \
    do {                                                                                           \
        if (gs__log_enabled(GS_LOG_INFO, GS_SUBSYS_##_subsys)) {                                   \
            gs__log(GS_LOG_INFO, GS_SUBSYS_##_subsys, __FILE__, __LINE__, __VA_ARGS__);            \
        }                                                                                          \
    } while (0)

#ifdef GS_ENABLE_TRACE
#define GS_TRACE(_subsys, ...)                                                                     \
    do {                                                                                           \
        if (gs__log_enabled(GS_LOG_TRACE, GS_SUBSYS_##_subsys)) {                                  \
            gs__log(GS_LOG_TRACE, GS_SUBSYS_##_subsys, __FILE__, __LINE__, __VA_ARGS__);           \
        }                                                                                          \
    } while (0)
#else
#define GS_TRACE(_subsys, ...)                                                                     \
    do {                                                                                           \
    } while (0)
#endif

#endif /* GS_CORE_LOG_H */
