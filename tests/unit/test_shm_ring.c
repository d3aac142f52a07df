/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shared-memory pieces of the TCP transport's local path: the SPSC byte
 * ring (empty, full, wrap-around, gathered writes, discard, positions a
 * buggy peer corrupted, the sleep/wake flags, a two-thread stream checked
 * byte by byte), segments (create, open, header checks, the /dev/shm room
 * check, no name left behind) and the setup records of tcp_wire.c.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>

#include "transport/tcp/tcp_shm_ring.h"
#include "transport/tcp/tcp_shm_seg.h"
#include "transport/tcp/tcp_wire.h"

typedef struct ring_pair {
    gs__shm_ring_ctl_t ctl;
    uint8_t *data;
    gs__shm_ring_t tx;
    gs__shm_ring_t rx;
} ring_pair_t;

static void pair_init(ring_pair_t *p, uint64_t size)
{
    p->data = malloc((size_t)size);
    assert_non_null(p->data);
    gs__shm_ring_ctl_init(&p->ctl);
    gs__shm_ring_attach(&p->tx, &p->ctl, p->data, size);
    gs__shm_ring_attach(&p->rx, &p->ctl, p->data, size);
}

static size_t write1(gs__shm_ring_t *r, const void *buf, size_t len)
{
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    size_t n = 99;

    assert_int_equal(gs__shm_ring_writev(r, &iov, 1, &n), GS_OK);
    return n;
}

static size_t read1(gs__shm_ring_t *r, void *buf, size_t len)
{
    size_t n = 99;

    assert_int_equal(gs__shm_ring_read(r, buf, len, &n), GS_OK);
    return n;
}

static void test_empty_and_full(void **state)
{
    ring_pair_t p;
    uint8_t in[100];
    uint8_t out[100];
    uint64_t n;

    (void)state;
    pair_init(&p, 64);
    for (int i = 0; i < 100; i++) {
        in[i] = (uint8_t)(i + 1);
    }
    assert_int_equal(gs__shm_ring_readable(&p.rx, &n), GS_OK);
    assert_int_equal(n, 0);
    assert_int_equal(read1(&p.rx, out, sizeof(out)), 0); /* empty */
    assert_int_equal(gs__shm_ring_writable(&p.tx, &n), GS_OK);
    assert_int_equal(n, 64);
    assert_int_equal(write1(&p.tx, in, 100), 64); /* only what fits */
    assert_int_equal(write1(&p.tx, in, 10), 0);   /* full */
    assert_int_equal(gs__shm_ring_writable(&p.tx, &n), GS_OK);
    assert_int_equal(n, 0);
    assert_int_equal(read1(&p.rx, out, 30), 30);
    assert_memory_equal(out, in, 30);
    assert_int_equal(gs__shm_ring_writable(&p.tx, &n), GS_OK);
    assert_int_equal(n, 30);
    assert_int_equal(read1(&p.rx, out, 100), 34);
    assert_memory_equal(out, in + 30, 34);
    free(p.data);
}

static void test_wrap_gather_discard(void **state)
{
    ring_pair_t p;
    uint8_t a[40];
    uint8_t b[25];
    uint8_t out[128];
    uint64_t total_in = 0;
    uint64_t total_out = 0;

    (void)state;
    pair_init(&p, 48);
    for (int i = 0; i < 40; i++) {
        a[i] = (uint8_t)(0x10 + i);
    }
    for (int i = 0; i < 25; i++) {
        b[i] = (uint8_t)(0x80 + i);
    }
    /* Many rounds so that every offset modulo 48 is a wrap point once. */
    for (int round = 0; round < 200; round++) {
        struct iovec iov[2] = {{.iov_base = a, .iov_len = 17 + (size_t)(round % 23)},
                               {.iov_base = b, .iov_len = 1 + (size_t)(round % 25)}};
        size_t want = iov[0].iov_len + iov[1].iov_len;
        size_t n = 0;
        size_t got;

        if (want > 48) {
            iov[1].iov_len -= want - 48;
            want = 48;
        }
        assert_int_equal(gs__shm_ring_writev(&p.tx, iov, 2, &n), GS_OK);
        assert_int_equal(n, want);
        total_in += n;
        if ((round % 5) == 4) {
            assert_int_equal(gs__shm_ring_read(&p.rx, NULL, want, &got), GS_OK); /* discard */
            assert_int_equal(got, want);
        } else {
            got = read1(&p.rx, out, sizeof(out));
            assert_int_equal(got, want);
            assert_memory_equal(out, a, iov[0].iov_len);
            assert_memory_equal(out + iov[0].iov_len, b, iov[1].iov_len);
        }
        total_out += got;
    }
    assert_true(total_in == total_out);
    assert_true(p.tx.pos == p.rx.pos);
    assert_true(p.tx.pos > 48 * 50);
    free(p.data);
}

