/* SPDX-License-Identifier: Apache-2.0 */
/* Rendezvous wire format: round trips and rejection of malformed bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/bootstrap.h"
#include "gradsync/gradsync.h"

static gs__boot_hello_t sample_hello(void)
{
    gs__boot_hello_t h = {.version = GS_BOOT_VERSION,
                          .job_hash = 0x1122334455667788ull,
                          .rank = 3,
                          .world = 8,
                          .host_id = 0xabcdefull,
                          .addr_len = 15};
    return h;
}

static void test_bootstrap_hello_roundtrip(void **state)
{
    uint8_t buf[GS_BOOT_HELLO_BYTES];
    gs__boot_hello_t in = sample_hello();
    gs__boot_hello_t out;

    (void)state;
    gs__boot_hello_encode(&in, buf);
    assert_int_equal(buf[0], 'G'); /* little-endian magic "GSBH" */
    assert_int_equal(buf[3], 'H');
    assert_int_equal(gs__boot_hello_decode(buf, sizeof(buf), &out), GS_OK);
    assert_int_equal(out.rank, 3);
    assert_int_equal(out.world, 8);
    assert_true(out.job_hash == in.job_hash);
    assert_true(out.host_id == in.host_id);
    assert_int_equal(out.addr_len, 15);
}

static void test_bootstrap_hello_rejects_malformed(void **state)
{
    uint8_t buf[GS_BOOT_HELLO_BYTES];
    gs__boot_hello_t h = sample_hello();
    gs__boot_hello_t out;

    (void)state;
    gs__boot_hello_encode(&h, buf);
    assert_int_equal(gs__boot_hello_decode(buf, 10, &out), GS_ERR_PROTOCOL);

    buf[0] ^= 0xff; /* bad magic */
    assert_int_equal(gs__boot_hello_decode(buf, sizeof(buf), &out), GS_ERR_PROTOCOL);
    assert_non_null(strstr(gs_last_error(), "magic"));

    h.version = 99; /* another protocol version */
    gs__boot_hello_encode(&h, buf);
    assert_int_equal(gs__boot_hello_decode(buf, sizeof(buf), &out), GS_ERR_VERSION_MISMATCH);

    h = sample_hello();
    h.addr_len = GS_SOCK_ADDR_MAX; /* would overflow the address buffer */
    gs__boot_hello_encode(&h, buf);
    assert_int_equal(gs__boot_hello_decode(buf, sizeof(buf), &out), GS_ERR_PROTOCOL);

    h = sample_hello();
    h.addr_len = 0;
    gs__boot_hello_encode(&h, buf);
    assert_int_equal(gs__boot_hello_decode(buf, sizeof(buf), &out), GS_ERR_PROTOCOL);

    h = sample_hello();
    h.rank = 8; /* rank >= world */
    gs__boot_hello_encode(&h, buf);
    assert_int_equal(gs__boot_hello_decode(buf, sizeof(buf), &out), GS_ERR_PROTOCOL);

    h = sample_hello();
    h.world = 0;
    h.rank = 0;
    gs__boot_hello_encode(&h, buf);
    assert_int_equal(gs__boot_hello_decode(buf, sizeof(buf), &out), GS_ERR_PROTOCOL);

    h = sample_hello();
    h.host_id = 0; /* gs__host_id never gives 0 */
    gs__boot_hello_encode(&h, buf);
    assert_int_equal(gs__boot_hello_decode(buf, sizeof(buf), &out), GS_ERR_PROTOCOL);
    assert_non_null(strstr(gs_last_error(), "host id"));

    h = sample_hello();
    h.version = 1; /* protocol 1 tables carried no host ids */
    gs__boot_hello_encode(&h, buf);
    assert_int_equal(gs__boot_hello_decode(buf, sizeof(buf), &out), GS_ERR_VERSION_MISMATCH);
}

static void test_bootstrap_entry_roundtrip_and_rejects(void **state)
{
    uint8_t buf[GS_BOOT_ENTRY_BYTES];
    uint32_t alen = 0;
    uint64_t host = 0;

    (void)state;
    gs__boot_entry_encode(17, 0x0102030405060708ull, buf);
    assert_int_equal(buf[0], 17); /* little endian: length first, then the id */
    assert_int_equal(buf[4], 0x08);
    assert_int_equal(gs__boot_entry_decode(buf, sizeof(buf), &alen, &host), GS_OK);
    assert_int_equal(alen, 17);
    assert_true(host == 0x0102030405060708ull);

    assert_int_equal(gs__boot_entry_decode(buf, GS_BOOT_ENTRY_BYTES - 1, &alen, &host),
                     GS_ERR_PROTOCOL);
    alen = 99;
    gs__boot_entry_encode(GS_SOCK_ADDR_MAX, 5, buf); /* would overflow the address buffer */
    assert_int_equal(gs__boot_entry_decode(buf, sizeof(buf), &alen, &host), GS_ERR_PROTOCOL);
    assert_int_equal(alen, 99); /* outputs written only on success */
    gs__boot_entry_encode(0, 5, buf);
    assert_int_equal(gs__boot_entry_decode(buf, sizeof(buf), &alen, &host), GS_ERR_PROTOCOL);
    gs__boot_entry_encode(12, 0, buf);
    assert_int_equal(gs__boot_entry_decode(buf, sizeof(buf), &alen, &host), GS_ERR_PROTOCOL);
    assert_non_null(strstr(gs_last_error(), "host id"));
}

