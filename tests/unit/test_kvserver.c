/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of gradsync's own store server (core/kvserver.h) with our
 * client (core/kvstore.h) and with raw bytes: set/get/add/check and
 * compare-set, a WAIT parked until another connection sets the key, the
 * queries torch's client sends (PING, CANCEL_WAIT, GETNUMKEYS, DELETE_KEY),
 * garbage and over-long values dropped without disturbing the others, the
 * connection and byte limits, stop() with clients connected and waiting,
 * and GS_STORE's parser (gs__kv_parse_spec, gs__boot_epoch_parse).
 * Loopback only.
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

#include <poll.h>
#include <pthread.h>

#include "core/bootstrap.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/kvserver.h"
#include "core/kvstore.h"
#include "core/socket.h"

#define WAIT_MS 10000

static gs__kvs_t *start(int max_conns, size_t max_bytes)
{
    gs__kvs_opts_t o = {.max_conns = max_conns, .max_bytes = max_bytes};
    gs__kvs_t *s = NULL;

    assert_int_equal(gs__kvs_start("127.0.0.1", 0, "ipv4", &o, &s), GS_OK);
    assert_non_null(s);
    assert_true(gs__kvs_port(s) > 0);
    return s;
}

static void connect_to(const gs__kvs_t *s, gs__kv_t *kv)
{
    assert_int_equal(
        gs__kv_connect(kv, "127.0.0.1", gs__kvs_port(s), "ipv4", gs__deadline_after_ms(WAIT_MS)),
        GS_OK);
}

/* A raw connection, validated when @p validate. */
static int raw_connect(const gs__kvs_t *s, int validate)
{
    gs__sockaddr_t a;
    int fd = -1;

    assert_int_equal(gs__sock_resolve("127.0.0.1", gs__kvs_port(s), "ipv4", &a), GS_OK);
    assert_int_equal(gs__sock_connect(&a, gs__deadline_after_ms(WAIT_MS), &fd), GS_OK);
    if (validate) {
        uint8_t v[5] = {0};
        const uint32_t magic = 0x3C85F7CEu;

        memcpy(v + 1, &magic, 4);
        assert_int_equal(gs__sock_write_full(fd, v, sizeof(v), gs__deadline_after_ms(WAIT_MS)),
                         GS_OK);
    }
    return fd;
}

static void raw_send(int fd, const void *p, size_t n)
{
    assert_int_equal(gs__sock_write_full(fd, p, n, gs__deadline_after_ms(WAIT_MS)), GS_OK);
}

/* Garbage: the server may drop the connection at any byte, so a failed send is no failure. */
static void junk_send(int fd, const void *p, size_t n)
{
    (void)gs__sock_write_full(fd, p, n, gs__deadline_after_ms(WAIT_MS));
}

static void junk_put_str(int fd, const char *k)
{
    const uint64_t n = strlen(k);

    junk_send(fd, &n, sizeof(n));
    junk_send(fd, k, n);
}

static void raw_put_str(int fd, const char *k)
{
    const uint64_t n = strlen(k);

    raw_send(fd, &n, sizeof(n));
    raw_send(fd, k, n);
}

/* The server closed @p fd (EOF within the deadline). */
static void assert_dropped(int fd)
{
    uint8_t b[64];

    for (;;) {
        gs_status_t st = gs__sock_read_full(fd, b, 1, gs__deadline_after_ms(WAIT_MS));

        if (st == GS_ERR_PEER_FAILED) {
            break;
        }
        assert_int_equal(st, GS_OK); /* answers sent before the drop: read past them */
    }
    (void)close(fd);
}

/* Nothing to read on @p fd for @p ms (the server did not answer). */
static void assert_silent(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};

    assert_int_equal(poll(&p, 1, ms), 0);
}

/* Wait (bounded) until the server counted @p n drops. */
static void wait_dropped(const gs__kvs_t *s, uint64_t n)
{
    const uint64_t deadline = gs__deadline_after_ms(WAIT_MS);

    while ((gs__kvs_dropped(s) < n) && (gs__now_ns() < deadline)) {
        (void)poll(NULL, 0, 1);
    }
    assert_int_equal(gs__kvs_dropped(s), n);
}

