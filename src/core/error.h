/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The thread-local "last error" sentence behind gs_last_error(). The code
 * that first detects an error calls gs__error_set() once; callers that only
 * forward a status leave the text alone. Also logs the sentence at WARN.
 */
#ifndef GS_CORE_ERROR_H
#define GS_CORE_ERROR_H

#include <stddef.h>

#include "gradsync/status.h"

#define GS_ERROR_MSG_MAX 512

/* Record "fmt ..." as this thread's last error, log it at WARN (unless the
 * status is in the argument band, logged at INFO) and return @p status. */
gs_status_t gs__error_set(gs_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Add context to an error already reported by a callee: replace this
 * thread's last error with "fmt ..." (which may include gs__error_get()),
 * without logging it again, and return @p status. */
gs_status_t gs__error_wrap(gs_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Replace this thread's last error text without logging (used to carry a
 * worker thread's error text over to the thread that waits on a request). */
void gs__error_copy_in(const char *msg);

/* The first failure of a sequence of calls and its sentence, kept while
 * the later calls overwrite this thread's last error (waiting on several
 * requests, the steps of a destroy). Start from {GS_OK, ""}; call
 * gs__error_first_keep with each call's status, then return
 * gs__error_first_end. Local to one thread. */
typedef struct gs__error_first {
    gs_status_t status;
    char msg[GS_ERROR_MSG_MAX];
} gs__error_first_t;

/* Keep @p status and this thread's last error if it is the first failure. */
void gs__error_first_keep(gs__error_first_t *first, gs_status_t status);

/* The first failure kept (GS_OK when none), its sentence made this
 * thread's last error again. */
gs_status_t gs__error_first_end(const gs__error_first_t *first);

/* This thread's last error text (never NULL). */
const char *gs__error_get(void);

/* Clear this thread's last error. */
void gs__error_clear(void);

/* For pure decoders that explain a rejection to their caller instead of
 * setting the thread's error: write "fmt ..." into why (when why is not
 * NULL and whylen > 0) and return @p status. */
gs_status_t gs__error_explain(gs_status_t status, char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/*
 * For clang's static analyzer only (clang-tidy's clang-analyzer-* checks, make
 * lint): it does not see into error.c, so it cannot know that these calls
 * return their @p status, and it follows every `return gs__error_set(GS_ERR_X,
 * ...)` back into the caller as if it had returned GS_OK, reporting the null
 * dereferences and double frees that would follow. These wrappers tell it; a
 * compiler never sees them (error.c, which defines the calls, undefines them).
 */
#ifdef __clang_analyzer__
#define gs__error_set(_status, ...)                                                                \
    __extension__({                                                                                \
        const gs_status_t gs__analyzer_status_ = (_status);                                        \
        (void)(gs__error_set)(gs__analyzer_status_, __VA_ARGS__);                                  \
        gs__analyzer_status_;                                                                      \
    })
#define gs__error_wrap(_status, ...)                                                               \
    __extension__({                                                                                \
        const gs_status_t gs__analyzer_status_ = (_status);                                        \
        (void)(gs__error_wrap)(gs__analyzer_status_, __VA_ARGS__);                                 \
        gs__analyzer_status_;                                                                      \
    })
#define gs__error_explain(_status, _why, _whylen, ...)                                             \
    __extension__({                                                                                \
        const gs_status_t gs__analyzer_status_ = (_status);                                        \
        (void)(gs__error_explain)(gs__analyzer_status_, (_why), (_whylen), __VA_ARGS__);           \
        gs__analyzer_status_;                                                                      \
    })
#endif

#endif /* GS_CORE_ERROR_H */