static void test_corrupt_positions(void **state)
{
    ring_pair_t p;
    uint8_t buf[32] = {0};
    uint64_t n;
    size_t got = 7;
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};

    (void)state;
    pair_init(&p, 64);
    assert_int_equal(write1(&p.tx, buf, 16), 16);
    /* A tail more than a ring ahead of our head. */
    atomic_store(&p.ctl.tail, 65);
    assert_int_equal(gs__shm_ring_readable(&p.rx, &n), GS_ERR_PROTOCOL);
    assert_int_equal(gs__shm_ring_read(&p.rx, buf, sizeof(buf), &got), GS_ERR_PROTOCOL);
    assert_int_equal(got, 0);
    assert_true(gs__shm_ring_reader_arm(&p.rx)); /* wakes so that the read reports it */
    /* A tail behind our head (moved backwards). */
    atomic_store(&p.ctl.tail, 16);
    assert_int_equal(read1(&p.rx, buf, 8), 8);
    atomic_store(&p.ctl.tail, 4);
    assert_int_equal(gs__shm_ring_read(&p.rx, buf, sizeof(buf), &got), GS_ERR_PROTOCOL);
    /* A head beyond the producer's tail, and one more than a ring behind. */
    atomic_store(&p.ctl.tail, p.tx.pos);
    atomic_store(&p.ctl.head, p.tx.pos + 1);
    assert_int_equal(gs__shm_ring_writable(&p.tx, &n), GS_ERR_PROTOCOL);
    assert_int_equal(gs__shm_ring_writev(&p.tx, &iov, 1, &got), GS_ERR_PROTOCOL);
    assert_int_equal(got, 0);
    p.tx.pos = 1000;
    atomic_store(&p.ctl.head, 1000 - 65);
    assert_int_equal(gs__shm_ring_writable(&p.tx, &n), GS_ERR_PROTOCOL);
    atomic_store(&p.ctl.head, UINT64_MAX);
    assert_int_equal(gs__shm_ring_writable(&p.tx, &n), GS_ERR_PROTOCOL);
    free(p.data);
}

static void test_sleep_flags(void **state)
{
    ring_pair_t p;
    uint8_t buf[64] = {0};

    (void)state;
    pair_init(&p, 64);
    /* Reader arms on an empty ring: sleeps; the writer's publish wakes it once. */
    assert_false(gs__shm_ring_reader_arm(&p.rx));
    assert_int_equal(write1(&p.tx, buf, 8), 8);
    assert_true(gs__shm_ring_wake_reader(&p.tx));
    assert_false(gs__shm_ring_wake_reader(&p.tx)); /* exactly once */
    /* Reader arms with bytes waiting: does not sleep, flag left clear. */
    assert_true(gs__shm_ring_reader_arm(&p.rx));
    assert_false(gs__shm_ring_wake_reader(&p.tx));
    gs__shm_ring_reader_disarm(&p.rx);
    /* Writer on a full ring waits; the reader's consume wakes it once. */
    assert_int_equal(write1(&p.tx, buf, 64), 56);
    assert_false(gs__shm_ring_writer_arm(&p.tx));
    assert_int_equal(read1(&p.rx, buf, 10), 10);
    assert_true(gs__shm_ring_wake_writer(&p.rx));
    assert_false(gs__shm_ring_wake_writer(&p.rx));
    assert_true(gs__shm_ring_writer_arm(&p.tx)); /* room now: no wait */
    assert_false(gs__shm_ring_wake_writer(&p.rx));
    /* A writer that woke by itself clears its flag: no stale doorbell later. */
    assert_int_equal(write1(&p.tx, buf, 64), 10);
    assert_false(gs__shm_ring_writer_arm(&p.tx));
    gs__shm_ring_writer_disarm(&p.tx);
    assert_int_equal(read1(&p.rx, buf, 1), 1);
    assert_false(gs__shm_ring_wake_writer(&p.rx));
    free(p.data);
}

