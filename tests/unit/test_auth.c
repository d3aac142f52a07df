/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of connection authentication's pieces (core/auth.c): the token
 * from the variable or a file, and the MACs: both sides agree with the same
 * token, and a different token, nonce, direction or domain never matches.
 * Without OpenSSL a token must be refused (GS_ERR_UNSUPPORTED).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/auth.h"

static const uint8_t nc[GS_AUTH_NONCE_BYTES] = {1, 2,  3,  4,  5,  6,  7,  8,
                                                9, 10, 11, 12, 13, 14, 15, 16};
static const uint8_t na[GS_AUTH_NONCE_BYTES] = {16, 15, 14, 13, 12, 11, 10, 9,
                                                8,  7,  6,  5,  4,  3,  2,  1};

#ifdef GS_WITH_OPENSSL
static void test_off_without_token(void **state)
{
    gs__auth_t a;
    uint8_t mac[GS_AUTH_MAC_BYTES] = {0};

    (void)state;
    assert_int_equal(gs__auth_init(&a, NULL, NULL), GS_OK);
    assert_int_equal(a.on, 0);
    assert_int_equal(gs__auth_init(&a, "", ""), GS_OK);
    assert_int_equal(a.on, 0);
    /* Authentication off never accepts a MAC, even an all-zero one. */
    assert_int_equal(gs__auth_check(&a, GS_AUTH_ACCEPTOR, "tcp", nc, na, mac), 0);
}

static void test_same_token_agrees(void **state)
{
    gs__auth_t a;
    gs__auth_t b;
    uint8_t mac[GS_AUTH_MAC_BYTES];

    (void)state;
    assert_int_equal(gs__auth_init(&a, "s3cret", NULL), GS_OK);
    assert_int_equal(gs__auth_init(&b, "s3cret", NULL), GS_OK);
    assert_int_equal(a.on, 1);
    gs__auth_mac(&a, GS_AUTH_ACCEPTOR, "tcp", nc, na, mac);
    assert_int_equal(gs__auth_check(&b, GS_AUTH_ACCEPTOR, "tcp", nc, na, mac), 1);
    gs__auth_mac(&b, GS_AUTH_CONNECTOR, "tcp", nc, na, mac);
    assert_int_equal(gs__auth_check(&a, GS_AUTH_CONNECTOR, "tcp", nc, na, mac), 1);
}

static void test_anything_else_differs(void **state)
{
    gs__auth_t a;
    gs__auth_t wrong;
    uint8_t mac[GS_AUTH_MAC_BYTES];
    uint8_t other[GS_AUTH_NONCE_BYTES];

    (void)state;
    assert_int_equal(gs__auth_init(&a, "s3cret", NULL), GS_OK);
    assert_int_equal(gs__auth_init(&wrong, "s3cre7", NULL), GS_OK);
    gs__auth_mac(&a, GS_AUTH_ACCEPTOR, "tcp", nc, na, mac);
    /* Another token. */
    assert_int_equal(gs__auth_check(&wrong, GS_AUTH_ACCEPTOR, "tcp", nc, na, mac), 0);
    /* The other direction: the acceptor's MAC is no proof of the connector. */
    assert_int_equal(gs__auth_check(&a, GS_AUTH_CONNECTOR, "tcp", nc, na, mac), 0);
    /* Another protocol's MAC. */
    assert_int_equal(gs__auth_check(&a, GS_AUTH_ACCEPTOR, "rendezvous", nc, na, mac), 0);
    /* A fresh nonce on either side (a replay). */
    memcpy(other, na, sizeof(other));
    other[0] ^= 1;
    assert_int_equal(gs__auth_check(&a, GS_AUTH_ACCEPTOR, "tcp", nc, other, mac), 0);
    assert_int_equal(gs__auth_check(&a, GS_AUTH_ACCEPTOR, "tcp", other, na, mac), 0);
    /* A flipped bit of the MAC. */
    mac[31] ^= 0x80;
    assert_int_equal(gs__auth_check(&a, GS_AUTH_ACCEPTOR, "tcp", nc, na, mac), 0);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");

    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_token_file(void **state)
{
    char path[] = "/tmp/gs_test_auth_XXXXXX";
    int fd = mkstemp(path);
    gs__auth_t from_file;
    gs__auth_t from_var;
    uint8_t mac[GS_AUTH_MAC_BYTES];

    (void)state;
    assert_true(fd >= 0);
    close(fd);
    /* One trailing newline is not part of the token. */
    write_file(path, "s3cret\n");
    assert_int_equal(gs__auth_init(&from_file, NULL, path), GS_OK);
    assert_int_equal(gs__auth_init(&from_var, "s3cret", NULL), GS_OK);
    gs__auth_mac(&from_file, GS_AUTH_CONNECTOR, "tcp", nc, na, mac);
    assert_int_equal(gs__auth_check(&from_var, GS_AUTH_CONNECTOR, "tcp", nc, na, mac), 1);
    /* The variable wins over the file. */
    assert_int_equal(gs__auth_init(&from_file, "other", path), GS_OK);
    assert_int_equal(gs__auth_check(&from_file, GS_AUTH_CONNECTOR, "tcp", nc, na, mac), 0);
    /* An empty file, a missing one. */
    write_file(path, "\n");
    assert_int_equal(gs__auth_init(&from_file, NULL, path), GS_ERR_INVALID_ARG);
    unlink(path);
    assert_int_equal(gs__auth_init(&from_file, NULL, path), GS_ERR_INVALID_ARG);
    assert_int_equal(from_file.on, 0);
}

static void test_token_too_long(void **state)
{
    char *big = malloc(GS_AUTH_TOKEN_MAX + 2);
    gs__auth_t a;

    (void)state;
    assert_non_null(big);
    memset(big, 'x', GS_AUTH_TOKEN_MAX + 1);
    big[GS_AUTH_TOKEN_MAX + 1] = '\0';
    assert_int_equal(gs__auth_init(&a, big, NULL), GS_ERR_INVALID_ARG);
    big[GS_AUTH_TOKEN_MAX] = '\0';
    assert_int_equal(gs__auth_init(&a, big, NULL), GS_OK);
    free(big);
}

static void test_nonces_are_fresh(void **state)
{
    uint8_t a[GS_AUTH_NONCE_BYTES];
    uint8_t b[GS_AUTH_NONCE_BYTES];

    (void)state;
    assert_int_equal(gs__auth_nonce(a), GS_OK);
    assert_int_equal(gs__auth_nonce(b), GS_OK);
    assert_memory_not_equal(a, b, sizeof(a));
}
#else
static void test_token_refused_without_openssl(void **state)
{
    gs__auth_t a;

    (void)state;
    assert_int_equal(gs__auth_init(&a, "s3cret", NULL), GS_ERR_UNSUPPORTED);
    assert_int_equal(a.on, 0);
    assert_int_equal(gs__auth_init(&a, NULL, NULL), GS_OK);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
#ifdef GS_WITH_OPENSSL
        cmocka_unit_test(test_off_without_token),     cmocka_unit_test(test_same_token_agrees),
        cmocka_unit_test(test_anything_else_differs), cmocka_unit_test(test_token_file),
        cmocka_unit_test(test_token_too_long),        cmocka_unit_test(test_nonces_are_fresh),
#else
        cmocka_unit_test(test_token_refused_without_openssl),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
