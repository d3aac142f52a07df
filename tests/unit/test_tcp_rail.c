/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the TCP rails (tcp_rail.h): the address text's format and
 * strict parse (round trips, every refusal), the subnet pairing, and the
 * GS_SOCKET_IFNAME selection (core/socket.c's gs__sock_pick_ifaces) against
 * the interfaces of this machine, of which only lo is known to exist. Nothing
 * is created in the network; several interfaces are the lab's (tests/net).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "core/error.h"
#include "core/socket.h"
#include "transport/tcp/tcp_rail.h"

/* A rail of address text "ip" (v4 or bare v6), prefix @p prefix, port 0. */
static gs__tcp_rail_t rail(const char *ip, int prefix)
{
    gs__tcp_rail_t r;

    memset(&r, 0, sizeof(r));
    if (strchr(ip, ':') != NULL) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&r.addr.ss;

        s6->sin6_family = AF_INET6;
        assert_int_equal(inet_pton(AF_INET6, ip, &s6->sin6_addr), 1);
        r.addr.len = sizeof(*s6);
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&r.addr.ss;

        s4->sin_family = AF_INET;
        assert_int_equal(inet_pton(AF_INET, ip, &s4->sin_addr), 1);
        r.addr.len = sizeof(*s4);
    }
    r.prefix = prefix;
    return r;
}

static int port_of(const gs__tcp_rail_t *r)
{
    if (r->addr.ss.ss_family == AF_INET6) {
        return ntohs(((const struct sockaddr_in6 *)&r->addr.ss)->sin6_port);
    }
    return ntohs(((const struct sockaddr_in *)&r->addr.ss)->sin_port);
}

static void test_tcp_rail_format_one_rail(void **state)
{
    gs__tcp_rail_t r[2] = {rail("10.0.0.1", 24), rail("fd00::2", 64)};
    gs__tcp_rail_t back[GS_TCP_MAX_RAILS];
    char text[256];
    char why[160];
    int n = 0;

    (void)state;
    /* One rail: exactly gs__sock_format's text, no prefix. */
    assert_int_equal(gs__tcp_rails_format(r, 1, 29500, text, sizeof(text)), GS_OK);
    assert_string_equal(text, "10.0.0.1:29500");
    assert_int_equal(gs__tcp_rails_parse(text, back, &n, why, sizeof(why)), GS_OK);
    assert_int_equal(n, 1);
    assert_int_equal(back[0].prefix, -1);
    assert_int_equal(port_of(&back[0]), 29500);
    assert_true(gs__sock_same_ip(&back[0].addr, &r[0].addr));
    assert_string_equal(back[0].ifname, "");

    assert_int_equal(gs__tcp_rails_format(&r[1], 1, 1, text, sizeof(text)), GS_OK);
    assert_string_equal(text, "[fd00::2]:1");
    assert_int_equal(gs__tcp_rails_parse(text, back, &n, why, sizeof(why)), GS_OK);
    assert_int_equal(n, 1);
    assert_int_equal(back[0].addr.ss.ss_family, AF_INET6);
    assert_int_equal(port_of(&back[0]), 1);
    assert_true(gs__sock_same_ip(&back[0].addr, &r[1].addr));

    /* The one-rail text parses the same through gs__sock_parse (the old form). */
    {
        gs__sockaddr_t old;
        char again[GS_SOCK_ADDR_MAX];

        assert_int_equal(gs__sock_parse("10.0.0.1:29500", "any", &old), GS_OK);
        assert_int_equal(gs__sock_format(&old, again, sizeof(again)), GS_OK);
        assert_int_equal(gs__tcp_rails_format(r, 1, 29500, text, sizeof(text)), GS_OK);
        assert_string_equal(text, again);
    }
}