static void test_kvserver_set_get_add_check(void **state)
{
    gs__kvs_t *s = start(0, 0);
    gs__kv_t kv;
    void *v = NULL;
    size_t n = 0;
    int64_t sum = 0;
    int exists = 1;
    const uint64_t dl = gs__deadline_after_ms(WAIT_MS);

    (void)state;
    connect_to(s, &kv);
    assert_int_equal(gs__kv_check(&kv, "/a", &exists, dl), GS_OK);
    assert_int_equal(exists, 0);
    assert_int_equal(gs__kv_set(&kv, "/a", "hello", 5, dl), GS_OK);
    assert_int_equal(gs__kv_check(&kv, "/a", &exists, dl), GS_OK);
    assert_int_equal(exists, 1);
    assert_int_equal(gs__kv_get(&kv, "/a", 64, &v, &n, dl), GS_OK);
    assert_int_equal(n, 5);
    assert_memory_equal(v, "hello", 5);
    free(v);
    /* An empty value, and a replaced one. */
    assert_int_equal(gs__kv_set(&kv, "/e", "", 0, dl), GS_OK);
    assert_int_equal(gs__kv_get(&kv, "/e", 64, &v, &n, dl), GS_OK);
    assert_int_equal(n, 0);
    free(v);
    assert_int_equal(gs__kv_set(&kv, "/a", "hi", 2, dl), GS_OK);
    assert_int_equal(gs__kv_get(&kv, "/a", 64, &v, &n, dl), GS_OK);
    assert_int_equal(n, 2);
    free(v);
    /* ADD creates at 0, keeps decimal text (torch's encoding), and refuses a non-integer. */
    assert_int_equal(gs__kv_add(&kv, "/n", 1, &sum, dl), GS_OK);
    assert_int_equal(sum, 1);
    assert_int_equal(gs__kv_add(&kv, "/n", -5, &sum, dl), GS_OK);
    assert_int_equal(sum, -4);
    assert_int_equal(gs__kv_get(&kv, "/n", 64, &v, &n, dl), GS_OK);
    assert_int_equal(n, 2);
    assert_memory_equal(v, "-4", 2);
    free(v);
    assert_int_equal(gs__kvs_nkeys(s), 3);
    /* A value larger than the caller's max is refused by the client. */
    assert_int_equal(gs__kv_get(&kv, "/a", 1, &v, &n, dl), GS_ERR_PROTOCOL);
    gs__kv_close(&kv);
    connect_to(s, &kv);
    assert_int_equal(gs__kv_add(&kv, "/a", 1, &sum, dl), GS_ERR_PEER_FAILED); /* "hi" + 1 */
    gs__kv_close(&kv);
    wait_dropped(s, 1);
    gs__kvs_stop(s);
}

static void test_kvserver_compare_set(void **state)
{
    gs__kvs_t *s = start(0, 0);
    gs__kv_t kv;
    void *v = NULL;
    size_t n = 0;
    const uint64_t dl = gs__deadline_after_ms(WAIT_MS);

    (void)state;
    connect_to(s, &kv);
    /* Missing key, expected non-empty: not set, the expected value answered (torch's rule). */
    assert_int_equal(gs__kv_compare_set(&kv, "/c", "x", 1, "y", 1, 64, &v, &n, dl), GS_OK);
    assert_int_equal(n, 1);
    assert_memory_equal(v, "x", 1);
    free(v);
    assert_int_equal(gs__kvs_nkeys(s), 0);
    /* Missing key, expected empty: set. */
    assert_int_equal(gs__kv_compare_set(&kv, "/c", "", 0, "1", 1, 64, &v, &n, dl), GS_OK);
    assert_memory_equal(v, "1", 1);
    free(v);
    /* Wrong expectation: unchanged, the held value answered. */
    assert_int_equal(gs__kv_compare_set(&kv, "/c", "0", 1, "2", 1, 64, &v, &n, dl), GS_OK);
    assert_memory_equal(v, "1", 1);
    free(v);
    /* Right one: swapped. */
    assert_int_equal(gs__kv_compare_set(&kv, "/c", "1", 1, "22", 2, 64, &v, &n, dl), GS_OK);
    assert_int_equal(n, 2);
    assert_memory_equal(v, "22", 2);
    free(v);
    gs__kv_close(&kv);
    assert_int_equal(gs__kvs_dropped(s), 0);
    gs__kvs_stop(s);
}

