/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fault_util.h: what the fault-injection rank programs share: fault_check
 * (run_fault.sh, the lab's cutlink and heartbeat tests) and trial_check
 * (run_trials.sh, run_trials_lab.sh). They are the clocks their lines carry,
 * the check that gs_last_error() names a rank, and the "--name value"
 * command line after the mode word. It holds no pass/fail policy: each
 * program keeps its own.
 *
 * Header only (static inline), like check_report.h: include it in the
 * program's one source file.
 */
#ifndef GS_TESTS_FAULT_UTIL_H
#define GS_TESTS_FAULT_UTIL_H

#include <ctype.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "tc_clock.h" /* tc_now_ms: durations inside one process */

/* Wall-clock milliseconds (CLOCK_REALTIME), comparable between the processes
 * of one host: the scripts subtract one rank's time from another's. */
static inline long long wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* True when @p msg contains "rank N" or "peer N" (any case), with N equal
 * to @p want, or any number when want < 0. */
static inline int names_rank(const char *msg, int want)
{
    for (const char *p = msg; *p; p++) {
        if ((strncasecmp(p, "rank", 4) != 0) && (strncasecmp(p, "peer", 4) != 0))
            continue;
        const char *q = p + 4;
        while ((*q == ' ') || (*q == '=') || (*q == ':') || (*q == '#'))
            q++;
        if (!isdigit((unsigned char)*q))
            continue;
        if ((want < 0) || (strtol(q, NULL, 10) == want))
            return 1;
    }
    return 0;
}

/* The kinds of value a "--name value" option holds, converted as
 * strtoull (size_t), atol (long), atoi (int) and atof (double) do. */
typedef enum {
    FAULT_OPT_STR,
    FAULT_OPT_SIZE,
    FAULT_OPT_LONG,
    FAULT_OPT_INT,
    FAULT_OPT_DOUBLE,
} fault_opt_kind_t;

/* One option: its name ("--count"), its kind, and where its value goes. */
typedef struct {
    const char *name;
    fault_opt_kind_t kind;
    void *value;
} fault_opt_t;

/*
 * Reads argv[2], argv[3], ... as "--name value" pairs (argv[1] is the mode)
 * into the options of @p opts; a name with no value after it is left for
 * the caller's own argc check. Returns NULL when every name was known, else
 * the first unknown one (the options before it are set).
 */
static inline const char *fault_parse_opts(int argc, char **argv, const fault_opt_t *opts,
                                           size_t nopts)
{
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        size_t k = 0;
        while ((k < nopts) && (strcmp(a, opts[k].name) != 0))
            k++;
        if (k == nopts)
            return a;
        switch (opts[k].kind) {
        case FAULT_OPT_STR:
            *(const char **)opts[k].value = v;
            break;
        case FAULT_OPT_SIZE:
            *(size_t *)opts[k].value = (size_t)strtoull(v, NULL, 10);
            break;
        case FAULT_OPT_LONG:
            *(long *)opts[k].value = atol(v);
            break;
        case FAULT_OPT_INT:
            *(int *)opts[k].value = atoi(v);
            break;
        case FAULT_OPT_DOUBLE:
            *(double *)opts[k].value = atof(v);
            break;
        }
    }
    return NULL;
}

#endif /* GS_TESTS_FAULT_UTIL_H */