static void test_bootstrap_table_roundtrip_and_rejects(void **state)
{
    uint8_t buf[GS_BOOT_TABLE_HDR_BYTES];
    gs__boot_table_hdr_t in = {.status = GS_OK, .nonce = 42, .world = 4, .msg_len = 0};
    gs__boot_table_hdr_t out;

    (void)state;
    gs__boot_table_hdr_encode(&in, buf);
    assert_int_equal(gs__boot_table_hdr_decode(buf, sizeof(buf), &out), GS_OK);
    assert_int_equal(out.world, 4);
    assert_true(out.nonce == 42);

    in.status = GS_ERR_MISMATCH;
    in.msg_len = 20;
    gs__boot_table_hdr_encode(&in, buf);
    assert_int_equal(gs__boot_table_hdr_decode(buf, sizeof(buf), &out), GS_OK);
    assert_int_equal(out.status, GS_ERR_MISMATCH);

    in.msg_len = GS_BOOT_MSG_MAX; /* longer than the receiver's buffer */
    gs__boot_table_hdr_encode(&in, buf);
    assert_int_equal(gs__boot_table_hdr_decode(buf, sizeof(buf), &out), GS_ERR_PROTOCOL);

    in.status = 7; /* not an error, not OK */
    in.msg_len = 0;
    gs__boot_table_hdr_encode(&in, buf);
    assert_int_equal(gs__boot_table_hdr_decode(buf, sizeof(buf), &out), GS_ERR_PROTOCOL);

    in.status = GS_OK;
    in.msg_len = GS_BOOT_REPLY_RING; /* success: the mode (the ring) */
    gs__boot_table_hdr_encode(&in, buf);
    assert_int_equal(gs__boot_table_hdr_decode(buf, sizeof(buf), &out), GS_OK);
    assert_int_equal(out.msg_len, GS_BOOT_REPLY_RING);

    in.msg_len = 3; /* success carries no message: no such mode */
    gs__boot_table_hdr_encode(&in, buf);
    assert_int_equal(gs__boot_table_hdr_decode(buf, sizeof(buf), &out), GS_ERR_PROTOCOL);

    in.msg_len = 0;
    gs__boot_table_hdr_encode(&in, buf);
    buf[1] ^= 1;
    assert_int_equal(gs__boot_table_hdr_decode(buf, sizeof(buf), &out), GS_ERR_PROTOCOL);
    assert_int_equal(gs__boot_table_hdr_decode(buf, 5, &out), GS_ERR_PROTOCOL);
}

