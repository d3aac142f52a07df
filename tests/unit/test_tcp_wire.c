/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the TCP wire format: frame header and handshake round
 * trips, exact byte layout (little-endian, offsets of docs/wire.md), and
 * rejection of every malformed header (DOWN frames included) and mismatched
 * handshake.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "transport/tcp/tcp_wire.h"

static gs__tcp_frame_hdr_t data_hdr(uint64_t total, uint64_t off, uint64_t chunk)
{
    gs__tcp_frame_hdr_t h = {.type = GS_TCP_FRAME_DATA,
                             .seq = 0x0102030405060708ull,
                             .tag = 0x8000123456789abcull,
                             .total_len = total,
                             .offset = off,
                             .chunk_len = chunk};
    return h;
}

static gs_status_t decode(const uint8_t *buf, gs__tcp_frame_hdr_t *out)
{
    char why[160];

    return gs__tcp_frame_decode(buf, GS_TCP_FRAME_HDR_LEN, out, why, sizeof(why));
}

static void test_tcp_wire_frame_roundtrip(void **state)
{
    static const uint64_t totals[] = {0, 1, 65536, 1ull << 32, GS_TCP_MAX_MSG};
    uint8_t buf[GS_TCP_FRAME_HDR_LEN];

    (void)state;
    for (size_t i = 0; i < sizeof(totals) / sizeof(totals[0]); i++) {
        uint64_t total = totals[i];
        uint64_t off = total / 3;
        gs__tcp_frame_hdr_t in = data_hdr(total, off, total - off);
        gs__tcp_frame_hdr_t out;

        memset(&out, 0, sizeof(out));
        gs__tcp_frame_encode(&in, buf);
        assert_int_equal(decode(buf, &out), GS_OK);
        assert_int_equal(out.type, in.type);
        assert_true(out.seq == in.seq);
        assert_true(out.tag == in.tag);
        assert_true(out.total_len == in.total_len);
        assert_true(out.offset == in.offset);
        assert_true(out.chunk_len == in.chunk_len);
    }
}

static void test_tcp_wire_frame_layout_is_little_endian(void **state)
{
    gs__tcp_frame_hdr_t in = data_hdr(0x1122, 0x11, 0x22);
    uint8_t buf[GS_TCP_FRAME_HDR_LEN];

    (void)state;
    gs__tcp_frame_encode(&in, buf);
    assert_memory_equal(buf, "GSFR", 4);
    assert_int_equal(buf[4], GS_TCP_FRAME_DATA);
    assert_int_equal(buf[5], 0);
    assert_int_equal(buf[8], 0x08); /* seq, low byte first */
    assert_int_equal(buf[15], 0x01);
    assert_int_equal(buf[16], 0xbc); /* tag */
    assert_int_equal(buf[23], 0x80);
    assert_int_equal(buf[24], 0x22); /* total */
    assert_int_equal(buf[25], 0x11);
    assert_int_equal(buf[32], 0x11); /* offset */
    assert_int_equal(buf[40], 0x22); /* chunk length */
    assert_int_equal(buf[47], 0x00);
}

