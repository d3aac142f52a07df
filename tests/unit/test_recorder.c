/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The flight recorder (core/recorder.c) and the diagnosis helpers around it
 * (algo_diag.c): the ring keeps the last GS_TRACE_SIZE operations and
 * finds them by sequence number, the per-peer counters name the peers
 * waited on, a failed operation keeps that list, the dump has one line per
 * operation in words, the fingerprint separates what ranks must agree on
 * and ignores what they may differ in, and the diagnosis message decoder
 * rejects what is not a whole, sane message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algo/diag/diag.h"
#include "core/recorder.h"

static gs__recorder_t *new_trace(uint32_t cap, int size)
{
    gs__recorder_t *t = NULL;

    assert_int_equal(gs__recorder_create(cap, 0, size, gs__algo_recorder_describe,
                                         gs__algo_recorder_algo_name, &t),
                     GS_OK);
    return t;
}

static void record(gs__recorder_t *t, uint64_t seq, gs_status_t status)
{
    gs__recorder_op_t e;

    memset(&e, 0, sizeof(e));
    e.seq = seq;
    e.kind = GS_COLL_ALLREDUCE;
    e.dtype = GS_DTYPE_F32;
    e.op = GS_OP_SUM;
    e.count = 10 + seq;
    e.bytes = 4 * (10 + seq);
    e.t_start_ns = t->t0_ns + 1000;
    gs__recorder_begin(t, &e);
    gs__recorder_end(t, GS_ALGO_RING, status, t->t0_ns + 2000);
}

static void test_recorder_ring_and_find(void **state)
{
    gs__recorder_t *t = new_trace(4, 2);
    gs__recorder_op_t e;

    (void)state;
    for (uint64_t s = 0; s < 10; s++) {
        record(t, s, GS_OK);
    }
    assert_int_equal(gs__recorder_find(t, 5, &e), 0); /* overwritten */
    assert_int_equal(gs__recorder_find(t, 6, &e), 1);
    assert_int_equal(e.count, 16);
    assert_int_equal(e.algo, GS_ALGO_RING);
    assert_int_equal(gs__recorder_find(t, 9, &e), 1);
    assert_int_equal(e.status, GS_OK);
    gs__recorder_free(t);
}