/* A producer thread streams a pattern through a small ring. */
typedef struct stream_arg {
    gs__shm_ring_t *r;
    uint64_t total;
    int bad;
} stream_arg_t;

static void *producer(void *argp)
{
    stream_arg_t *arg = argp;
    uint8_t chunk[301];
    uint64_t sent = 0;

    while (sent < arg->total) {
        size_t len =
            (size_t)((arg->total - sent < sizeof(chunk)) ? arg->total - sent : sizeof(chunk));
        struct iovec iov = {.iov_base = chunk, .iov_len = len};
        size_t n = 0;

        for (size_t i = 0; i < len; i++) {
            chunk[i] = (uint8_t)((sent + i) * 7u);
        }
        if (gs__shm_ring_writev(arg->r, &iov, 1, &n) != GS_OK) {
            arg->bad = 1;
            return NULL;
        }
        sent += n;
        if (n == 0) {
            sched_yield();
        }
    }
    return NULL;
}

static void test_two_threads(void **state)
{
    ring_pair_t p;
    stream_arg_t arg;
    pthread_t th;
    uint8_t buf[97];
    uint64_t got = 0;
    int bad = 0;

    (void)state;
    pair_init(&p, 1000);
    arg.r = &p.tx;
    arg.total = 3000000;
    arg.bad = 0;
    assert_int_equal(pthread_create(&th, NULL, producer, &arg), 0);
    while ((got < arg.total) && !bad) {
        size_t n = 0;

        if (gs__shm_ring_read(&p.rx, buf, sizeof(buf), &n) != GS_OK) {
            bad = 1;
            break;
        }
        for (size_t i = 0; i < n; i++) {
            bad |= (buf[i] != (uint8_t)((got + i) * 7u));
        }
        got += n;
        if (n == 0) {
            sched_yield();
        }
    }
    pthread_join(th, NULL);
    assert_int_equal(bad, 0);
    assert_int_equal(arg.bad, 0);
    assert_true(got == arg.total);
    free(p.data);
}

static int shm_exists(const char *name)
{
    int fd = shm_open(name, O_RDONLY, 0);

    if (fd >= 0) {
        close(fd);
        return 1;
    }
    return 0;
}

