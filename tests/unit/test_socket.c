/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the socket helpers: parse/format of IPv4 and IPv6 address
 * text, bad strings, choosing the local address, listening on loopback
 * (v4 and, when the host has it, v6), connect/accept, exact reads and
 * writes, the read deadline and EOF. Loopback only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/socket.h"

#define WAIT_MS 5000

static void roundtrip(const char *text, const char *family, const char *expect)
{
    gs__sockaddr_t addr;
    char out[GS_SOCK_ADDR_MAX];

    assert_int_equal(gs__sock_parse(text, family, &addr), GS_OK);
    assert_int_equal(gs__sock_format(&addr, out, sizeof(out)), GS_OK);
    assert_string_equal(out, expect);
}

static void test_socket_parse_format_v4(void **state)
{
    gs__sockaddr_t addr;

    (void)state;
    roundtrip("127.0.0.1:80", "any", "127.0.0.1:80");
    roundtrip("10.1.2.3:0", "ipv4", "10.1.2.3:0");
    roundtrip("255.255.255.255:65535", NULL, "255.255.255.255:65535");
    assert_int_equal(gs__sock_parse("127.0.0.1:80", "any", &addr), GS_OK);
    assert_int_equal(addr.ss.ss_family, AF_INET);
    assert_int_equal(addr.len, sizeof(struct sockaddr_in));
}

static void test_socket_parse_format_v6(void **state)
{
    gs__sockaddr_t addr;

    (void)state;
    roundtrip("[::1]:5000", "any", "[::1]:5000");
    roundtrip("[::1]:5000", "ipv6", "[::1]:5000");
    roundtrip("[fe80::1:2]:7", "any", "[fe80::1:2]:7");
    assert_int_equal(gs__sock_parse("[::1]:1", "any", &addr), GS_OK);
    assert_int_equal(addr.ss.ss_family, AF_INET6);
    assert_int_equal(gs__sock_resolve("[::1]", 9, "ipv6", &addr), GS_OK);
    assert_int_equal(gs__sock_resolve("::1", 9, "any", &addr), GS_OK);
}

static void test_socket_parse_rejects_bad_text(void **state)
{
    static const char *const bad[] = {
        "",
        "127.0.0.1",
        "127.0.0.1:",
        ":80",
        "127.0.0.1:65536",
        "1.2.3.4:-1",
        "1.2.3.4:80x",
        "1.2.3.4: 80",
        "::1:80",
        "[::1]80",
        "[::1",
        "[]:80",
        "1.2.3.4:99999999999999999999",
        "[::1]:",
    };
    gs__sockaddr_t addr;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (gs__sock_parse(bad[i], "any", &addr) != GS_ERR_INVALID_ARG) {
            fail_msg("\"%s\" was accepted", bad[i]);
        }
    }
    assert_int_equal(gs__sock_parse(NULL, "any", &addr), GS_ERR_INVALID_ARG);
    /* The family must fit the address. */
    assert_int_equal(gs__sock_parse("127.0.0.1:80", "ipv6", &addr), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__sock_parse("[::1]:80", "ipv4", &addr), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__sock_parse("127.0.0.1:80", "ipx", &addr), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__sock_resolve("127.0.0.1", 70000, "any", &addr), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__sock_resolve("", 1, "any", &addr), GS_ERR_INVALID_ARG);
}

static void test_socket_format_small_buffer(void **state)
{
    gs__sockaddr_t addr;
    char out[8];

    (void)state;
    assert_int_equal(gs__sock_parse("127.0.0.1:8080", "any", &addr), GS_OK);
    assert_int_equal(gs__sock_format(&addr, out, sizeof(out)), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs__error_get(), "127.0.0.1"));
}