static void test_tcp_wire_frame_rejects_malformed(void **state)
{
    uint8_t buf[GS_TCP_FRAME_HDR_LEN];
    gs__tcp_frame_hdr_t h;
    gs__tcp_frame_hdr_t out;
    char why[160];

    (void)state;
    /* Short input. */
    h = data_hdr(10, 0, 10);
    gs__tcp_frame_encode(&h, buf);
    assert_int_equal(gs__tcp_frame_decode(buf, GS_TCP_FRAME_HDR_LEN - 1, &out, why, sizeof(why)),
                     GS_ERR_PROTOCOL);
    /* Bad magic. */
    buf[0] ^= 0xff;
    assert_int_equal(decode(buf, &out), GS_ERR_PROTOCOL);
    /* Unknown types. */
    for (unsigned t = 0; t < 256; t++) {
        if ((t == GS_TCP_FRAME_DATA) || (t == GS_TCP_FRAME_BYE) || (t == GS_TCP_FRAME_SKIP) ||
            (t == GS_TCP_FRAME_DOWN)) {
            continue;
        }
        gs__tcp_frame_encode(&h, buf);
        buf[4] = (uint8_t)t;
        assert_int_equal(decode(buf, &out), GS_ERR_PROTOCOL);
    }
    /* Reserved bytes, and flags: only RESEND, and only on DATA. */
    gs__tcp_frame_encode(&h, buf);
    buf[5] = 2;
    assert_int_equal(decode(buf, &out), GS_ERR_PROTOCOL);
    gs__tcp_frame_encode(&h, buf);
    gs__tcp_frame_mark_resend(buf);
    assert_int_equal(decode(buf, &out), GS_OK);
    assert_int_equal(out.flags, GS_TCP_FRAME_F_RESEND);
    {
        gs__tcp_frame_hdr_t bye = {.type = GS_TCP_FRAME_BYE};

        gs__tcp_frame_encode(&bye, buf);
        buf[5] = GS_TCP_FRAME_F_RESEND;
        assert_int_equal(decode(buf, &out), GS_ERR_PROTOCOL);
    }
    /* REVOKE (protocol 9): a rank in the tag, every other field zero. */
    {
        gs__tcp_frame_hdr_t rv = {.type = GS_TCP_FRAME_REVOKE, .tag = 3};

        gs__tcp_frame_encode(&rv, buf);
        assert_int_equal(buf[4], 7);
        assert_int_equal(decode(buf, &out), GS_OK);
        assert_true((out.type == GS_TCP_FRAME_REVOKE) && (out.tag == 3));
        rv.tag = (uint64_t)INT32_MAX + 1u;
        gs__tcp_frame_encode(&rv, buf);
        assert_int_equal(gs__tcp_frame_decode(buf, sizeof(buf), &out, why, sizeof(why)),
                         GS_ERR_PROTOCOL);
        assert_non_null(strstr(why, "revoke frame names rank"));
        rv.tag = 1;
        rv.total_len = 8;
        gs__tcp_frame_encode(&rv, buf);
        assert_int_equal(gs__tcp_frame_decode(buf, sizeof(buf), &out, why, sizeof(why)),
                         GS_ERR_PROTOCOL);
        assert_non_null(strstr(why, "revoke frame with non-zero fields"));
    }
    /* RAIL_DOWN: a rail below GS_TCP_MAX_SOCKS, every other field zero. */
    {
        gs__tcp_frame_hdr_t rd = {.type = GS_TCP_FRAME_RAIL_DOWN, .tag = 1};

        gs__tcp_frame_encode(&rd, buf);
        assert_int_equal(decode(buf, &out), GS_OK);
        assert_int_equal(out.tag, 1);
        rd.tag = GS_TCP_MAX_SOCKS;
        gs__tcp_frame_encode(&rd, buf);
        assert_int_equal(decode(buf, &out), GS_ERR_PROTOCOL);
        rd.tag = 0;
        rd.seq = 3;
        gs__tcp_frame_encode(&rd, buf);
        assert_int_equal(decode(buf, &out), GS_ERR_PROTOCOL);
    }
    gs__tcp_frame_encode(&h, buf);
    buf[7] = 1;
    assert_int_equal(decode(buf, &out), GS_ERR_PROTOCOL);
    /* Total above the limit. */
    h = data_hdr(GS_TCP_MAX_MSG + 1, 0, 1);
    gs__tcp_frame_encode(&h, buf);
    assert_int_equal(decode(buf, &out), GS_ERR_PROTOCOL);
    h = data_hdr(UINT64_MAX, 0, 1);
    gs__tcp_frame_encode(&h, buf);
    assert_int_equal(decode(buf, &out), GS_ERR_PROTOCOL);
    /* Chunk beyond the total. */
    h = data_hdr(100, 50, 51);
    gs__tcp_frame_encode(&h, buf);
    assert_int_equal(decode(buf, &out), GS_ERR_PROTOCOL);
    h = data_hdr(100, 101, 0);
    gs__tcp_frame_encode(&h, buf);
    assert_int_equal(decode(buf, &out), GS_ERR_PROTOCOL);
    /* offset + chunk overflows 64 bits. */
    h = data_hdr(100, 50, UINT64_MAX - 10);
    gs__tcp_frame_encode(&h, buf);
    assert_int_equal(decode(buf, &out), GS_ERR_PROTOCOL);
    h = data_hdr(100, UINT64_MAX, 2);
    gs__tcp_frame_encode(&h, buf);
    assert_int_equal(decode(buf, &out), GS_ERR_PROTOCOL);
    /* Empty chunk of a non-empty message. */
    h = data_hdr(100, 10, 0);
    gs__tcp_frame_encode(&h, buf);
    assert_int_equal(decode(buf, &out), GS_ERR_PROTOCOL);
    /* An empty message is fine. */
    h = data_hdr(0, 0, 0);
    gs__tcp_frame_encode(&h, buf);
    assert_int_equal(decode(buf, &out), GS_OK);
    /* BYE and SKIP carry nothing else. */
    memset(&h, 0, sizeof(h));
    h.type = GS_TCP_FRAME_BYE;
    gs__tcp_frame_encode(&h, buf);
    assert_int_equal(decode(buf, &out), GS_OK);
    h.tag = 1;
    gs__tcp_frame_encode(&h, buf);
    assert_int_equal(decode(buf, &out), GS_ERR_PROTOCOL);
    memset(&h, 0, sizeof(h));
    h.type = GS_TCP_FRAME_SKIP;
    h.seq = 9;
    gs__tcp_frame_encode(&h, buf);
    assert_int_equal(decode(buf, &out), GS_OK);
    h.total_len = 1;
    gs__tcp_frame_encode(&h, buf);
    assert_int_equal(decode(buf, &out), GS_ERR_PROTOCOL);
}

