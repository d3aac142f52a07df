/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for src/core/host.c: the host id is stable within a process,
 * never 0, follows a GS_HOST_ID override, and differs between network
 * namespaces (checked by the tests/net lab, which needs root).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/host.h"

static void test_host_id_stable(void **state)
{
    (void)state;
    const uint64_t a = gs__host_id(NULL);
    assert_int_not_equal(a, 0);
    assert_int_equal(a, gs__host_id(NULL));
    assert_int_equal(a, gs__host_id(""));
}

static void test_host_id_override(void **state)
{
    (void)state;
    const uint64_t a = gs__host_id("node-a");
    const uint64_t b = gs__host_id("node-b");
    assert_int_not_equal(a, 0);
    assert_int_not_equal(a, b);
    assert_int_equal(a, gs__host_id("node-a"));
    assert_int_not_equal(a, gs__host_id(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_id_stable),
        cmocka_unit_test(test_host_id_override),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
