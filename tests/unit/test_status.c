/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of status.c and error.c: status names, messages and scopes
 * against the GS_STATUS_MAP table, version numbers, gs_config_init(), and
 * the thread-local last-error text. No communicator is created.
 */
#include "core/error.h"
#include "gradsync/gradsync.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

typedef struct row {
    int value;
    const char *name;
    const char *msg;
} row_t;

#define ROW(_name, _value, _msg) {(_value), #_name, (_msg)},
static const row_t rows[] = {GS_STATUS_MAP(ROW)};
#undef ROW

#define NUM_ROWS (sizeof(rows) / sizeof(rows[0]))

static gs_status_scope_t expected_scope(int v)
{
    if (v >= 0) {
        return GS_SCOPE_NONE;
    }
    if (v >= -19) {
        return GS_SCOPE_ARGUMENT;
    }
    if (v >= -39) {
        return GS_SCOPE_RESOURCE;
    }
    if (v >= -59) {
        return GS_SCOPE_PEER;
    }
    if (v >= -79) {
        return GS_SCOPE_COMM;
    }
    return GS_SCOPE_INTERNAL;
}

static void test_status_every_code_has_name_and_message(void **state)
{
    size_t i;
    size_t j;

    (void)state;
    for (i = 0; i < NUM_ROWS; i++) {
        const gs_status_t s = (gs_status_t)rows[i].value;

        assert_string_equal(gs_status_name(s), rows[i].name);
        assert_string_equal(gs_strerror(s), rows[i].msg);
        assert_true(strlen(gs_strerror(s)) > 0);
        assert_int_equal(GS_IS_ERR(s), rows[i].value < 0);
        for (j = i + 1; j < NUM_ROWS; j++) {
            assert_int_not_equal(rows[i].value, rows[j].value); /* values are unique */
        }
    }
    assert_string_equal(gs_status_name(GS_ERR_TIMEOUT), "GS_ERR_TIMEOUT");
    assert_string_equal(gs_strerror(GS_OK), "success");
    assert_int_equal(GS_OK, 0);
    assert_int_equal(GS_INPROGRESS, 1);
}

static void test_status_unknown_code(void **state)
{
    (void)state;
    assert_string_equal(gs_strerror((gs_status_t)-999), "unknown status");
    assert_string_equal(gs_strerror((gs_status_t)7), "unknown status");
    assert_string_equal(gs_status_name((gs_status_t)-5), "GS_UNKNOWN_STATUS");
    assert_int_equal(gs_status_scope((gs_status_t)-999), GS_SCOPE_INTERNAL);
}

static void test_status_scopes(void **state)
{
    size_t i;
    int v;

    (void)state;
    for (i = 0; i < NUM_ROWS; i++) {
        assert_int_equal(gs_status_scope((gs_status_t)rows[i].value),
                         expected_scope(rows[i].value));
    }
    assert_int_equal(gs_status_scope(GS_OK), GS_SCOPE_NONE);
    assert_int_equal(gs_status_scope(GS_INPROGRESS), GS_SCOPE_NONE);
    assert_int_equal(gs_status_scope(GS_ERR_INVALID_ARG), GS_SCOPE_ARGUMENT);
    assert_int_equal(gs_status_scope(GS_ERR_TRUNCATED), GS_SCOPE_ARGUMENT);
    assert_int_equal(gs_status_scope(GS_ERR_NO_MEMORY), GS_SCOPE_RESOURCE);
    assert_int_equal(gs_status_scope(GS_ERR_CUDA), GS_SCOPE_RESOURCE);
    assert_int_equal(gs_status_scope(GS_ERR_PEER_FAILED), GS_SCOPE_PEER);
    assert_int_equal(gs_status_scope(GS_ERR_MISMATCH), GS_SCOPE_PEER);
    assert_int_equal(gs_status_scope(GS_ERR_ABORTED), GS_SCOPE_COMM);
    assert_int_equal(gs_status_scope(GS_ERR_COMM_FAILED), GS_SCOPE_COMM);
    assert_int_equal(gs_status_scope(GS_ERR_REVOKED), GS_SCOPE_COMM);
    assert_string_equal(gs_status_name(GS_ERR_REVOKED), "GS_ERR_REVOKED");
    assert_int_equal(gs_status_scope(GS_ERR_INTERNAL), GS_SCOPE_INTERNAL);
    /* Every value of every band, including the unused ones. */
    for (v = -120; v <= 5; v++) {
        assert_int_equal(gs_status_scope((gs_status_t)v), expected_scope(v));
    }
}

