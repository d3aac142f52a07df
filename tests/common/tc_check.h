/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tc_check.h: the pass/fail line of the multi-rank check programs that print
 * one line per check ("ok   rank R what" or "FAIL rank R what: detail") and
 * count them for their summary (abort_check, shrink_check, grow_check). One
 * program per file: the counters are the including file's own.
 */
#ifndef GS_TESTS_COMMON_TC_CHECK_H
#define GS_TESTS_COMMON_TC_CHECK_H

#include <stdio.h>

static int g_rank = -1; /* this process's rank, for the lines */
static int g_pass;
static int g_fail;

static inline void check(int ok, const char *what, const char *detail)
{
    if (ok) {
        g_pass++;
        printf("ok   rank %d %s\n", g_rank, what);
    } else {
        g_fail++;
        printf("FAIL rank %d %s: %s\n", g_rank, what, detail);
    }
    fflush(stdout); /* a rank killed next keeps its lines */
}

#endif /* GS_TESTS_COMMON_TC_CHECK_H */
