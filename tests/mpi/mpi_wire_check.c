/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mpi_wire_check: the MPI transport's message header (mpi_wire.c) without
 * MPI running. Every header the sender can build decodes to the same fields
 * at the receiver's expected sequence number, and every hostile or
 * inconsistent header (short, bad magic or version, unknown flags, inline
 * length that does not match the message, chunk count that does not match
 * the length, wrong sequence number, huge length) is GS_ERR_PROTOCOL with a
 * reason. Exit 0 when every case holds, 1 otherwise (each failure printed).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "transport/mpi/mpi_internal.h"

static int failures;

#define CHECK(_cond, ...)                                                                          \
    do {                                                                                           \
        if (!(_cond)) {                                                                            \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static void put_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) {
        p[i] = (unsigned char)(v >> (8 * i));
    }
}

/* Encode h (the way isend does) and decode it from a count-byte message. */
static gs_status_t roundtrip(const mpi_hdr_t *h, int count, uint32_t expect_seq, mpi_hdr_t *out,
                             char *why, size_t whylen)
{
    unsigned char buf[MPI_HDR_BYTES + MPI_INLINE_MAX];

    memset(buf, 0xa5, sizeof(buf));
    gs__mpi_hdr_encode(buf, h);
    return gs__mpi_hdr_decode(buf, count, expect_seq, out, why, whylen);
}

static void check_valid(void)
{
    static const uint64_t lens[] = {
        0, 1, 8192, 8193, (uint64_t)1 << 30, ((uint64_t)1 << 30) + 1, (uint64_t)5 << 30};
    char why[MPI_WHY_MAX];

    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        const uint64_t len = lens[i];
        const int inl = (len <= MPI_INLINE_MAX);
        mpi_hdr_t h = {.tag = 0x0123456789abcdefull ^ len,
                       .len = len,
                       .seq = inl ? 0 : 77u,
                       .nchunks = inl ? 0 : (uint32_t)gs__mpi_chunk_count((size_t)len),
                       .flags = inl ? MPI_FLAG_INLINE : 0};
        mpi_hdr_t d;
        const int count = MPI_HDR_BYTES + (inl ? (int)len : 0);
        gs_status_t st = roundtrip(&h, count, 77u, &d, why, sizeof(why));

        CHECK(st == GS_OK, "len %llu: decode failed: %s", (unsigned long long)len, why);
        if (st == GS_OK) {
            CHECK((d.tag == h.tag) && (d.len == h.len) && (d.seq == h.seq) &&
                      (d.nchunks == h.nchunks) && (d.flags == h.flags),
                  "len %llu: fields differ after the round trip", (unsigned long long)len);
        }
    }
    CHECK(gs__mpi_chunk_count(0) == 0, "0 bytes take %zu chunks", gs__mpi_chunk_count(0));
    CHECK(gs__mpi_chunk_count(MPI_CHUNK_MAX) == 1, "1 GiB takes more than one chunk");
    CHECK(gs__mpi_chunk_count(MPI_CHUNK_MAX + 1) == 2, "1 GiB + 1 does not take two chunks");
}

/* A valid 1 MiB chunked header at seq 5, then one field broken per case. */
static void check_hostile(void)
{
    const mpi_hdr_t good = {.tag = 42, .len = 1u << 20, .seq = 5, .nchunks = 1, .flags = 0};
    unsigned char buf[MPI_HDR_BYTES + MPI_INLINE_MAX];
    char why[MPI_WHY_MAX];
    mpi_hdr_t d;
    struct {
        const char *name;
        int off;   /* byte offset to overwrite, or -1 */
        int width; /* bytes */
        uint64_t value;
        int count;
        uint32_t expect_seq;
    } cases[] = {
        {"short message", -1, 0, 0, MPI_HDR_BYTES - 1, 5},
        {"empty message", -1, 0, 0, 0, 5},
        {"bad magic", 0, 4, 0x47534d50u, MPI_HDR_BYTES, 5},
        {"version 2", 4, 2, 2, MPI_HDR_BYTES, 5},
        {"unknown flag", 6, 2, 2, MPI_HDR_BYTES, 5},
        {"chunked message with a payload", -1, 0, 0, MPI_HDR_BYTES + 8, 5},
        {"chunk count too small", 28, 4, 0, MPI_HDR_BYTES, 5},
        {"chunk count too large", 28, 4, 2, MPI_HDR_BYTES, 5},
        {"wrong sequence number", -1, 0, 0, MPI_HDR_BYTES, 6},
        {"length of 2^62", 16, 8, (uint64_t)1 << 62, MPI_HDR_BYTES, 5},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gs_status_t st;

        memset(buf, 0, sizeof(buf));
        gs__mpi_hdr_encode(buf, &good);
        if (cases[i].off >= 0) {
            put_le(buf + cases[i].off, cases[i].value, cases[i].width);
        }
        why[0] = '\0';
        st = gs__mpi_hdr_decode(buf, cases[i].count, cases[i].expect_seq, &d, why, sizeof(why));
        CHECK(st == GS_ERR_PROTOCOL, "%s: decode returned %d, expected GS_ERR_PROTOCOL",
              cases[i].name, (int)st);
        CHECK(why[0] != '\0', "%s: no reason given", cases[i].name);
    }
    /* Inline headers: the payload must be exactly len bytes, len <= the limit, no chunks. */
    {
        const mpi_hdr_t inl = {
            .tag = 7, .len = 100, .seq = 0, .nchunks = 0, .flags = MPI_FLAG_INLINE};
        mpi_hdr_t big = inl;
        mpi_hdr_t chunky = inl;

        CHECK(roundtrip(&inl, MPI_HDR_BYTES + 99, 0, &d, why, sizeof(why)) == GS_ERR_PROTOCOL,
              "inline: 99 payload bytes for len 100 accepted");
        CHECK(roundtrip(&inl, MPI_HDR_BYTES + 101, 0, &d, why, sizeof(why)) == GS_ERR_PROTOCOL,
              "inline: 101 payload bytes for len 100 accepted");
        big.len = MPI_INLINE_MAX + 1;
        CHECK(roundtrip(&big, MPI_HDR_BYTES + MPI_INLINE_MAX, 0, &d, why, sizeof(why)) ==
                  GS_ERR_PROTOCOL,
              "inline: len above MPI_INLINE_MAX accepted");
        chunky.nchunks = 1;
        CHECK(roundtrip(&chunky, MPI_HDR_BYTES + 100, 0, &d, why, sizeof(why)) == GS_ERR_PROTOCOL,
              "inline: header with chunks accepted");
    }
}

int main(void)
{
    check_valid();
    check_hostile();
    if (failures != 0) {
        printf("mpi_wire_check: %d failures\n", failures);
        return 1;
    }
    printf("mpi_wire_check: OK\n");
    return 0;
}