static void test_tcp_rail_format_parse_round_trip(void **state)
{
    gs__tcp_rail_t r[GS_TCP_MAX_RAILS] = {rail("10.0.0.1", 24), rail("10.1.0.1", 16),
                                          rail("fd00::2", 64), rail("192.168.7.9", 32)};
    gs__tcp_rail_t back[GS_TCP_MAX_RAILS];
    char text[512];
    char why[160];
    int n = 0;

    (void)state;
    assert_int_equal(gs__tcp_rails_format(r, 2, 40000, text, sizeof(text)), GS_OK);
    assert_string_equal(text, "10.0.0.1:40000/24,10.1.0.1:40000/16");
    assert_int_equal(gs__tcp_rails_format(r, 3, 40000, text, sizeof(text)), GS_OK);
    assert_string_equal(text, "10.0.0.1:40000/24,10.1.0.1:40000/16,[fd00::2]:40000/64");
    for (int k = 2; k <= GS_TCP_MAX_RAILS; k++) {
        assert_int_equal(gs__tcp_rails_format(r, k, 40000, text, sizeof(text)), GS_OK);
        memset(back, 0x5a, sizeof(back));
        assert_int_equal(gs__tcp_rails_parse(text, back, &n, why, sizeof(why)), GS_OK);
        assert_int_equal(n, k);
        for (int i = 0; i < k; i++) {
            assert_true(gs__sock_same_ip(&back[i].addr, &r[i].addr));
            assert_int_equal(back[i].prefix, r[i].prefix);
            assert_int_equal(port_of(&back[i]), 40000);
            assert_string_equal(back[i].ifname, "");
        }
    }
    /* Bounds of the format: n 1..4, the buffer. */
    assert_int_equal(gs__tcp_rails_format(r, 0, 1, text, sizeof(text)), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__tcp_rails_format(r, GS_TCP_MAX_RAILS + 1, 1, text, sizeof(text)),
                     GS_ERR_INVALID_ARG);
    assert_int_equal(gs__tcp_rails_format(r, 2, 40000, text, 20), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__tcp_rails_format(r, 1, 40000, text, 8), GS_ERR_INVALID_ARG);
    /* A list needs every prefix. */
    r[1].prefix = -1;
    assert_int_equal(gs__tcp_rails_format(r, 2, 1, text, sizeof(text)), GS_ERR_INVALID_ARG);
    r[1].prefix = 33;
    assert_int_equal(gs__tcp_rails_format(r, 2, 1, text, sizeof(text)), GS_ERR_INVALID_ARG);
}

static void expect_refused(const char *text, const char *reason)
{
    gs__tcp_rail_t back[GS_TCP_MAX_RAILS];
    char why[256] = "";
    int n = 7;

    if (gs__tcp_rails_parse(text, back, &n, why, sizeof(why)) != GS_ERR_INVALID_ARG) {
        fail_msg("\"%s\" was not refused", text);
    }
    assert_int_equal(n, 0);
    if (strstr(why, reason) == NULL) {
        fail_msg("\"%s\": why \"%s\" lacks \"%s\"", text, why, reason);
    }
}

static void test_tcp_rail_parse_refusals(void **state)
{
    gs__tcp_rail_t back[GS_TCP_MAX_RAILS];
    char why[160];
    int n = 0;

    (void)state;
    expect_refused("", "empty entry");
    expect_refused("garbage", "is not");
    expect_refused("10.0.0.1", "is not");
    expect_refused("10.0.0.1:", "no port");
    expect_refused("10.0.0.1:x", "no port");
    expect_refused("10.0.0.1:65536", "no port");
    expect_refused("10.0.0.1:123456", "no port");
    expect_refused("10.0.0.1:-1", "no port");
    expect_refused("[fd00::1]", "is not");
    expect_refused("[fd00::1]:", "no port");
    expect_refused("fd00::1:80", "is not");
    expect_refused("10.0.0.1:80/33", "prefix");
    expect_refused("10.0.0.1:80/", "prefix");
    expect_refused("10.0.0.1:80/-1", "prefix");
    expect_refused("10.0.0.1:80/2a", "prefix");
    expect_refused("[fd00::1]:80/129", "prefix");
    expect_refused("10.0.0.1:80/24,10.0.0.2:80/24,10.0.0.3:80/24,10.0.0.4:80/24,"
                   "10.0.0.5:80/24",
                   "more than 4");
    expect_refused("10.0.0.1:80/24,10.0.0.1:81/24", "twice");
    expect_refused("[fd00::1]:80/64,[fd00:0::1]:80/64", "twice");
    expect_refused("10.0.0.1:80/24,10.0.0.2:80", "no /prefix");
    expect_refused("10.0.0.1:80,10.0.0.2:80/24", "no /prefix");
    expect_refused("10.0.0.1:80/24,", "empty entry");
    expect_refused(",10.0.0.1:80/24", "empty entry");
    expect_refused("localhost:80", "numeric");
    expect_refused("example.com:80", "numeric");
    expect_refused("[localhost]:80", "numeric");
    expect_refused(" 10.0.0.1:80", "numeric");
    expect_refused("10.0.0.1:80 ", "no port");
    expect_refused("10.0.0.1.5:80", "numeric");
    expect_refused("[fd00::1%no-such-if9]:80", "scope");
    /* Accepted edge cases: the bounds themselves, and one entry with a prefix. */
    assert_int_equal(
        gs__tcp_rails_parse("10.0.0.1:0/0,10.0.0.2:65535/32", back, &n, why, sizeof(why)), GS_OK);
    assert_int_equal(n, 2);
    assert_int_equal(back[0].prefix, 0);
    assert_int_equal(back[1].prefix, 32);
    assert_int_equal(port_of(&back[1]), 65535);
    assert_int_equal(gs__tcp_rails_parse("[::1]:5/128", back, &n, why, sizeof(why)), GS_OK);
    assert_int_equal(n, 1);
    assert_int_equal(back[0].prefix, 128);
    assert_int_equal(gs__tcp_rails_parse("[fe80::1%lo]:5", back, &n, why, sizeof(why)), GS_OK);
    assert_int_equal(n, 1);
    assert_int_not_equal(((struct sockaddr_in6 *)&back[0].addr.ss)->sin6_scope_id, 0);
    assert_int_equal(gs__tcp_rails_parse(NULL, back, &n, why, sizeof(why)), GS_ERR_INVALID_ARG);
}

