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

/* This thread's last error text (never NULL). */
const char *gs__error_get(void);

/* Clear this thread's last error. */
void gs__error_clear(void);

/* For pure decoders that explain a rejection to their caller instead of
 * setting the thread's error: write "fmt ..." into why (when why is not
 * NULL and whylen > 0) and return @p status. */
gs_status_t gs__error_explain(gs_status_t status, char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif /* GS_CORE_ERROR_H */