static void test_status_version_consistent(void **state)
{
    char expect[32];

    (void)state;
    assert_int_equal(GS_VERSION_NUMBER,
                     GS_VERSION_MAJOR * 10000 + GS_VERSION_MINOR * 100 + GS_VERSION_PATCH);
    assert_int_equal(gs_version(), (unsigned)GS_VERSION_NUMBER);
    (void)snprintf(expect, sizeof(expect), "%d.%d.%d", GS_VERSION_MAJOR, GS_VERSION_MINOR,
                   GS_VERSION_PATCH);
    assert_string_equal(gs_version_string(), expect);
    assert_string_equal(GS_VERSION_STRING, expect);
}

static void test_status_config_init_sets_unset(void **state)
{
    gs_config_t cfg;

    (void)state;
    memset(&cfg, 0xab, sizeof(cfg));
    assert_int_equal(gs_config_init(&cfg), GS_OK);
    assert_int_equal(cfg.size, sizeof(gs_config_t));
    assert_int_equal(cfg.version, GS_VERSION_NUMBER);
    assert_int_equal(cfg.rank, GS_UNSET);
    assert_int_equal(cfg.world_size, GS_UNSET);
    assert_int_equal(cfg.local_rank, GS_UNSET);
    assert_null(cfg.master_addr);
    assert_int_equal(cfg.master_port, GS_UNSET);
    assert_int_equal(cfg.timeout_ms, GS_UNSET);
    assert_null(cfg.transport);
    assert_int_equal(cfg.tcp_nsocks, GS_UNSET);
    assert_null(cfg.socket_ifname);
    assert_null(cfg.socket_family);
    assert_int_equal(cfg.slice_bytes, GS_UNSET);
    assert_null(cfg.algo);
    assert_null(cfg.job_id);
}

static void test_status_config_init_null_sets_last_error(void **state)
{
    (void)state;
    gs__error_clear();
    assert_string_equal(gs_last_error(), "");
    assert_int_equal(gs_config_init(NULL), GS_ERR_INVALID_ARG);
    assert_true(strlen(gs_last_error()) > 0);
    assert_non_null(strstr(gs_last_error(), "cfg is NULL"));
}

static void test_status_config_init_version_mismatch(void **state)
{
    gs_config_t cfg;
    gs_config_t copy;

    (void)state;
    memset(&cfg, 0x5a, sizeof(cfg));
    copy = cfg;
    assert_int_equal(gs_config_init_v(&cfg, (GS_VERSION_MAJOR + 1) * 10000u, sizeof(cfg)),
                     GS_ERR_VERSION_MISMATCH);
    assert_memory_equal(&cfg, &copy, sizeof(cfg)); /* untouched on error */
    assert_non_null(strstr(gs_last_error(), "major"));
    /* Another minor or patch of the same major is fine. */
    assert_int_equal(gs_config_init_v(&cfg, GS_VERSION_MAJOR * 10000u + 9999u, sizeof(cfg)), GS_OK);
    assert_int_equal(cfg.version, GS_VERSION_MAJOR * 10000u + 9999u);
}