/* DOWN: the failed rank in tag, everything else zero, tag a valid int. */
/* Protocol 5: HEARTBEAT is a control frame whose every field is zero. */
static void test_tcp_wire_heartbeat_frame(void **state)
{
    uint8_t buf[GS_TCP_FRAME_HDR_LEN];
    gs__tcp_frame_hdr_t h;
    gs__tcp_frame_hdr_t out;
    char why[160] = "";

    (void)state;
    memset(&h, 0, sizeof(h));
    h.type = GS_TCP_FRAME_HEARTBEAT;
    gs__tcp_frame_encode(&h, buf);
    assert_int_equal(buf[4], GS_TCP_FRAME_HEARTBEAT);
    assert_int_equal(decode(buf, &out), GS_OK);
    assert_int_equal(out.type, GS_TCP_FRAME_HEARTBEAT);
    assert_true((out.seq == 0) && (out.tag == 0) && (out.total_len == 0) && (out.chunk_len == 0));
    /* Any field set: not a heartbeat the receiver could trust. */
    for (int field = 0; field < 4; field++) {
        memset(&h, 0, sizeof(h));
        h.type = GS_TCP_FRAME_HEARTBEAT;
        if (field == 0) {
            h.seq = 1;
        } else if (field == 1) {
            h.tag = 7;
        } else if (field == 2) {
            h.total_len = 8;
        } else {
            h.chunk_len = 8;
            h.total_len = 8;
        }
        gs__tcp_frame_encode(&h, buf);
        assert_int_equal(gs__tcp_frame_decode(buf, sizeof(buf), &out, why, sizeof(why)),
                         GS_ERR_PROTOCOL);
    }
}