/* A WAIT parks until another connection sets the key (and CHECK does not). */
static void test_kvserver_wait_woken_by_set(void **state)
{
    gs__kvs_t *s = start(0, 0);
    int fd = raw_connect(s, 1);
    gs__kv_t kv;
    const uint8_t wait_q = 6;
    const uint64_t one = 1;
    uint8_t a = 0xff;

    (void)state;
    raw_send(fd, &wait_q, 1);
    raw_send(fd, &one, sizeof(one));
    raw_put_str(fd, "/w");
    assert_silent(fd, 100);
    connect_to(s, &kv);
    assert_int_equal(gs__kv_set(&kv, "/w", "v", 1, gs__deadline_after_ms(WAIT_MS)), GS_OK);
    assert_int_equal(gs__sock_read_full(fd, &a, 1, gs__deadline_after_ms(WAIT_MS)), GS_OK);
    assert_int_equal(a, 0); /* STOP_WAITING */
    /* A parked WAIT answered, the connection serves again: GET it. */
    {
        const uint8_t get_q = 3;
        uint64_t len = 0;
        char b = 0;

        raw_send(fd, &get_q, 1);
        raw_put_str(fd, "/w");
        assert_int_equal(gs__sock_read_full(fd, &len, 8, gs__deadline_after_ms(WAIT_MS)), GS_OK);
        assert_int_equal(len, 1);
        assert_int_equal(gs__sock_read_full(fd, &b, 1, gs__deadline_after_ms(WAIT_MS)), GS_OK);
        assert_int_equal(b, 'v');
    }
    (void)close(fd);
    gs__kv_close(&kv);
    assert_int_equal(gs__kvs_dropped(s), 0);
    gs__kvs_stop(s);
}

typedef struct getter {
    const gs__kvs_t *s;
    gs_status_t st;
    size_t len;
} getter_t;

static void *getter_main(void *arg)
{
    getter_t *g = arg;
    gs__kv_t kv;
    void *v = NULL;

    connect_to(g->s, &kv);
    g->st = gs__kv_get(&kv, "/late", 64, &v, &g->len, gs__deadline_after_ms(WAIT_MS));
    free(v);
    gs__kv_close(&kv);
    return NULL;
}

/* Our client's get (WAIT then GET) in a thread, answered by a set from the main thread. */
static void test_kvserver_client_get_waits(void **state)
{
    gs__kvs_t *s = start(0, 0);
    getter_t g = {.s = s, .st = GS_ERR_INTERNAL};
    pthread_t t;
    gs__kv_t kv;

    (void)state;
    assert_int_equal(pthread_create(&t, NULL, getter_main, &g), 0);
    connect_to(s, &kv);
    assert_int_equal(gs__kv_set(&kv, "/late", "abc", 3, gs__deadline_after_ms(WAIT_MS)), GS_OK);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(g.st, GS_OK);
    assert_int_equal(g.len, 3);
    gs__kv_close(&kv);
    gs__kvs_stop(s);
}