static void test_segment(void **state)
{
    gs__shm_seg_id_t id = {.job_id = 11, .comm_id = 22, .lo = 1, .hi = 3, .ring_bytes = 4096};
    gs__shm_seg_id_t want;
    gs__shm_seg_t a;
    gs__shm_seg_t b;
    gs__shm_ring_t atx;
    gs__shm_ring_t arx;
    gs__shm_ring_t btx;
    gs__shm_ring_t brx;
    char why[256];
    uint8_t msg[5000];
    uint8_t out[5000];
    size_t n;

    (void)state;
    assert_int_equal(gs__shm_seg_create(&a, &id, -1, why, sizeof(why)), GS_OK);
    assert_true(gs__shm_name_ok(a.name));
    assert_true(shm_exists(a.name));
    want = id;
    /* Every header field is checked. */
    want.nonce ^= 1;
    assert_int_equal(gs__shm_seg_open(&b, a.name, &want, why, sizeof(why)), GS_ERR_PROTOCOL);
    assert_non_null(strstr(why, "does not belong"));
    want = id;
    want.comm_id = 23;
    assert_int_equal(gs__shm_seg_open(&b, a.name, &want, why, sizeof(why)), GS_ERR_PROTOCOL);
    want = id;
    want.ring_bytes = 8192; /* another size */
    assert_int_equal(gs__shm_seg_open(&b, a.name, &want, why, sizeof(why)), GS_ERR_PROTOCOL);
    assert_int_equal(gs__shm_seg_open(&b, "/../etc/passwd", &id, why, sizeof(why)),
                     GS_ERR_PROTOCOL);
    assert_int_equal(gs__shm_seg_open(&b, "/gradsync-no-such-segment", &id, why, sizeof(why)),
                     GS_ERR_SYSTEM);
    assert_true(shm_exists(a.name)); /* failed opens leave it */
    assert_int_equal(gs__shm_seg_open(&b, a.name, &id, why, sizeof(why)), GS_OK);
    assert_false(shm_exists(a.name)); /* the mapper unlinks at once */
    /* The two views talk both ways through the two rings. */
    gs__shm_seg_rings(&a, id.ring_bytes, true, &atx, &arx);
    gs__shm_seg_rings(&b, id.ring_bytes, false, &btx, &brx);
    for (size_t i = 0; i < sizeof(msg); i++) {
        msg[i] = (uint8_t)(i * 13u);
    }
    assert_int_equal(write1(&atx, msg, sizeof(msg)), 4096);
    assert_int_equal(read1(&brx, out, sizeof(out)), 4096);
    assert_memory_equal(out, msg, 4096);
    assert_int_equal(write1(&btx, msg + 1, 100), 100);
    assert_int_equal(read1(&arx, out, sizeof(out)), 100);
    assert_memory_equal(out, msg + 1, 100);
    assert_int_equal(gs__shm_ring_read(&arx, out, 1, &n), GS_OK);
    assert_int_equal(n, 0);
    gs__shm_seg_close(&b);
    gs__shm_seg_close(&a);
    gs__shm_seg_close(&a); /* idempotent */
}

static void test_segment_no_room(void **state)
{
    gs__shm_seg_id_t id = {.job_id = 1, .comm_id = 2, .lo = 0, .hi = 1, .ring_bytes = 1 << 20};
    gs__shm_seg_t a;
    char why[256];
    uint64_t free_bytes = 0;

    (void)state;
    assert_int_equal(gs__shm_seg_create(&a, &id, 1000000, why, sizeof(why)), GS_ERR_NO_RESOURCE);
    /* The message names the room there is and the bytes needed. */
    assert_non_null(strstr(why, "1000000 bytes free"));
    assert_non_null(strstr(why, "2105344 bytes"));
    assert_null(a.base);
    assert_false(a.named);
    assert_int_equal(gs__shm_free_bytes(12345, &free_bytes, why, sizeof(why)), GS_OK);
    assert_true(free_bytes == 12345);
    assert_int_equal(gs__shm_free_bytes(-1, &free_bytes, why, sizeof(why)), GS_OK);
    assert_true(gs__shm_seg_bytes(4096) == 8192 + 8192);
}

static void test_names(void **state)
{
    char long_name[80];

    (void)state;
    assert_true(gs__shm_name_ok("/gradsync-1-0-1-00ff"));
    assert_false(gs__shm_name_ok("gradsync"));
    assert_false(gs__shm_name_ok("/"));
    assert_false(gs__shm_name_ok("/a/b"));
    assert_false(gs__shm_name_ok("/a b"));
    memset(long_name, 'a', sizeof(long_name));
    long_name[0] = '/';
    long_name[GS_SHM_NAME_MAX] = '\0';
    assert_false(gs__shm_name_ok(long_name)); /* no NUL within GS_SHM_NAME_MAX */
    long_name[GS_SHM_NAME_MAX - 1] = '\0';
    assert_true(gs__shm_name_ok(long_name));
}

