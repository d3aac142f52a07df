/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The thread-local "last error" sentence behind gs_last_error(). Only the
 * code that first detects an error writes it (through gs__error_set()), and
 * that call also logs the sentence once. This file does not map errno or
 * CUDA codes to statuses; check.h's macros do that and then call here.
 */
#include "core/error.h"
#include "core/check.h"

#include "core/log.h"
#include "gradsync/gradsync.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The definitions below are the real calls, not error.h's analyzer wrappers. */
#undef gs__error_set
#undef gs__error_wrap
#undef gs__error_explain

static _Thread_local char last_error[GS_ERROR_MSG_MAX];

gs_status_t gs__error_set(gs_status_t status, const char *fmt, ...)
{
    char msg[GS_ERROR_MSG_MAX];
    va_list ap;

    /* Format aside first: callers often pass gs__error_get() as an argument. */
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    memcpy(last_error, msg, sizeof(last_error));

    /* Argument errors are the caller's to handle and often expected (probing
     * calls), so they stay at INFO; everything else is worth a WARN. */
    if (gs_status_scope(status) == GS_SCOPE_ARGUMENT) {
        GS_INFO(INIT, "%s (%s)", last_error, gs_status_name(status));
    } else if (GS_IS_ERR(status)) {
        GS_WARN("%s (%s)", last_error, gs_status_name(status));
    }
    return status;
}

gs_status_t gs__error_wrap(gs_status_t status, const char *fmt, ...)
{
    char msg[GS_ERROR_MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    memcpy(last_error, msg, sizeof(last_error));
    return status;
}

void gs__error_copy_in(const char *msg)
{
    if (msg == NULL) {
        last_error[0] = '\0';
        return;
    }
    if (msg == last_error) {
        return; /* snprintf must not copy a buffer onto itself */
    }
    (void)snprintf(last_error, sizeof(last_error), "%s", msg);
}

void gs__error_first_keep(gs__error_first_t *first, gs_status_t status)
{
    if ((status != GS_OK) && (first->status == GS_OK)) {
        first->status = status;
        (void)snprintf(first->msg, sizeof(first->msg), "%s", last_error);
    }
}

gs_status_t gs__error_first_end(const gs__error_first_t *first)
{
    if (first->status != GS_OK) {
        gs__error_copy_in(first->msg);
    }
    return first->status;
}

const char *gs__error_get(void)
{
    return last_error;
}

void gs__error_clear(void)
{
    last_error[0] = '\0';
}

GS_API const char *gs_last_error(void)
{
    return last_error;
}

gs_status_t gs__error_explain(gs_status_t status, char *why, size_t whylen, const char *fmt, ...)
{
    va_list ap;

    if ((why != NULL) && (whylen > 0)) {
        va_start(ap, fmt);
        (void)vsnprintf(why, whylen, fmt, ap);
        va_end(ap);
    }
    return status;
}

#ifdef GS_ENABLE_ASSERT
void gs__assert_fail(const char *cond, const char *file, int line)
{
    gs__log(GS_LOG_WARN, GS_SUBSYS_ALL, file, line,
            "internal invariant failed: %s (a gradsync bug)", cond);
    abort(); /* debug and sanitizer builds only: GS_ASSERT is compiled out of release builds */
}
#endif