/* PING echoes; CANCEL_WAIT answers WAIT_CANCELED; GETNUMKEYS and DELETE_KEY count. */
static void test_kvserver_torch_queries(void **state)
{
    gs__kvs_t *s = start(0, 0);
    int fd = raw_connect(s, 1);
    const uint8_t ping = 13, wait_q = 6, cancel = 12, nkeys = 7, del = 8, set_q = 1;
    const uint32_t nonce = 0xdeadbeefu;
    const uint64_t one = 1, zero = 0;
    uint32_t echo = 0;
    uint8_t a = 0xff;
    int64_t n = -1;

    (void)state;
    raw_send(fd, &ping, 1);
    raw_send(fd, &nonce, 4);
    assert_int_equal(gs__sock_read_full(fd, &echo, 4, gs__deadline_after_ms(WAIT_MS)), GS_OK);
    assert_int_equal(echo, nonce);
    raw_send(fd, &wait_q, 1);
    raw_send(fd, &one, 8);
    raw_put_str(fd, "/never");
    assert_silent(fd, 50);
    raw_send(fd, &cancel, 1);
    assert_int_equal(gs__sock_read_full(fd, &a, 1, gs__deadline_after_ms(WAIT_MS)), GS_OK);
    assert_int_equal(a, 1); /* WAIT_CANCELED */
    raw_send(fd, &set_q, 1);
    raw_put_str(fd, "/k");
    raw_send(fd, &zero, 8);
    raw_send(fd, &nkeys, 1);
    assert_int_equal(gs__sock_read_full(fd, &n, 8, gs__deadline_after_ms(WAIT_MS)), GS_OK);
    assert_int_equal(n, 1);
    raw_send(fd, &del, 1);
    raw_put_str(fd, "/k");
    assert_int_equal(gs__sock_read_full(fd, &n, 8, gs__deadline_after_ms(WAIT_MS)), GS_OK);
    assert_int_equal(n, 1);
    raw_send(fd, &del, 1);
    raw_put_str(fd, "/k");
    assert_int_equal(gs__sock_read_full(fd, &n, 8, gs__deadline_after_ms(WAIT_MS)), GS_OK);
    assert_int_equal(n, 0);
    assert_int_equal(gs__kvs_nkeys(s), 0);
    (void)close(fd);
    assert_int_equal(gs__kvs_dropped(s), 0);
    gs__kvs_stop(s);
}

/* Garbage of several kinds is dropped; a client parked meanwhile is still woken. */
static void test_kvserver_garbage_dropped(void **state)
{
    gs__kvs_t *s = start(0, 0);
    int waiter = raw_connect(s, 1);
    const uint8_t wait_q = 6;
    const uint64_t one = 1;
    uint64_t drops = 0;
    gs__kv_t kv;
    uint8_t a = 0xff;

    (void)state;
    raw_send(waiter, &wait_q, 1);
    raw_send(waiter, &one, 8);
    raw_put_str(waiter, "/go");
    {
        /* No VALIDATE first (an HTTP probe). */
        int fd = raw_connect(s, 0);

        junk_send(fd, "GET / HTTP/1.0\r\n\r\n", 18);
        assert_dropped(fd);
        wait_dropped(s, ++drops);
    }
    {
        /* A bad magic. */
        int fd = raw_connect(s, 0);
        const uint8_t v[5] = {0, 1, 2, 3, 4};

        junk_send(fd, v, 5);
        assert_dropped(fd);
        wait_dropped(s, ++drops);
    }
    {
        /* An unknown query code, and one the store does not serve (APPEND = 9). */
        for (uint8_t code = 9; code != 0; code = (code == 9) ? 200 : 0) {
            int fd = raw_connect(s, 1);

            junk_send(fd, &code, 1);
            junk_put_str(fd, "/x");
            assert_dropped(fd);
            wait_dropped(s, ++drops);
        }
    }
    {
        /* A key of 0 bytes, a key over GS_KV_KEY_MAX, a key count of 65. */
        const uint8_t set_q = 1, check_q = 5;
        const uint64_t lens[3] = {0, GS_KV_KEY_MAX + 1, 65};

        for (int i = 0; i < 3; i++) {
            int fd = raw_connect(s, 1);

            junk_send(fd, (i < 2) ? &set_q : &check_q, 1);
            junk_send(fd, &lens[i], 8);
            assert_dropped(fd);
            wait_dropped(s, ++drops);
        }
    }
    {
        /* A second query while its WAIT is parked. */
        int fd = raw_connect(s, 1);
        const uint8_t ping = 13;
        const uint32_t nonce = 1;

        raw_send(fd, &wait_q, 1);
        raw_send(fd, &one, 8);
        raw_put_str(fd, "/never");
        junk_send(fd, &ping, 1);
        junk_send(fd, &nonce, 4);
        assert_dropped(fd);
        wait_dropped(s, ++drops);
    }
    /* Random bytes after VALIDATE, seeded: each connection is dropped or left idle, the
     * server keeps serving. */
    srand(12345);
    for (int i = 0; i < 200; i++) {
        int fd = raw_connect(s, (i % 4) != 0);
        uint8_t junk[96];
        const size_t n = 1 + (size_t)(rand() % (int)sizeof(junk));

        for (size_t k = 0; k < n; k++) {
            junk[k] = (uint8_t)rand();
        }
        junk_send(fd, junk, n);
        (void)close(fd);
    }
    assert_silent(waiter, 10);
    connect_to(s, &kv);
    assert_int_equal(gs__kv_set(&kv, "/go", "1", 1, gs__deadline_after_ms(WAIT_MS)), GS_OK);
    assert_int_equal(gs__sock_read_full(waiter, &a, 1, gs__deadline_after_ms(WAIT_MS)), GS_OK);
    assert_int_equal(a, 0);
    gs__kv_close(&kv);
    (void)close(waiter);
    assert_true(gs__kvs_dropped(s) >= drops);
    gs__kvs_stop(s);
}

