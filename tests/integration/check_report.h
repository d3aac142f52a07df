/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_report.h: the pass/fail bookkeeping shared by the multi-rank check
 * programs (stats_check, badinput_check). Each check prints one line on
 * stdout tagged with the rank: "FAIL rank R LABEL: why" always, "ok   rank R
 * LABEL" with --verbose; the program ends with its "N passed, M failed"
 * line from g_passed and g_failed.
 *
 * The header defines the counters, so include it in the program's one
 * source file only. The program sets g_rank once it knows its rank and
 * g_verbose from its command line.
 */
#ifndef GS_TESTS_CHECK_REPORT_H
#define GS_TESTS_CHECK_REPORT_H

#include <stdarg.h>
#include <stdio.h>

static int g_rank;    /* this process's rank, printed on every line */
static long g_passed; /* checks that held */
static long g_failed; /* checks that did not */
static int g_verbose; /* print a line for passed checks too */

/* Counts a failed check and prints why (at most 511 characters of it). */
__attribute__((format(printf, 2, 3))) static inline void fail(const char *label, const char *fmt,
                                                              ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    printf("FAIL rank %d %s: %s\n", g_rank, label, msg);
    g_failed++;
}

/* Counts a passed check; prints it with --verbose. */
static inline void pass(const char *label)
{
    g_passed++;
    if (g_verbose) {
        printf("ok   rank %d %s\n", g_rank, label);
    }
}

#endif /* GS_TESTS_CHECK_REPORT_H */