static void test_tcp_wire_down_frame(void **state)
{
    uint8_t buf[GS_TCP_FRAME_HDR_LEN];
    gs__tcp_frame_hdr_t h;
    gs__tcp_frame_hdr_t out;
    char why[160] = "";

    (void)state;
    memset(&h, 0, sizeof(h));
    h.type = GS_TCP_FRAME_DOWN;
    h.tag = 5;
    gs__tcp_frame_encode(&h, buf);
    assert_int_equal(buf[4], 4);
    assert_int_equal(buf[16], 5);
    assert_int_equal(decode(buf, &out), GS_OK);
    assert_int_equal(out.type, GS_TCP_FRAME_DOWN);
    assert_true((out.tag == 5) && (out.seq == 0) && (out.total_len == 0) && (out.offset == 0) &&
                (out.chunk_len == 0));
    h.tag = 0; /* rank 0 is a rank */
    gs__tcp_frame_encode(&h, buf);
    assert_int_equal(decode(buf, &out), GS_OK);
    h.tag = INT32_MAX;
    gs__tcp_frame_encode(&h, buf);
    assert_int_equal(decode(buf, &out), GS_OK);
    /* Not a rank. */
    h.tag = (uint64_t)INT32_MAX + 1u;
    gs__tcp_frame_encode(&h, buf);
    assert_int_equal(gs__tcp_frame_decode(buf, sizeof(buf), &out, why, sizeof(why)),
                     GS_ERR_PROTOCOL);
    assert_non_null(strstr(why, "down frame names rank"));
    h.tag = UINT64_MAX;
    gs__tcp_frame_encode(&h, buf);
    assert_int_equal(decode(buf, &out), GS_ERR_PROTOCOL);
    /* Every other field must be zero. */
    for (int field = 0; field < 4; field++) {
        memset(&h, 0, sizeof(h));
        h.type = GS_TCP_FRAME_DOWN;
        h.tag = 1;
        h.seq = (field == 0) ? 1u : 0u;
        h.total_len = (field == 1) ? 8u : 0u;
        h.offset = (field == 2) ? 1u : 0u;
        h.chunk_len = (field == 3) ? 8u : 0u;
        gs__tcp_frame_encode(&h, buf);
        assert_int_equal(gs__tcp_frame_decode(buf, sizeof(buf), &out, why, sizeof(why)),
                         GS_ERR_PROTOCOL);
        assert_non_null(strstr(why, "down frame with non-zero fields"));
    }
}

static void test_tcp_wire_frame_decode_writes_reason(void **state)
{
    uint8_t buf[GS_TCP_FRAME_HDR_LEN];
    gs__tcp_frame_hdr_t h = data_hdr(100, 90, 20);
    gs__tcp_frame_hdr_t out;
    char why[160] = "";

    (void)state;
    gs__tcp_frame_encode(&h, buf);
    assert_int_equal(gs__tcp_frame_decode(buf, sizeof(buf), &out, why, sizeof(why)),
                     GS_ERR_PROTOCOL);
    assert_non_null(strstr(why, "outside a message of 100 bytes"));
    /* NULL reason buffer is allowed. */
    assert_int_equal(gs__tcp_frame_decode(buf, sizeof(buf), &out, NULL, 0), GS_ERR_PROTOCOL);
}

static gs__tcp_hs_t good_hello(void)
{
    gs__tcp_hs_t hs = {.version = GS_TCP_PROTO_VERSION,
                       .kind = GS_TCP_HS_HELLO,
                       .verdict = GS_TCP_HS_OK,
                       .job_id = 0xabcdef0123456789ull,
                       .comm_id = 42,
                       .rank = 3,
                       .size = 4,
                       .index = 1,
                       .nsocks = 2};
    return hs;
}

static const gs__tcp_hs_expect_t expect = {.job_id = 0xabcdef0123456789ull,
                                           .comm_id = 42,
                                           .size = 4,
                                           .nsocks = 2,
                                           .rank_lo = 1,
                                           .rank_hi = 3};