/* A value over GS_KV_VALUE_MAX is dropped before anything is allocated for it; our client
 * refuses to send one; a store full (max_bytes) drops the client that would overfill it. */
static void test_kvserver_value_too_large(void **state)
{
    gs__kvs_t *s = start(0, 4096);
    int fd = raw_connect(s, 1);
    const uint8_t set_q = 1;
    const uint64_t big = (uint64_t)GS_KV_VALUE_MAX + 1;
    gs__kv_t kv;
    static uint8_t val[3000];
    const uint64_t dl = gs__deadline_after_ms(WAIT_MS);

    (void)state;
    raw_send(fd, &set_q, 1);
    raw_put_str(fd, "/big");
    junk_send(fd, &big, 8);
    assert_dropped(fd);
    wait_dropped(s, 1);
    connect_to(s, &kv);
    assert_int_equal(gs__kv_set(&kv, "/big", val, (size_t)GS_KV_VALUE_MAX + 1, dl),
                     GS_ERR_INVALID_ARG);
    assert_int_equal(gs__kv_set(&kv, "/v1", val, sizeof(val), dl), GS_OK);
    assert_int_equal(gs__kv_set(&kv, "/v1", val, sizeof(val), dl), GS_OK); /* replaced: fits */
    assert_int_equal(gs__kv_set(&kv, "/v2", val, sizeof(val), dl), GS_OK); /* does not fit */
    {
        int exists = 0;

        assert_int_equal(gs__kv_check(&kv, "/v1", &exists, dl), GS_ERR_PEER_FAILED);
    }
    gs__kv_close(&kv);
    wait_dropped(s, 2);
    assert_int_equal(gs__kvs_nkeys(s), 1);
    gs__kvs_stop(s);
}

/* A client that leaves while a large answer is being written: the server (in this process)
 * gets EPIPE, not SIGPIPE, and keeps serving. */
static void test_kvserver_client_gone_mid_answer(void **state)
{
    gs__kvs_t *s = start(0, 0);
    const size_t big = 8u << 20;
    uint8_t *val = calloc(1, big);
    const uint8_t get_q = 3;
    gs__kv_t kv;
    int exists = 0;

    (void)state;
    assert_non_null(val);
    connect_to(s, &kv);
    assert_int_equal(gs__kv_set(&kv, "/big", val, big, gs__deadline_after_ms(WAIT_MS)), GS_OK);
    for (int i = 0; i < 4; i++) {
        int fd = raw_connect(s, 1);

        junk_send(fd, &get_q, 1);
        junk_put_str(fd, "/big");
        (void)close(fd); /* unread: the kernel resets the connection */
    }
    assert_int_equal(gs__kv_check(&kv, "/big", &exists, gs__deadline_after_ms(WAIT_MS)), GS_OK);
    assert_int_equal(exists, 1);
    gs__kv_close(&kv);
    free(val);
    gs__kvs_stop(s);
}

