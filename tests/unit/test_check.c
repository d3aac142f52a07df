/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The flow macros of src/core/check.h: each forwards the callee's status and
 * its sentence unchanged, GS_CHECK_GOTO runs the cleanup, GS_RETURN_ERR_IF
 * records its sentence, and GS_ASSERT does not evaluate its condition when
 * the build leaves invariants out (and aborts on a false one when it keeps
 * them).
 */
#include "core/check.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static int calls;

static gs_status_t callee(gs_status_t status)
{
    calls++;
    if (status != GS_OK) {
        return gs__error_set(status, "callee failed with %d", (int)status);
    }
    return GS_OK;
}

static gs_status_t two_steps(gs_status_t first, gs_status_t second)
{
    GS_CHECK(callee(first));
    GS_CHECK(callee(second));
    return GS_OK;
}

static void test_check_forwards(void **state)
{
    (void)state;
    calls = 0;
    assert_int_equal(two_steps(GS_OK, GS_OK), GS_OK);
    assert_int_equal(calls, 2);
    calls = 0;
    assert_int_equal(two_steps(GS_ERR_TIMEOUT, GS_OK), GS_ERR_TIMEOUT);
    assert_int_equal(calls, 1);
    assert_string_equal(gs__error_get(), "callee failed with -41");
    calls = 0;
    assert_int_equal(two_steps(GS_OK, GS_ERR_PROTOCOL), GS_ERR_PROTOCOL);
    assert_int_equal(calls, 2);
}

static gs_status_t with_cleanup(gs_status_t first, int *cleaned)
{
    gs_status_t status = GS_OK;

    GS_CHECK_GOTO(callee(first), status, out_clean);
    GS_CHECK_GOTO(callee(GS_OK), status, out_clean);
out_clean:
    (*cleaned)++;
    return status;
}

static void test_check_goto_cleans(void **state)
{
    int cleaned = 0;

    (void)state;
    calls = 0;
    assert_int_equal(with_cleanup(GS_OK, &cleaned), GS_OK);
    assert_int_equal(calls, 2);
    assert_int_equal(cleaned, 1);
    calls = 0;
    assert_int_equal(with_cleanup(GS_ERR_NO_MEMORY, &cleaned), GS_ERR_NO_MEMORY);
    assert_int_equal(calls, 1);
    assert_int_equal(cleaned, 2);
}

static gs_status_t needs_positive(int x)
{
    GS_RETURN_ERR_IF(x <= 0, GS_ERR_INVALID_ARG, "x is %d: pass a positive count", x);
    return GS_OK;
}

static void test_return_err_if_records(void **state)
{
    (void)state;
    gs__error_clear();
    assert_int_equal(needs_positive(3), GS_OK);
    assert_string_equal(gs__error_get(), "");
    assert_int_equal(needs_positive(-2), GS_ERR_INVALID_ARG);
    assert_string_equal(gs__error_get(), "x is -2: pass a positive count");
}

static int evaluated;

static int touch(void)
{
    evaluated++;
    return 1;
}

static void test_assert_build_mode(void **state)
{
    pid_t pid;
    int wstatus = 0;

    (void)state;
    evaluated = 0;
    GS_ASSERT(touch() == 1);
#ifdef GS_ENABLE_ASSERT
    assert_int_equal(evaluated, 1);
    /* A false invariant aborts (in a child, so that this test goes on). */
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        GS_ASSERT(evaluated == 12345);
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &wstatus, 0), pid);
    assert_true(WIFSIGNALED(wstatus));
    assert_int_equal(WTERMSIG(wstatus), SIGABRT);
#else
    assert_int_equal(evaluated, 0); /* compiled out: not even evaluated */
    (void)pid;
    (void)wstatus;
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_forwards),
        cmocka_unit_test(test_check_goto_cleans),
        cmocka_unit_test(test_return_err_if_records),
        cmocka_unit_test(test_assert_build_mode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