static void test_status_config_init_short_struct(void **state)
{
    gs_config_t cfg;
    const size_t short_size = offsetof(gs_config_t, master_port);

    (void)state;
    memset(&cfg, 0x5a, sizeof(cfg));
    assert_int_equal(gs_config_init_v(&cfg, GS_VERSION_NUMBER, short_size), GS_OK);
    assert_int_equal(cfg.size, short_size);
    assert_int_equal(cfg.rank, GS_UNSET);
    assert_int_equal(cfg.local_rank, GS_UNSET);
    assert_null(cfg.master_addr);
    /* Fields past the caller's size are not the caller's memory: untouched. */
    assert_int_equal(cfg.master_port, 0x5a5a5a5a);
    assert_int_equal(cfg.tcp_nsocks, 0x5a5a5a5a);

    /* Too small to hold even size and version. */
    assert_int_equal(gs_config_init_v(&cfg, GS_VERSION_NUMBER, sizeof(size_t)), GS_ERR_INVALID_ARG);
}

static void test_status_config_init_larger_struct(void **state)
{
    union {
        gs_config_t cfg;
        unsigned char bytes[sizeof(gs_config_t) + 16];
    } big;
    size_t i;

    (void)state;
    memset(&big, 0x77, sizeof(big));
    assert_int_equal(gs_config_init_v(&big.cfg, GS_VERSION_NUMBER, sizeof(big)), GS_OK);
    assert_int_equal(big.cfg.size, sizeof(big));
    assert_int_equal(big.cfg.slice_bytes, GS_UNSET);
    assert_null(big.cfg.job_id);
    for (i = sizeof(gs_config_t); i < sizeof(big); i++) {
        assert_int_equal(big.bytes[i], 0x77); /* a newer header's fields: not ours */
    }
}

static void test_status_error_set_returns_status(void **state)
{
    (void)state;
    assert_int_equal(gs__error_set(GS_ERR_TIMEOUT, "rank %d timed out after %d ms", 3, 10),
                     GS_ERR_TIMEOUT);
    assert_string_equal(gs_last_error(), "rank 3 timed out after 10 ms");
    assert_string_equal(gs__error_get(), gs_last_error());
    gs__error_copy_in("carried over");
    assert_string_equal(gs_last_error(), "carried over");
    gs__error_copy_in(gs__error_get()); /* self copy is harmless */
    assert_string_equal(gs_last_error(), "carried over");
    gs__error_clear();
    assert_string_equal(gs_last_error(), "");
}

static void test_status_error_truncates_long_text(void **state)
{
    char longtext[GS_ERROR_MSG_MAX * 2];

    (void)state;
    memset(longtext, 'x', sizeof(longtext) - 1);
    longtext[sizeof(longtext) - 1] = '\0';
    (void)gs__error_set(GS_ERR_INVALID_ARG, "%s", longtext);
    assert_int_equal(strlen(gs_last_error()), GS_ERROR_MSG_MAX - 1);
}

static void *other_thread(void *arg)
{
    const char **seen = arg;

    seen[0] = (strcmp(gs_last_error(), "") == 0) ? "empty" : "not empty";
    (void)gs__error_set(GS_ERR_PEER_FAILED, "peer 1 failed in thread");
    return NULL;
}

static void test_status_error_is_thread_local(void **state)
{
    const char *seen[1] = {NULL};
    pthread_t t;

    (void)state;
    (void)gs__error_set(GS_ERR_INVALID_ARG, "main thread error");
    assert_int_equal(pthread_create(&t, NULL, other_thread, seen), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_string_equal(seen[0], "empty");
    assert_string_equal(gs_last_error(), "main thread error");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_every_code_has_name_and_message),
        cmocka_unit_test(test_status_unknown_code),
        cmocka_unit_test(test_status_scopes),
        cmocka_unit_test(test_status_version_consistent),
        cmocka_unit_test(test_status_config_init_sets_unset),
        cmocka_unit_test(test_status_config_init_null_sets_last_error),
        cmocka_unit_test(test_status_config_init_version_mismatch),
        cmocka_unit_test(test_status_config_init_short_struct),
        cmocka_unit_test(test_status_config_init_larger_struct),
        cmocka_unit_test(test_status_error_set_returns_status),
        cmocka_unit_test(test_status_error_truncates_long_text),
        cmocka_unit_test(test_status_error_is_thread_local),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