static void test_tcp_wire_handshake_roundtrip(void **state)
{
    gs__tcp_hs_t in = good_hello();
    gs__tcp_hs_t out;
    uint8_t buf[GS_TCP_HS_LEN];
    char why[160];

    (void)state;
    gs__tcp_hs_encode(&in, buf);
    assert_memory_equal(buf, "GSHS", 4);
    assert_int_equal(buf[8], 0x89); /* job id, little-endian */
    assert_int_equal(buf[24], 3);   /* rank */
    assert_int_equal(gs__tcp_hs_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_OK);
    assert_int_equal(out.version, in.version);
    assert_int_equal(out.kind, in.kind);
    assert_int_equal(out.verdict, in.verdict);
    assert_true(out.job_id == in.job_id);
    assert_true(out.comm_id == in.comm_id);
    assert_int_equal(out.rank, in.rank);
    assert_int_equal(out.size, in.size);
    assert_int_equal(out.index, in.index);
    assert_int_equal(out.nsocks, in.nsocks);
    assert_int_equal(gs__tcp_hs_check(&out, &expect, why, sizeof(why)), GS_TCP_HS_OK);
    in.kind = GS_TCP_HS_ACK;
    in.verdict = GS_TCP_HS_DUPLICATE;
    gs__tcp_hs_encode(&in, buf);
    assert_int_equal(gs__tcp_hs_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_OK);
    assert_int_equal(out.verdict, GS_TCP_HS_DUPLICATE);
}

static void test_tcp_wire_handshake_rejects_malformed(void **state)
{
    gs__tcp_hs_t in = good_hello();
    gs__tcp_hs_t out;
    uint8_t buf[GS_TCP_HS_LEN];
    char why[160];

    (void)state;
    gs__tcp_hs_encode(&in, buf);
    assert_int_equal(gs__tcp_hs_decode(buf, sizeof(buf) - 1, &out, why, sizeof(why)),
                     GS_ERR_PROTOCOL);
    buf[1] = 'X';
    assert_int_equal(gs__tcp_hs_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_ERR_PROTOCOL);
    gs__tcp_hs_encode(&in, buf);
    buf[6] = 7; /* kind */
    assert_int_equal(gs__tcp_hs_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_ERR_PROTOCOL);
    gs__tcp_hs_encode(&in, buf);
    buf[7] = 1; /* a HELLO with a verdict */
    assert_int_equal(gs__tcp_hs_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_ERR_PROTOCOL);
    gs__tcp_hs_encode(&in, buf);
    buf[39] = 1; /* reserved */
    assert_int_equal(gs__tcp_hs_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_ERR_PROTOCOL);
    in.version = GS_TCP_PROTO_VERSION + 1;
    gs__tcp_hs_encode(&in, buf);
    assert_int_equal(gs__tcp_hs_decode(buf, sizeof(buf), &out, why, sizeof(why)),
                     GS_ERR_VERSION_MISMATCH);
    assert_int_equal(out.version, GS_TCP_PROTO_VERSION + 1);
    assert_non_null(strstr(why, "version"));
}

/* Protocol 4: the nonce and MAC travel intact, PROOF is a kind, the AUTH
 * verdicts are verdicts, and the reserved tail must be zero. */
static void test_tcp_wire_handshake_auth_fields(void **state)
{
    gs__tcp_hs_t in = good_hello();
    gs__tcp_hs_t out;
    uint8_t buf[GS_TCP_HS_LEN];
    char why[160];

    (void)state;
    in.flags = GS_TCP_HS_F_AUTH;
    for (int i = 0; i < 16; i++) {
        in.nonce[i] = (uint8_t)(0xa0 + i);
    }
    for (int i = 0; i < 32; i++) {
        in.mac[i] = (uint8_t)(0x30 + i);
    }
    gs__tcp_hs_encode(&in, buf);
    assert_int_equal(buf[40], 0xa0);
    assert_int_equal(buf[56], 0x30);
    assert_int_equal(gs__tcp_hs_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_OK);
    assert_memory_equal(out.nonce, in.nonce, sizeof(in.nonce));
    assert_memory_equal(out.mac, in.mac, sizeof(in.mac));
    assert_int_equal(out.flags, GS_TCP_HS_F_AUTH);
    in.kind = GS_TCP_HS_PROOF;
    gs__tcp_hs_encode(&in, buf);
    assert_int_equal(gs__tcp_hs_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_OK);
    assert_int_equal(out.kind, GS_TCP_HS_PROOF);
    buf[7] = GS_TCP_HS_AUTH_REQUIRED; /* a PROOF with a verdict */
    assert_int_equal(gs__tcp_hs_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_ERR_PROTOCOL);
    in.kind = GS_TCP_HS_ACK;
    for (uint32_t v = GS_TCP_HS_AUTH_REQUIRED; v <= GS_TCP_HS_AUTH_UNEXPECTED; v++) {
        in.verdict = v;
        gs__tcp_hs_encode(&in, buf);
        assert_int_equal(gs__tcp_hs_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_OK);
        assert_int_equal(out.verdict, v);
        assert_non_null(strstr(gs__tcp_hs_verdict_str(v), "GS_AUTH_TOKEN"));
    }
    in.verdict = GS_TCP_HS_VERDICT_MAX + 1;
    gs__tcp_hs_encode(&in, buf);
    assert_int_equal(gs__tcp_hs_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_ERR_PROTOCOL);
    in.verdict = GS_TCP_HS_OK;
    gs__tcp_hs_encode(&in, buf);
    buf[GS_TCP_HS_LEN - 1] = 1; /* reserved tail */
    assert_int_equal(gs__tcp_hs_decode(buf, sizeof(buf), &out, why, sizeof(why)), GS_ERR_PROTOCOL);
    assert_non_null(strstr(why, "reserved"));
}

