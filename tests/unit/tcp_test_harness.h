/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test helper, not a test: what the in-process TCP transport tests
 * (test_tcp_transport.c, test_tcp_shm.c) share: waiting for a request with a
 * deadline, and the failure record of their rank threads, which must not
 * call cmocka's asserts (they are not thread-safe). A rank thread records
 * failures with tcp_fail(), CHECK() or CHECK_EQ(); the main thread joins the
 * ranks, then asserts that tcp_fails_end() counted none (it prints the
 * first). CHECK and CHECK_EQ take the test's job, whose struct holds a
 * tcp_fails_t named fails. Include after <cmocka.h>.
 */
#ifndef GS_TESTS_UNIT_TCP_TEST_HARNESS_H
#define GS_TESTS_UNIT_TCP_TEST_HARNESS_H

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/transport.h"

typedef struct tcp_fails {
    pthread_mutex_t lock;
    int failed;              /* failures recorded so far */
    char first_failure[512]; /* "line N: what went wrong", the first one */
} tcp_fails_t;

static inline void tcp_fails_init(tcp_fails_t *f)
{
    f->failed = 0;
    f->first_failure[0] = '\0';
    pthread_mutex_init(&f->lock, NULL);
}

static inline void tcp_fail(tcp_fails_t *f, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Record a failure at @p line; the first one keeps its message. Thread-safe. */
static inline void tcp_fail(tcp_fails_t *f, int line, const char *fmt, ...)
{
    va_list ap;

    pthread_mutex_lock(&f->lock);
    if (f->failed++ == 0) {
        int n = snprintf(f->first_failure, sizeof(f->first_failure), "line %d: ", line);

        va_start(ap, fmt);
        vsnprintf(f->first_failure + n, sizeof(f->first_failure) - (size_t)n, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&f->lock);
}

/* After the rank threads are joined: print the count and the first failure
 * (after @p what, which names the case) if any, release the lock, and
 * return the count for the caller to assert on. */
static inline int tcp_fails_end(tcp_fails_t *f, const char *what)
{
    if (f->failed > 0) {
        print_error("%s%d failures, first: %s\n", what, f->failed, f->first_failure);
    }
    pthread_mutex_destroy(&f->lock);
    return f->failed;
}

/* Progress @p tp until @p req finishes or @p wait_ms pass. Returns 1 when it
 * finished (*comp filled in), 0 when it did not (it stays posted). */
static inline int tcp_wait_req(gs__tp_t *tp, gs__tp_req_t *req, gs__tp_completion_t *comp,
                               int wait_ms)
{
    const uint64_t deadline = gs__deadline_after_ms(wait_ms);
    int done = 0;

    for (;;) {
        gs__tcp_ops.test(tp, req, &done, comp);
        if (done || (gs__now_ns() >= deadline)) {
            return done;
        }
        (void)gs__tcp_ops.progress(tp, deadline);
    }
}

#define CHECK(_job, _cond)                                                                         \
    do {                                                                                           \
        if (!(_cond)) {                                                                            \
            tcp_fail(&(_job)->fails, __LINE__, "check failed: %s", #_cond);                        \
        }                                                                                          \
    } while (0)

#define CHECK_EQ(_job, _a, _b)                                                                     \
    do {                                                                                           \
        long long _va = (long long)(_a);                                                           \
        long long _vb = (long long)(_b);                                                           \
        if (_va != _vb) {                                                                          \
            tcp_fail(&(_job)->fails, __LINE__, "%s == %lld, expected %s == %lld (%s)", #_a, _va,   \
                     #_b, _vb, gs__error_get());                                                   \
        }                                                                                          \
    } while (0)

#endif /* GS_TESTS_UNIT_TCP_TEST_HARNESS_H */