static void test_tcp_rail_pairing(void **state)
{
    int plo[GS_TCP_MAX_RAILS];
    int phi[GS_TCP_MAX_RAILS];
    int np = -1;

    (void)state;
    /* 2 x 2 in the same subnets, in swapped order: each lo rail finds its subnet. */
    {
        const gs__tcp_rail_t lo[2] = {rail("10.1.0.1", 24), rail("10.2.0.1", 24)};
        const gs__tcp_rail_t hi[2] = {rail("10.2.0.7", 24), rail("10.1.0.7", 24)};

        assert_true(gs__tcp_rails_pair(lo, 2, hi, 2, plo, phi, &np));
        assert_int_equal(np, 2);
        assert_int_equal(plo[0], 0);
        assert_int_equal(phi[0], 1);
        assert_int_equal(plo[1], 1);
        assert_int_equal(phi[1], 0);
        /* The other rank, same arguments in the same roles: the same pairs. */
        int plo2[GS_TCP_MAX_RAILS];
        int phi2[GS_TCP_MAX_RAILS];
        int np2 = 0;

        assert_true(gs__tcp_rails_pair(lo, 2, hi, 2, plo2, phi2, &np2));
        assert_int_equal(np2, np);
        assert_memory_equal(plo2, plo, sizeof(int) * 2);
        assert_memory_equal(phi2, phi, sizeof(int) * 2);
    }
    /* Partial match: 2 x 1. */
    {
        const gs__tcp_rail_t lo[2] = {rail("10.1.0.1", 24), rail("10.2.0.1", 24)};
        const gs__tcp_rail_t hi[1] = {rail("10.2.0.9", 24)};

        assert_true(gs__tcp_rails_pair(lo, 2, hi, 1, plo, phi, &np));
        assert_int_equal(np, 1);
        assert_int_equal(plo[0], 1);
        assert_int_equal(phi[0], 0);
    }
    /* Two lo rails in one subnet, one hi rail there: the hi rail is used once. */
    {
        const gs__tcp_rail_t lo[2] = {rail("10.1.0.1", 16), rail("10.1.9.1", 16)};
        const gs__tcp_rail_t hi[2] = {rail("10.1.0.2", 16), rail("10.3.0.2", 16)};

        assert_true(gs__tcp_rails_pair(lo, 2, hi, 2, plo, phi, &np));
        assert_int_equal(np, 1);
        assert_int_equal(plo[0], 0);
        assert_int_equal(phi[0], 0);
    }
    /* No match: one pair (0, 0) and false. */
    {
        const gs__tcp_rail_t lo[2] = {rail("10.1.0.1", 24), rail("10.2.0.1", 24)};
        const gs__tcp_rail_t hi[2] = {rail("10.3.0.1", 24), rail("10.4.0.1", 24)};

        plo[0] = phi[0] = 9;
        assert_false(gs__tcp_rails_pair(lo, 2, hi, 2, plo, phi, &np));
        assert_int_equal(np, 1);
        assert_int_equal(plo[0], 0);
        assert_int_equal(phi[0], 0);
    }
    /* IPv4 and IPv6 never pair (even ::ffff:10.1.0.2 against 10.1.0.1). */
    {
        const gs__tcp_rail_t lo[1] = {rail("10.1.0.1", 0)};
        const gs__tcp_rail_t hi[1] = {rail("::ffff:10.1.0.2", 0)};

        assert_false(gs__tcp_rails_pair(lo, 1, hi, 1, plo, phi, &np));
        assert_int_equal(np, 1);
        assert_int_equal(plo[0], 0);
        assert_int_equal(phi[0], 0);
    }
    /* Same addresses, different prefixes: no pair. */
    {
        const gs__tcp_rail_t lo[1] = {rail("10.1.0.1", 24)};
        const gs__tcp_rail_t hi[1] = {rail("10.1.0.2", 16)};

        assert_false(gs__tcp_rails_pair(lo, 1, hi, 1, plo, phi, &np));
        assert_int_equal(np, 1);
    }
    /* The one-rail form (prefix -1) on either side: no subnet match. */
    {
        const gs__tcp_rail_t lo[1] = {rail("10.1.0.1", -1)};
        const gs__tcp_rail_t hi[1] = {rail("10.1.0.2", -1)};

        assert_false(gs__tcp_rails_pair(lo, 1, hi, 1, plo, phi, &np));
        assert_int_equal(np, 1);
        assert_int_equal(plo[0], 0);
        assert_int_equal(phi[0], 0);
    }
    /* A prefix that is not a whole number of bytes; IPv6 subnets. */
    {
        const gs__tcp_rail_t lo[2] = {rail("10.1.0.1", 20), rail("fd00:1::1", 64)};
        const gs__tcp_rail_t hi[3] = {rail("10.1.16.1", 20), rail("fd00:1::9", 64),
                                      rail("10.1.15.1", 20)};

        assert_true(gs__tcp_rails_pair(lo, 2, hi, 3, plo, phi, &np));
        assert_int_equal(np, 2);
        assert_int_equal(plo[0], 0);
        assert_int_equal(phi[0], 2);
        assert_int_equal(plo[1], 1);
        assert_int_equal(phi[1], 1);
    }
}