/* Past max_conns, a connection is closed at once; the others are served. */
static void test_kvserver_max_conns(void **state)
{
    gs__kvs_t *s = start(2, 0);
    gs__kv_t a, b, c;
    int exists = 0;

    (void)state;
    connect_to(s, &a);
    connect_to(s, &b);
    assert_int_equal(gs__kv_set(&a, "/x", "1", 1, gs__deadline_after_ms(WAIT_MS)), GS_OK);
    assert_int_equal(gs__kv_check(&b, "/x", &exists, gs__deadline_after_ms(WAIT_MS)), GS_OK);
    assert_int_equal(exists, 1);
    (void)gs__kv_connect(&c, "127.0.0.1", gs__kvs_port(s), "ipv4", gs__deadline_after_ms(WAIT_MS));
    if (c.fd >= 0) {
        assert_int_equal(gs__kv_check(&c, "/x", &exists, gs__deadline_after_ms(WAIT_MS)),
                         GS_ERR_PEER_FAILED);
    }
    gs__kv_close(&c);
    assert_int_equal(gs__kv_check(&a, "/x", &exists, gs__deadline_after_ms(WAIT_MS)), GS_OK);
    gs__kv_close(&a);
    gs__kv_close(&b);
    gs__kvs_stop(s);
}

typedef struct waiter {
    const gs__kvs_t *s;
    gs__kv_t kv;
    gs_status_t st;
} waiter_t;

static void *waiter_main(void *arg)
{
    waiter_t *w = arg;
    void *v = NULL;
    size_t n = 0;

    w->st = gs__kv_get(&w->kv, "/never", 64, &v, &n, gs__deadline_after_ms(WAIT_MS));
    free(v);
    return NULL;
}

/* stop() with clients connected, one of them waiting: it returns, and the waiter sees the
 * store close well before its deadline. */
static void test_kvserver_stop_with_clients(void **state)
{
    gs__kvs_t *s = start(0, 0);
    waiter_t w = {.s = s, .st = GS_ERR_INTERNAL};
    gs__kv_t idle;
    pthread_t t;
    int fd;
    uint64_t t0;

    (void)state;
    connect_to(s, &w.kv);
    connect_to(s, &idle);
    fd = raw_connect(s, 1);
    raw_send(fd, "\x01", 1); /* half a SET */
    assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
    assert_int_equal(gs__kv_set(&idle, "/k", "v", 1, gs__deadline_after_ms(WAIT_MS)), GS_OK);
    t0 = gs__now_ns();
    gs__kvs_stop(s);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w.st, GS_ERR_PEER_FAILED);
    assert_true(gs__now_ns() - t0 < (uint64_t)WAIT_MS * 1000000ull / 2);
    gs__kv_close(&w.kv);
    gs__kv_close(&idle);
    (void)close(fd);
    gs__kvs_stop(NULL);
}

static void test_kvserver_start_bad_args(void **state)
{
    gs__kvs_t *s = NULL;
    gs__kvs_t *t = NULL;

    (void)state;
    assert_int_equal(gs__kvs_start("127.0.0.1", 70000, "ipv4", NULL, &s), GS_ERR_INVALID_ARG);
    assert_null(s);
    s = start(0, 0);
    /* The port is taken. */
    assert_int_equal(gs__kvs_start("127.0.0.1", gs__kvs_port(s), "ipv4", NULL, &t), GS_ERR_SYSTEM);
    assert_null(t);
    assert_non_null(strstr(gs__kvs_where(s), "127.0.0.1:"));
    gs__kvs_stop(s);
}