static void test_wire_records(void **state)
{
    gs__tcp_shm_msg_t in = {.kind = GS_TCP_SHM_CREATE,
                            .ok = true,
                            .host_id = 0x1122334455667788ull,
                            .ring_bytes = 4096,
                            .nonce = 42};
    gs__tcp_shm_msg_t out;
    uint8_t buf[GS_TCP_SHM_LEN];
    char why[160];

    (void)state;
    snprintf(in.name, sizeof(in.name), "/gradsync-7-0-1-2a");
    gs__tcp_shm_encode(&in, buf);
    assert_int_equal(gs__tcp_shm_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_OK);
    assert_int_equal(out.kind, GS_TCP_SHM_CREATE);
    assert_true(out.ok);
    assert_true(out.host_id == in.host_id);
    assert_true(out.ring_bytes == 4096);
    assert_true(out.nonce == 42);
    assert_string_equal(out.name, in.name);
    assert_int_equal(gs__tcp_shm_decode(buf, sizeof(buf) - 1, &out, why, sizeof(why)),
                     GS_ERR_PROTOCOL);
    buf[0] ^= 1; /* magic */
    assert_int_equal(gs__tcp_shm_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_ERR_PROTOCOL);
    gs__tcp_shm_encode(&in, buf);
    buf[4] = 9; /* kind */
    assert_int_equal(gs__tcp_shm_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_ERR_PROTOCOL);
    gs__tcp_shm_encode(&in, buf);
    buf[5] = 2; /* ok */
    assert_int_equal(gs__tcp_shm_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_ERR_PROTOCOL);
    gs__tcp_shm_encode(&in, buf);
    buf[7] = 1; /* reserved */
    assert_int_equal(gs__tcp_shm_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_ERR_PROTOCOL);
    gs__tcp_shm_encode(&in, buf);
    memset(buf + 32, 'x', GS_TCP_SHM_NAME_LEN); /* no NUL */
    assert_int_equal(gs__tcp_shm_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_ERR_PROTOCOL);
    gs__tcp_shm_encode(&in, buf);
    buf[32 + GS_TCP_SHM_NAME_LEN - 1] = 'y'; /* garbage after the NUL */
    assert_int_equal(gs__tcp_shm_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_ERR_PROTOCOL);
    in.ring_bytes = GS_TCP_SHM_MAX_RING + 1;
    gs__tcp_shm_encode(&in, buf);
    assert_int_equal(gs__tcp_shm_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_ERR_PROTOCOL);
    assert_non_null(strstr(why, "ring"));
    in.ring_bytes = 4096;
    in.kind = GS_TCP_SHM_OFFER; /* a name only belongs to an ok CREATE */
    gs__tcp_shm_encode(&in, buf);
    assert_int_equal(gs__tcp_shm_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_ERR_PROTOCOL);
    in.name[0] = '\0';
    gs__tcp_shm_encode(&in, buf);
    assert_int_equal(gs__tcp_shm_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_OK);
    in.kind = GS_TCP_SHM_CREATE; /* an ok CREATE needs a name */
    gs__tcp_shm_encode(&in, buf);
    assert_int_equal(gs__tcp_shm_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_ERR_PROTOCOL);
    in.ok = false;
    in.kind = GS_TCP_SHM_MAPPED;
    in.ring_bytes = 0;
    gs__tcp_shm_encode(&in, buf);
    assert_int_equal(gs__tcp_shm_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_OK);
    assert_false(out.ok);
}

static void test_handshake_flags(void **state)
{
    gs__tcp_hs_t in = {.version = GS_TCP_PROTO_VERSION,
                       .kind = GS_TCP_HS_HELLO,
                       .job_id = 1,
                       .comm_id = 2,
                       .rank = 1,
                       .size = 2,
                       .nsocks = 1,
                       .flags = GS_TCP_HS_F_SHM};
    gs__tcp_hs_t out;
    uint8_t buf[GS_TCP_HS_LEN];
    char why[160];

    (void)state;
    gs__tcp_hs_encode(&in, buf);
    assert_int_equal(gs__tcp_hs_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_OK);
    assert_int_equal(out.flags, GS_TCP_HS_F_SHM);
    in.flags = 8; /* unknown (1 is the shared-memory offer, 2 authentication, 4 lazy) */
    gs__tcp_hs_encode(&in, buf);
    assert_int_equal(gs__tcp_hs_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_ERR_PROTOCOL);
    assert_non_null(strstr(why, "flags"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_and_full),    cmocka_unit_test(test_wrap_gather_discard),
        cmocka_unit_test(test_corrupt_positions), cmocka_unit_test(test_sleep_flags),
        cmocka_unit_test(test_two_threads),       cmocka_unit_test(test_segment),
        cmocka_unit_test(test_segment_no_room),   cmocka_unit_test(test_names),
        cmocka_unit_test(test_wire_records),      cmocka_unit_test(test_handshake_flags),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