static void test_tcp_wire_handshake_check_mismatches(void **state)
{
    gs__tcp_hs_t hs;
    char why[160];

    (void)state;
    hs = good_hello();
    hs.job_id ^= 1;
    assert_int_equal(gs__tcp_hs_check(&hs, &expect, why, sizeof(why)), GS_TCP_HS_BAD_JOB);
    hs = good_hello();
    hs.comm_id = 43;
    assert_int_equal(gs__tcp_hs_check(&hs, &expect, why, sizeof(why)), GS_TCP_HS_BAD_JOB);
    hs = good_hello();
    hs.size = 5;
    assert_int_equal(gs__tcp_hs_check(&hs, &expect, why, sizeof(why)), GS_TCP_HS_BAD_RANK);
    hs = good_hello();
    hs.rank = 0; /* below rank_lo */
    assert_int_equal(gs__tcp_hs_check(&hs, &expect, why, sizeof(why)), GS_TCP_HS_BAD_RANK);
    hs.rank = 4; /* == size */
    assert_int_equal(gs__tcp_hs_check(&hs, &expect, why, sizeof(why)), GS_TCP_HS_BAD_RANK);
    hs.rank = 0xffffffffu;
    assert_int_equal(gs__tcp_hs_check(&hs, &expect, why, sizeof(why)), GS_TCP_HS_BAD_RANK);
    hs = good_hello();
    hs.nsocks = 3;
    assert_int_equal(gs__tcp_hs_check(&hs, &expect, why, sizeof(why)), GS_TCP_HS_BAD_RANK);
    hs = good_hello();
    hs.index = 2; /* == nsocks */
    assert_int_equal(gs__tcp_hs_check(&hs, &expect, why, sizeof(why)), GS_TCP_HS_BAD_RANK);
    assert_non_null(strstr(why, "socket index 2"));
    hs = good_hello();
    hs.version = GS_TCP_PROTO_VERSION + 1;
    assert_int_equal(gs__tcp_hs_check(&hs, &expect, why, sizeof(why)), GS_TCP_HS_BAD_VERSION);
    for (uint32_t v = 0; v <= GS_TCP_HS_VERDICT_MAX + 1; v++) {
        assert_non_null(gs__tcp_hs_verdict_str(v));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_wire_frame_roundtrip),
        cmocka_unit_test(test_tcp_wire_frame_layout_is_little_endian),
        cmocka_unit_test(test_tcp_wire_frame_rejects_malformed),
        cmocka_unit_test(test_tcp_wire_down_frame),
        cmocka_unit_test(test_tcp_wire_heartbeat_frame),
        cmocka_unit_test(test_tcp_wire_frame_decode_writes_reason),
        cmocka_unit_test(test_tcp_wire_handshake_roundtrip),
        cmocka_unit_test(test_tcp_wire_handshake_rejects_malformed),
        cmocka_unit_test(test_tcp_wire_handshake_auth_fields),
        cmocka_unit_test(test_tcp_wire_handshake_check_mismatches),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