static void spec_ok(const char *spec, const char *host, int port, const char *prefix)
{
    char h[GS_KV_HOST_MAX], p[GS_KV_PREFIX_MAX], why[128];
    int pt = 0;

    assert_int_equal(gs__kv_parse_spec(spec, h, &pt, p, why, sizeof(why)), GS_OK);
    assert_string_equal(h, host);
    assert_int_equal(pt, port);
    assert_string_equal(p, prefix);
}

static void spec_bad(const char *spec, const char *why_has)
{
    char h[GS_KV_HOST_MAX] = "untouched", p[GS_KV_PREFIX_MAX], why[128] = "";
    int pt = -7;

    assert_int_equal(gs__kv_parse_spec(spec, h, &pt, p, why, sizeof(why)), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(why, why_has));
    assert_string_equal(h, "untouched");
    assert_int_equal(pt, -7);
}

static void test_kvserver_parse_spec(void **state)
{
    char longp[300];

    (void)state;
    spec_ok("127.0.0.1:29400/job", "127.0.0.1", 29400, "job");
    spec_ok("node-1.example:1/a/b/c", "node-1.example", 1, "a/b/c");
    spec_ok("[::1]:65535/x", "::1", 65535, "x");
    spec_ok("[fd00::1:2]:29400/job-7", "fd00::1:2", 29400, "job-7");
    spec_bad("", "empty");
    spec_bad("host/job", "no ':port'");
    spec_bad("host:29400", "no '/prefix'");
    spec_bad("host:/job", "no port");
    spec_bad("host:0/job", "not 1..65535");
    spec_bad("host:65536/job", "not 1..65535");
    spec_bad("host:99999999999999999999/job", "not 1..65535");
    spec_bad("host:12x/job", "not 1..65535");
    spec_bad(":29400/job", "host of 0");
    spec_bad("host:29400/", "prefix of 0");
    spec_bad("host:29400//job", "prefix");
    spec_bad("host:29400/a b", "space");
    spec_bad("::1:29400/job", "character");
    spec_bad("[::1]29400/job", "']:'");
    spec_bad("[::1:29400/job", "']:'");
    memset(longp, 'p', sizeof(longp));
    (void)snprintf(longp, sizeof(longp), "h:1/%0250d", 7);
    spec_bad(longp, "prefix of 250");
}

static void test_kvserver_epoch_parse(void **state)
{
    int e = -1;

    (void)state;
    assert_int_equal(gs__boot_epoch_parse("0", 1, &e), GS_OK);
    assert_int_equal(e, 0);
    assert_int_equal(gs__boot_epoch_parse("2147483647", 10, &e), GS_OK);
    assert_int_equal(e, 2147483647);
    e = -1;
    assert_int_equal(gs__boot_epoch_parse("2147483648", 10, &e), GS_ERR_PROTOCOL);
    assert_int_equal(gs__boot_epoch_parse("", 0, &e), GS_ERR_PROTOCOL);
    assert_int_equal(gs__boot_epoch_parse("-1", 2, &e), GS_ERR_PROTOCOL);
    assert_int_equal(gs__boot_epoch_parse("1 ", 2, &e), GS_ERR_PROTOCOL);
    assert_int_equal(gs__boot_epoch_parse("0000000000000001", 16, &e), GS_ERR_PROTOCOL);
    assert_int_equal(e, -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kvserver_set_get_add_check),
        cmocka_unit_test(test_kvserver_compare_set),
        cmocka_unit_test(test_kvserver_wait_woken_by_set),
        cmocka_unit_test(test_kvserver_client_get_waits),
        cmocka_unit_test(test_kvserver_torch_queries),
        cmocka_unit_test(test_kvserver_garbage_dropped),
        cmocka_unit_test(test_kvserver_value_too_large),
        cmocka_unit_test(test_kvserver_client_gone_mid_answer),
        cmocka_unit_test(test_kvserver_max_conns),
        cmocka_unit_test(test_kvserver_stop_with_clients),
        cmocka_unit_test(test_kvserver_start_bad_args),
        cmocka_unit_test(test_kvserver_parse_spec),
        cmocka_unit_test(test_kvserver_epoch_parse),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