/* Version 4: the hello's ring port, the ring's hello and rows (a DOWN row is the caller's). */
static void test_bootstrap_ring_records(void **state)
{
    uint8_t buf[GS_BOOT_HELLO_BYTES];
    uint8_t hb[GS_BOOT_RING_HELLO_BYTES];
    uint8_t row[GS_BOOT_ROW_BYTES];
    gs__boot_hello_t h = sample_hello();
    gs__boot_hello_t out;
    gs__boot_ring_hello_t rh = {.job_hash = 7, .nonce = 0x1234, .rank = 5, .world = 9};
    gs__boot_ring_hello_t rout;
    uint32_t rank;
    uint32_t alen;
    uint64_t host;

    (void)state;
    h.ring_port = 40000;
    gs__boot_hello_encode(&h, buf);
    assert_int_equal(gs__boot_hello_decode(buf, sizeof(buf), &out), GS_OK);
    assert_int_equal(out.ring_port, 40000);
    h.ring_port = 70000; /* not a port */
    gs__boot_hello_encode(&h, buf);
    assert_int_equal(gs__boot_hello_decode(buf, sizeof(buf), &out), GS_ERR_PROTOCOL);

    gs__boot_ring_hello_encode(&rh, hb);
    assert_int_equal(gs__boot_ring_hello_decode(hb, sizeof(hb), &rout), GS_OK);
    assert_true((rout.job_hash == 7) && (rout.nonce == 0x1234) && (rout.rank == 5) &&
                (rout.world == 9));
    assert_int_equal(gs__boot_ring_hello_decode(hb, sizeof(hb) - 1, &rout), GS_ERR_PROTOCOL);
    hb[4] ^= 1; /* another version */
    assert_int_equal(gs__boot_ring_hello_decode(hb, sizeof(hb), &rout), GS_ERR_PROTOCOL);
    hb[4] ^= 1;
    hb[0] ^= 1; /* another magic */
    assert_int_equal(gs__boot_ring_hello_decode(hb, sizeof(hb), &rout), GS_ERR_PROTOCOL);

    gs__boot_row_encode(6, 15, 0xabc, row);
    assert_int_equal(gs__boot_row_decode(row, sizeof(row), &rank, &alen, &host), GS_OK);
    assert_true((rank == 6) && (alen == 15) && (host == 0xabc));
    gs__boot_row_encode(6, 0, 0xabc, row); /* no address */
    assert_int_equal(gs__boot_row_decode(row, sizeof(row), &rank, &alen, &host), GS_ERR_PROTOCOL);
    gs__boot_row_encode(6, GS_SOCK_ADDR_MAX, 0xabc, row); /* too long */
    assert_int_equal(gs__boot_row_decode(row, sizeof(row), &rank, &alen, &host), GS_ERR_PROTOCOL);
    gs__boot_row_encode(6, 15, 0, row); /* host id 0 */
    assert_int_equal(gs__boot_row_decode(row, sizeof(row), &rank, &alen, &host), GS_ERR_PROTOCOL);
    assert_int_equal(gs__boot_row_decode(row, 8, &rank, &alen, &host), GS_ERR_PROTOCOL);
}

/* Version 3: the hello's AUTH flag and nonce, and the AUTH and PROOF records. */
static void test_bootstrap_auth_records(void **state)
{
    uint8_t buf[GS_BOOT_HELLO_BYTES];
    uint8_t rec[GS_BOOT_AUTH_BYTES];
    uint8_t proof[GS_BOOT_PROOF_BYTES];
    uint8_t nonce[16];
    uint8_t mac[32];
    uint8_t nonce2[16];
    uint8_t mac2[32];
    gs__boot_hello_t h = sample_hello();
    gs__boot_hello_t out;

    (void)state;
    h.flags = GS_BOOT_F_AUTH;
    for (int i = 0; i < 16; i++) {
        h.nonce[i] = (uint8_t)(i + 1);
        nonce[i] = (uint8_t)(0x80 + i);
    }
    for (int i = 0; i < 32; i++) {
        mac[i] = (uint8_t)(0x40 + i);
    }
    gs__boot_hello_encode(&h, buf);
    assert_int_equal(gs__boot_hello_decode(buf, sizeof(buf), &out), GS_OK);
    assert_int_equal(out.flags, GS_BOOT_F_AUTH);
    assert_memory_equal(out.nonce, h.nonce, sizeof(h.nonce));
    h.flags = 0x80; /* unknown flag */
    gs__boot_hello_encode(&h, buf);
    assert_int_equal(gs__boot_hello_decode(buf, sizeof(buf), &out), GS_ERR_PROTOCOL);

    gs__boot_auth_encode(nonce, mac, rec);
    assert_int_equal(gs__boot_auth_decode(rec, sizeof(rec), nonce2, mac2), GS_OK);
    assert_memory_equal(nonce2, nonce, sizeof(nonce));
    assert_memory_equal(mac2, mac, sizeof(mac));
    assert_int_equal(gs__boot_auth_decode(rec, sizeof(rec) - 1, nonce2, mac2), GS_ERR_PROTOCOL);
    rec[5] = 1; /* padding */
    assert_int_equal(gs__boot_auth_decode(rec, sizeof(rec), nonce2, mac2), GS_ERR_PROTOCOL);

    gs__boot_proof_encode(mac, proof);
    assert_int_equal(gs__boot_proof_decode(proof, sizeof(proof), mac2), GS_OK);
    assert_memory_equal(mac2, mac, sizeof(mac));
    /* An AUTH record is not a PROOF, and the other way round. */
    gs__boot_auth_encode(nonce, mac, rec);
    assert_int_equal(gs__boot_proof_decode(rec, sizeof(rec), mac2), GS_ERR_PROTOCOL);
    assert_int_equal(gs__boot_auth_decode(proof, sizeof(proof), nonce2, mac2), GS_ERR_PROTOCOL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bootstrap_hello_roundtrip),
        cmocka_unit_test(test_bootstrap_hello_rejects_malformed),
        cmocka_unit_test(test_bootstrap_table_roundtrip_and_rejects),
        cmocka_unit_test(test_bootstrap_entry_roundtrip_and_rejects),
        cmocka_unit_test(test_bootstrap_auth_records),
        cmocka_unit_test(test_bootstrap_ring_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