static void test_recorder_waiting(void **state)
{
    gs__recorder_t *t = new_trace(8, 4);
    char buf[128];
    gs__recorder_op_t e;

    (void)state;
    assert_int_equal(gs__recorder_waiting(t, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "nothing");
    gs__recorder_pend(t, 1, 0, 1);
    gs__recorder_pend(t, 3, 0, 1);
    gs__recorder_pend(t, 3, 1, 1);
    gs__recorder_pend(t, 7, 1, 1);  /* out of range: ignored */
    gs__recorder_pend(t, -1, 0, 1); /* any source: ignored */
    assert_int_equal(gs__recorder_waiting(t, buf, sizeof(buf)), 3);
    assert_string_equal(buf, "receive from ranks 1, 3; send to rank 3");
    record(t, 0, GS_ERR_TIMEOUT); /* a failure keeps the list */
    assert_int_equal(gs__recorder_find(t, 0, &e), 1);
    assert_int_equal(e.nwait, 3);
    assert_int_equal(e.wait_peer[0], 1);
    assert_int_equal(e.wait_send[0], 0);
    assert_int_equal(e.wait_peer[2], 3);
    assert_int_equal(e.wait_send[2], 1);
    gs__recorder_pend(t, 1, 0, -1);
    gs__recorder_pend(t, 3, 0, -1);
    gs__recorder_pend(t, 3, 1, -1);
    assert_int_equal(gs__recorder_waiting(t, buf, sizeof(buf)), 0);
    gs__recorder_free(t);
}

static void emit_cat(void *arg, const char *line)
{
    char *out = (char *)arg;

    strncat(out, line, 4095 - strlen(out));
    strncat(out, "\n", 4095 - strlen(out));
}

static void test_recorder_dump(void **state)
{
    gs__recorder_t *t = new_trace(8, 2);
    char out[4096] = "";

    (void)state;
    record(t, 0, GS_OK);
    record(t, 1, GS_ERR_MISMATCH);
    gs__recorder_dump(t, emit_cat, out);
    assert_non_null(strstr(out, "2 operation(s)"));
    assert_non_null(strstr(out, "seq 0 allreduce(count=10, f32, sum) bytes 40 algo ring"));
    assert_non_null(strstr(out, "seq 1 allreduce(count=11, f32, sum) bytes 44 algo ring"));
    assert_non_null(strstr(out, "status GS_ERR_MISMATCH"));
    gs__recorder_free(t);
}

static void test_fingerprint(void **state)
{
    gs__coll_desc_t a;
    gs__coll_desc_t b;

    (void)state;
    memset(&a, 0, sizeof(a));
    a.kind = GS_COLL_ALLREDUCE;
    a.count = 1000;
    a.dtype = GS_DTYPE_F32;
    a.op = GS_OP_SUM;
    b = a;
    b.root = 3; /* not a rooted collective: ignored */
    assert_int_equal(gs__algo_fingerprint(&a), gs__algo_fingerprint(&b));
    b.count = 1001;
    assert_int_not_equal(gs__algo_fingerprint(&a), gs__algo_fingerprint(&b));
    b = a;
    b.dtype = GS_DTYPE_F64;
    assert_int_not_equal(gs__algo_fingerprint(&a), gs__algo_fingerprint(&b));
    b = a;
    b.kind = GS_COLL_BROADCAST;
    assert_int_not_equal(gs__algo_fingerprint(&a), gs__algo_fingerprint(&b));
    a.kind = GS_COLL_ALLGATHERV; /* a v call: counts differ between ranks */
    b = a;
    b.count = 7;
    assert_int_equal(gs__algo_fingerprint(&a), gs__algo_fingerprint(&b));
    assert_true(gs__algo_fingerprint(&a) < 0x8000u);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static void test_diag_decode(void **state)
{
    uint8_t m[48];
    char words[128];
    char why[128];

    (void)state;
    memset(m, 0, sizeof(m));
    put32(m + 0, 0x47534447u);
    put32(m + 4, 1u | (1u << 16)); /* version 1, REPORT */
    put32(m + 8, 1);               /* from */
    put32(m + 12, 0);              /* blamed */
    put32(m + 16, 57);
    m[24] = 1; /* known */
    m[25] = GS_COLL_BROADCAST;
    m[26] = GS_DTYPE_F32;
    put32(m + 28, 0); /* root */
    put32(m + 40, 1000);
    assert_int_equal(gs__algo_diag_decode(m, sizeof(m), 2, words, sizeof(words), why, sizeof(why)),
                     GS_OK);
    assert_string_equal(words, "broadcast(count=1000, f32, root 0)");
    assert_int_equal(
        gs__algo_diag_decode(m, sizeof(m) - 1, 2, words, sizeof(words), why, sizeof(why)),
        GS_ERR_PROTOCOL);
    assert_int_equal(gs__algo_diag_decode(m, sizeof(m), 1, words, sizeof(words), why, sizeof(why)),
                     GS_ERR_PROTOCOL); /* sender rank 1 in a job of 1 */
    m[25] = 200;
    assert_int_equal(gs__algo_diag_decode(m, sizeof(m), 2, words, sizeof(words), why, sizeof(why)),
                     GS_ERR_PROTOCOL);
    m[25] = GS_COLL_BROADCAST;
    m[0] ^= 1;
    assert_int_equal(gs__algo_diag_decode(m, sizeof(m), 2, words, sizeof(words), why, sizeof(why)),
                     GS_ERR_PROTOCOL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recorder_ring_and_find),
        cmocka_unit_test(test_recorder_waiting),
        cmocka_unit_test(test_recorder_dump),
        cmocka_unit_test(test_fingerprint),
        cmocka_unit_test(test_diag_decode),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