static void test_tcp_rail_spec_check(void **state)
{
    static const char *const good[] = {"lo",         "^lo", "=eth0", "eth0,eth1",
                                       "^docker,lo", "eth", "^=lo"};
    static const char *const bad[] = {"",       "eth0 ",    "eth0,,eth1",
                                      ",",      "^",        "=",
                                      "^,lo",   "eth0,^lo", "averyveryverylongname0",
                                      "eth0,=", "a\tb"};
    char why[160];

    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        assert_int_equal(gs__sock_ifspec_check(good[i], why, sizeof(why)), GS_OK);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why[0] = '\0';
        assert_int_equal(gs__sock_ifspec_check(bad[i], why, sizeof(why)), GS_ERR_INVALID_ARG);
        assert_true(why[0] != '\0');
    }
    /* A malformed spec through the selection: refused, saying why and the syntax. */
    {
        gs__sock_iface_t ifs[4];
        int n = 5;

        assert_int_equal(gs__sock_pick_ifaces("lo,,eth0", "any", ifs, 4, &n, NULL),
                         GS_ERR_INVALID_ARG);
        assert_int_equal(n, 0);
        assert_non_null(strstr(gs__error_get(), "empty entry"));
        assert_non_null(strstr(gs__error_get(), "^docker,lo"));
    }
}

/* The index of interface @p name in ifs[n], or -1. */
static int find_if(const gs__sock_iface_t *ifs, int n, const char *name)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(ifs[i].ifname, name) == 0) {
            return i;
        }
    }
    return -1;
}