static void test_socket_pick_local(void **state)
{
    gs__sockaddr_t route;
    gs__sockaddr_t local;
    char out[GS_SOCK_ADDR_MAX];

    (void)state;
    assert_int_equal(gs__sock_parse("127.0.0.1:29500", "any", &route), GS_OK);
    assert_int_equal(gs__sock_pick_local(NULL, "any", &route, &local), GS_OK);
    assert_int_equal(gs__sock_format(&local, out, sizeof(out)), GS_OK);
    assert_string_equal(out, "127.0.0.1:0");
    assert_int_equal(gs__sock_pick_local("lo", "ipv4", NULL, &local), GS_OK);
    assert_int_equal(gs__sock_format(&local, out, sizeof(out)), GS_OK);
    assert_string_equal(out, "127.0.0.1:0");
    assert_int_equal(gs__sock_pick_local("no-such-if0", "any", NULL, &local), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs__error_get(), "no-such-if0"));
    /* No hint at all still yields an address. */
    assert_int_equal(gs__sock_pick_local(NULL, "ipv4", NULL, &local), GS_OK);
    assert_int_equal(local.ss.ss_family, AF_INET);
}

/* Listen on text, connect, accept, move bytes both ways. */
static void loopback_pair(const char *text, int *cfd, int *afd)
{
    gs__sockaddr_t addr;
    gs__sockaddr_t bound;
    char out[GS_SOCK_ADDR_MAX];
    int lfd = -1;

    assert_int_equal(gs__sock_parse(text, "any", &addr), GS_OK);
    assert_int_equal(gs__sock_listen(&addr, 16, &lfd, &bound), GS_OK);
    assert_int_equal(gs__sock_format(&bound, out, sizeof(out)), GS_OK);
    assert_null(strstr(out, ":0")); /* a real port was chosen */
    /* Nothing pending yet: accept returns -1 at the deadline. */
    assert_int_equal(gs__sock_accept(lfd, gs__now_ns(), afd), GS_OK);
    assert_int_equal(*afd, -1);
    assert_int_equal(gs__sock_connect(&bound, gs__deadline_after_ms(WAIT_MS), cfd), GS_OK);
    assert_int_equal(gs__sock_accept(lfd, gs__deadline_after_ms(WAIT_MS), afd), GS_OK);
    assert_true(*afd >= 0);
    close(lfd);
}

static void exchange(int a, int b)
{
    static uint8_t big[4096];
    static uint8_t got[4096];

    for (size_t i = 0; i < sizeof(big); i++) {
        big[i] = (uint8_t)(i * 7u + (i >> 11));
    }
    assert_int_equal(gs__sock_write_full(a, big, 1000, gs__deadline_after_ms(WAIT_MS)), GS_OK);
    assert_int_equal(gs__sock_read_full(b, got, 1000, gs__deadline_after_ms(WAIT_MS)), GS_OK);
    assert_memory_equal(big, got, 1000);
    assert_int_equal(gs__sock_write_full(b, big + 5, 77, gs__deadline_after_ms(WAIT_MS)), GS_OK);
    assert_int_equal(gs__sock_read_full(a, got, 77, gs__deadline_after_ms(WAIT_MS)), GS_OK);
    assert_memory_equal(big + 5, got, 77);
}

static void test_socket_loopback_v4(void **state)
{
    int cfd = -1;
    int afd = -1;

    (void)state;
    loopback_pair("127.0.0.1:0", &cfd, &afd);
    exchange(cfd, afd);
    close(cfd);
    close(afd);
}

static void test_socket_loopback_v6(void **state)
{
    gs__sockaddr_t addr;
    int probe;
    int cfd = -1;
    int afd = -1;

    (void)state;
    probe = socket(AF_INET6, SOCK_STREAM, 0);
    if (probe >= 0) {
        struct sockaddr_in6 sin6;

        memset(&sin6, 0, sizeof(sin6));
        sin6.sin6_family = AF_INET6;
        sin6.sin6_addr = in6addr_loopback;
        if (bind(probe, (struct sockaddr *)&sin6, sizeof(sin6)) != 0) {
            close(probe);
            probe = -1;
        } else {
            close(probe);
        }
    }
    if ((probe < 0) || (gs__sock_parse("[::1]:0", "ipv6", &addr) != GS_OK)) {
        print_message("IPv6 loopback unavailable on this host; skipping\n");
        skip();
    }
    loopback_pair("[::1]:0", &cfd, &afd);
    exchange(cfd, afd);
    close(cfd);
    close(afd);
}