static void test_tcp_rail_select_here(void **state)
{
    gs__sock_iface_t ifs[16];
    gs__tcp_rail_t rails[GS_TCP_MAX_RAILS];
    gs__sockaddr_t one;
    char text[GS_SOCK_ADDR_MAX];
    int n = 0;
    int extra = -1;

    (void)state;
    /* "lo" (the prefix lo, lo itself first) and "=lo" select lo. */
    assert_int_equal(gs__sock_pick_ifaces("lo", "ipv4", ifs, 16, &n, &extra), GS_OK);
    assert_true(n >= 1);
    assert_int_equal(extra, 0);
    assert_string_equal(ifs[0].ifname, "lo");
    assert_int_equal(gs__sock_format(&ifs[0].addr, text, sizeof(text)), GS_OK);
    assert_string_equal(text, "127.0.0.1:0");
    assert_int_equal(ifs[0].prefix, 8);
    assert_int_equal(gs__sock_pick_ifaces("=lo", "ipv4", ifs, 16, &n, NULL), GS_OK);
    assert_int_equal(n, 1);
    assert_string_equal(ifs[0].ifname, "lo");
    /* An interface is selected once, whatever its entries. */
    assert_int_equal(gs__sock_pick_ifaces("lo,=lo,l", "ipv4", ifs, 16, &n, NULL), GS_OK);
    assert_int_equal(find_if(ifs, n, "lo"), 0);
    for (int i = 1; i < n; i++) {
        assert_string_not_equal(ifs[i].ifname, "lo");
    }
    /* max 0: counted, not written. */
    assert_int_equal(gs__sock_pick_ifaces("=lo", "ipv4", NULL, 0, &n, &extra), GS_OK);
    assert_int_equal(n, 0);
    assert_int_equal(extra, 1);
    /* gs__sock_pick_local takes a spec too: the first interface it selects. */
    assert_int_equal(gs__sock_pick_local("=lo", "ipv4", NULL, &one), GS_OK);
    assert_int_equal(gs__sock_format(&one, text, sizeof(text)), GS_OK);
    assert_string_equal(text, "127.0.0.1:0");

    /* "^lo" never selects lo (nor any loopback); with nothing else here it selects nothing. */
    {
        const gs_status_t st = gs__sock_pick_ifaces("^lo", "any", ifs, 16, &n, NULL);

        if (st == GS_OK) {
            assert_true(n >= 1);
            assert_int_equal(find_if(ifs, n, "lo"), -1);
        } else {
            assert_int_equal(st, GS_ERR_INVALID_ARG);
            assert_non_null(strstr(gs__error_get(), "interfaces here:"));
        }
        /* "^=lo" likewise: an exclusion list never selects loopback. */
        if (gs__sock_pick_ifaces("^=lo", "any", ifs, 16, &n, NULL) == GS_OK) {
            assert_int_equal(find_if(ifs, n, "lo"), -1);
        }
    }

    /* A name that does not exist: refused, naming it and the interfaces here. */
    assert_int_equal(gs__sock_pick_ifaces("no-such-if0", "any", ifs, 16, &n, &extra),
                     GS_ERR_INVALID_ARG);
    assert_int_equal(n, 0);
    assert_non_null(strstr(gs__error_get(), "no-such-if0"));
    assert_non_null(strstr(gs__error_get(), "interfaces here:"));
    assert_non_null(strstr(gs__error_get(), "lo"));
    assert_int_equal(gs__sock_pick_local("no-such-if0,=nope1", "any", NULL, &one),
                     GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs__error_get(), "no-such-if0*, exactly nope1"));
    assert_non_null(strstr(gs__error_get(), "interfaces here:"));

    /* The rails' wrapper: the same selection, as rails. */
    assert_int_equal(gs__tcp_rails_local("=lo", "ipv4", rails, GS_TCP_MAX_RAILS, &n, &extra),
                     GS_OK);
    assert_int_equal(n, 1);
    assert_int_equal(extra, 0);
    assert_string_equal(rails[0].ifname, "lo");
    assert_int_equal(rails[0].prefix, 8);
    assert_int_equal(gs__tcp_rails_format(rails, 1, 29500, text, sizeof(text)), GS_OK);
    assert_string_equal(text, "127.0.0.1:29500");
    assert_int_equal(gs__tcp_rails_local("", "ipv4", rails, GS_TCP_MAX_RAILS, &n, NULL),
                     GS_ERR_INVALID_ARG);
    assert_int_equal(gs__tcp_rails_local(NULL, "ipv4", rails, GS_TCP_MAX_RAILS, &n, NULL),
                     GS_ERR_INVALID_ARG);
    assert_int_equal(gs__tcp_rails_local("no-such-if0", "any", rails, 1, &n, NULL),
                     GS_ERR_INVALID_ARG);
    assert_int_equal(n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_rail_format_one_rail),
        cmocka_unit_test(test_tcp_rail_format_parse_round_trip),
        cmocka_unit_test(test_tcp_rail_parse_refusals),
        cmocka_unit_test(test_tcp_rail_pairing),
        cmocka_unit_test(test_tcp_rail_spec_check),
        cmocka_unit_test(test_tcp_rail_select_here),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