static void test_socket_read_deadline_times_out(void **state)
{
    uint8_t buf[16];
    int cfd = -1;
    int afd = -1;
    uint64_t t0;

    (void)state;
    loopback_pair("127.0.0.1:0", &cfd, &afd);
    assert_int_equal(gs__sock_write_full(cfd, "abc", 3, gs__deadline_after_ms(WAIT_MS)), GS_OK);
    t0 = gs__now_ns();
    assert_int_equal(gs__sock_read_full(afd, buf, sizeof(buf), gs__deadline_after_ms(50)),
                     GS_ERR_TIMEOUT);
    assert_true(gs__now_ns() - t0 >= 40u * 1000000u);
    assert_non_null(strstr(gs__error_get(), "3 of 16 bytes"));
    close(cfd);
    close(afd);
}

static void test_socket_eof_is_peer_failed(void **state)
{
    uint8_t buf[16];
    int cfd = -1;
    int afd = -1;

    (void)state;
    loopback_pair("127.0.0.1:0", &cfd, &afd);
    assert_int_equal(gs__sock_write_full(cfd, "abcd", 4, gs__deadline_after_ms(WAIT_MS)), GS_OK);
    close(cfd);
    assert_int_equal(gs__sock_read_full(afd, buf, sizeof(buf), gs__deadline_after_ms(WAIT_MS)),
                     GS_ERR_PEER_FAILED);
    assert_non_null(strstr(gs__error_get(), "closed the connection after 4 of 16 bytes"));
    /* Writing to a closed peer ends in PEER_FAILED too (EPIPE/ECONNRESET), never SIGPIPE. */
    {
        gs_status_t status = GS_OK;

        for (int i = 0; (i < 100) && (status == GS_OK); i++) {
            status = gs__sock_write_full(afd, buf, sizeof(buf), gs__deadline_after_ms(WAIT_MS));
        }
        assert_int_equal(status, GS_ERR_PEER_FAILED);
    }
    close(afd);
}

static void test_socket_connect_refused_times_out(void **state)
{
    gs__sockaddr_t addr;
    gs__sockaddr_t bound;
    int lfd = -1;
    int fd = -1;

    (void)state;
    /* Find a free port, then close it so nobody listens there. */
    assert_int_equal(gs__sock_parse("127.0.0.1:0", "any", &addr), GS_OK);
    assert_int_equal(gs__sock_listen(&addr, 1, &lfd, &bound), GS_OK);
    close(lfd);
    assert_int_equal(gs__sock_connect(&bound, gs__deadline_after_ms(60), &fd), GS_ERR_TIMEOUT);
    assert_non_null(strstr(gs__error_get(), "127.0.0.1:"));
}

static void test_socket_tune(void **state)
{
    int sv[2];

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_int_equal(gs__sock_tune(sv[0]), GS_OK); /* NODELAY is skipped for non-TCP */
    assert_int_equal(gs__sock_tune(-1), GS_ERR_SYSTEM);
    close(sv[0]);
    close(sv[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_socket_parse_format_v4),
        cmocka_unit_test(test_socket_parse_format_v6),
        cmocka_unit_test(test_socket_parse_rejects_bad_text),
        cmocka_unit_test(test_socket_format_small_buffer),
        cmocka_unit_test(test_socket_pick_local),
        cmocka_unit_test(test_socket_loopback_v4),
        cmocka_unit_test(test_socket_loopback_v6),
        cmocka_unit_test(test_socket_read_deadline_times_out),
        cmocka_unit_test(test_socket_eof_is_peer_failed),
        cmocka_unit_test(test_socket_connect_refused_times_out),
        cmocka_unit_test(test_socket_tune),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
