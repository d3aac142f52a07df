/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the pure parts of the parameter server: roles and key
 * placement (src/ps/ps_shard.c, exhaustively over small worlds), the
 * control-message wire format (ps_wire.c: round trips, every field made
 * hostile, random bytes, checks against the shard), the update rules and
 * gradient sums (ps_rule.c, against a double-precision reference), the
 * BSP / SSP predicates (ps_consistency.c, against their definitions), the
 * BSP bound on pushes of later rounds (refused only past
 * GS_PS_BSP_MAX_AHEAD, and never for simulated honest BSP loops), the
 * staging arithmetic (ps_limits.c) and the merging of queued clocks
 * (gs__ps_enqueue, on a bare handle).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "gradsync/compress.h"
#include "ps/ps_consistency.h"
#include "ps/ps_impl.h"
#include "ps/ps_limits.h"
#include "ps/ps_rule.h"
#include "ps/ps_shard.h"
#include "ps/ps_wire.h"

/* ====================================================================== */
/* Roles and placement                                                    */
/* ====================================================================== */

static void test_ps_shard_roles(void **state)
{
    (void)state;
    for (int n = 1; n <= 64; n++) {
        for (int servers = 0; servers < n; servers++) {
            gs__ps_roles_t r;
            int nw = 0;
            int ns = 0;

            assert_int_equal(gs__ps_roles_init(&r, n, servers), 0);
            for (int rank = 0; rank < n; rank++) {
                const int w = gs__ps_worker_of(&r, rank);
                const int s = gs__ps_server_of(&r, rank);

                /* Every rank has a role; dedicated servers do not work. */
                assert_true((w >= 0) || (s >= 0));
                if (servers > 0) {
                    assert_true((w >= 0) != (s >= 0));
                }
                if (w >= 0) {
                    assert_int_equal(gs__ps_worker_rank(&r, w), rank);
                    nw++;
                }
                if (s >= 0) {
                    assert_int_equal(gs__ps_server_rank(&r, s), rank);
                    ns++;
                }
            }
            assert_int_equal(nw, r.nworkers);
            assert_int_equal(ns, r.nservers);
            assert_int_equal(r.nservers, (servers == 0) ? n : servers);
            /* Servers are the last ranks. */
            if (servers > 0) {
                assert_int_equal(gs__ps_server_of(&r, n - 1), servers - 1);
                assert_int_equal(gs__ps_worker_of(&r, 0), 0);
            }
        }
        assert_int_equal(gs__ps_roles_init(&(gs__ps_roles_t){0}, n, n), -1);
        assert_int_equal(gs__ps_roles_init(&(gs__ps_roles_t){0}, n, -1), -1);
    }
    assert_int_equal(gs__ps_roles_init(&(gs__ps_roles_t){0}, 0, 0), -1);
}

static void test_ps_shard_place_ranges(void **state)
{
    static const size_t counts[] = {1, 2, 3, 5, 7, 16, 17, 63, 64, 65, 1000, 1031, 65537};
    static const uint64_t splits[] = {1, 4, 100, 4096, 1u << 20};

    (void)state;
    for (int S = 1; S <= 17; S++) {
        for (size_t si = 0; si < sizeof(splits) / sizeof(splits[0]); si++) {
            uint64_t load[17] = {0};
            uint64_t expect_load[17] = {0};
            gs__ps_placer_t p = {.nservers = S, .load = load, .split_bytes = splits[si]};

            for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
                const size_t count = counts[ci];
                const size_t es = 4;
                gs__ps_range_t out[17];
                const size_t want_k = gs__ps_nshards(&p, count, es);
                uint64_t before[17];
                size_t k;
                size_t off = 0;
                size_t lo = SIZE_MAX;
                size_t hi = 0;
                int used[17] = {0};
                int least = 0;

                memcpy(before, load, sizeof(before));
                for (int s = 1; s < S; s++) {
                    if (before[s] < before[least]) {
                        least = s;
                    }
                }
                k = gs__ps_place(&p, count, es, out);
                assert_int_equal(k, want_k);
                assert_true((k >= 1) && (k <= (size_t)S) && (k <= count));
                if ((S > 1) && (count > 1) && (count * es >= splits[si])) {
                    assert_int_equal(k, (count < (size_t)S) ? count : (size_t)S);
                } else {
                    assert_int_equal(k, 1);
                    assert_int_equal(out[0].server, least); /* least loaded */
                }
                for (size_t i = 0; i < k; i++) {
                    assert_int_equal(out[i].offset, off); /* contiguous */
                    assert_true(out[i].count >= 1);
                    assert_true((out[i].server >= 0) && (out[i].server < S));
                    assert_int_equal(used[out[i].server], 0); /* one range per server */
                    used[out[i].server] = 1;
                    off += out[i].count;
                    lo = (out[i].count < lo) ? out[i].count : lo;
                    hi = (out[i].count > hi) ? out[i].count : hi;
                    expect_load[out[i].server] += out[i].count * es;
                }
                assert_int_equal(off, count); /* covers the key */
                assert_true(hi - lo <= 1);    /* balanced */
                for (int s = 0; s < S; s++) {
                    assert_int_equal(load[s], expect_load[s]);
                }
            }
        }
    }
}

static void test_ps_shard_no_hot_spot(void **state)
{
    (void)state;
    /* Many small keys and a few split ones spread evenly. */
    for (int S = 2; S <= 9; S++) {
        uint64_t load[9] = {0};
        gs__ps_placer_t p = {.nservers = S, .load = load, .split_bytes = 1u << 16};
        gs__ps_range_t out[9];
        uint64_t mx = 0;
        uint64_t mn = UINT64_MAX;

        for (int i = 0; i < 1000; i++) {
            (void)gs__ps_place(&p, 100 + (size_t)(i % 7), 4, out);
        }
        for (int i = 0; i < 10; i++) {
            (void)gs__ps_place(&p, 1000003, 4, out);
        }
        for (int s = 0; s < S; s++) {
            mx = (load[s] > mx) ? load[s] : mx;
            mn = (load[s] < mn) ? load[s] : mn;
        }
        assert_true(mx - mn <= 2 * 4 * 106); /* within two small keys */
    }
}

/* ====================================================================== */
/* Wire                                                                   */
/* ====================================================================== */

static gs__ps_msg_t sample(uint8_t type)
{
    gs__ps_msg_t m;

    memset(&m, 0, sizeof(m));
    m.type = type;
    m.src = 3;
    if ((type == GS_PS_MSG_HEARTBEAT) || (type == GS_PS_MSG_BYE)) {
        return m;
    }
    if (type == GS_PS_MSG_CLOCK) {
        m.clock = 17;
        return m;
    }
    m.dtype = GS_DTYPE_F32;
    m.seq = 0x0abcdef1u;
    m.key = 0x1122334455667788ull;
    m.shard = 2;
    m.offset = 1000;
    m.count = 500;
    m.nbytes = 2000;
    m.clock = 42;
    if (type == GS_PS_MSG_PULL) {
        m.flags = GS_PS_MSGF_PUSHED;
    }
    if (type == GS_PS_MSG_REPLY) {
        m.status = GS_ERR_TIMEOUT;
        strcpy(m.text, "worker ranks 1, 2 are slow");
    }
    return m;
}

static void test_ps_wire_roundtrip(void **state)
{
    (void)state;
    for (uint8_t t = GS_PS_MSG_PUSH; t <= GS_PS_MSG_CTS; t++) {
        gs__ps_msg_t m = sample(t);
        gs__ps_msg_t d;
        uint8_t buf[GS_PS_MSG_BYTES];
        char why[200];

        gs__ps_msg_encode(&m, buf);
        assert_int_equal(gs__ps_msg_decode(buf, sizeof(buf), 8, &d, why, sizeof(why)), GS_OK);
        assert_int_equal(d.type, m.type);
        assert_int_equal(d.src, m.src);
        assert_int_equal(d.seq, m.seq);
        assert_true(d.key == m.key);
        assert_int_equal(d.shard, m.shard);
        assert_int_equal(d.status, m.status);
        assert_true(d.offset == m.offset);
        assert_true(d.count == m.count);
        assert_true(d.nbytes == m.nbytes);
        assert_true(d.clock == m.clock);
        assert_int_equal(d.flags, m.flags);
        assert_string_equal(d.text, m.text);
        /* Little-endian, byte by byte: the magic is "GSPS". */
        assert_memory_equal(buf, "GSPS", 4);
    }
}

static gs_status_t decode_mutated(const gs__ps_msg_t *m, size_t at, uint8_t v, int nranks,
                                  gs__ps_msg_t *d)
{
    uint8_t buf[GS_PS_MSG_BYTES];
    char why[200];

    gs__ps_msg_encode(m, buf);
    buf[at] = v;
    why[0] = '\0';
    {
        const gs_status_t s = gs__ps_msg_decode(buf, sizeof(buf), nranks, d, why, sizeof(why));

        if (s != GS_OK) {
            assert_int_equal(s, GS_ERR_PROTOCOL);
            assert_true(why[0] != '\0'); /* a reason is always given */
        }
        return s;
    }
}

static void test_ps_wire_hostile_fields(void **state)
{
    gs__ps_msg_t d;
    gs__ps_msg_t m;
    uint8_t buf[GS_PS_MSG_BYTES + 1];
    char why[200];

    (void)state;
    /* Every byte of every message type set to every value: never a crash,
     * either a valid message or GS_ERR_PROTOCOL with a reason. */
    for (uint8_t t = GS_PS_MSG_PUSH; t <= GS_PS_MSG_CTS; t++) {
        m = sample(t);
        for (size_t at = 0; at < GS_PS_MSG_BYTES; at++) {
            for (int v = 0; v < 256; v += (at < 64) ? 1 : 51) {
                (void)decode_mutated(&m, at, (uint8_t)v, 8, &d);
            }
        }
    }
    m = sample(GS_PS_MSG_PUSH);
    /* Lengths other than the one size. */
    gs__ps_msg_encode(&m, buf);
    for (size_t len = 0; len <= GS_PS_MSG_BYTES + 1; len++) {
        if (len != GS_PS_MSG_BYTES) {
            assert_int_equal(gs__ps_msg_decode(buf, len, 8, &d, why, sizeof(why)), GS_ERR_PROTOCOL);
        }
    }
    assert_int_equal(gs__ps_msg_decode(NULL, GS_PS_MSG_BYTES, 8, &d, why, sizeof(why)),
                     GS_ERR_PROTOCOL);
    /* Specific fields. */
    assert_int_equal(decode_mutated(&m, 0, 'X', 8, &d), GS_ERR_PROTOCOL); /* magic */
    assert_int_equal(decode_mutated(&m, 4, 2, 8, &d), GS_ERR_PROTOCOL);   /* version */
    assert_int_equal(decode_mutated(&m, 5, 0, 8, &d), GS_ERR_PROTOCOL);   /* type */
    assert_int_equal(decode_mutated(&m, 5, 9, 8, &d), GS_ERR_PROTOCOL);
    assert_int_equal(decode_mutated(&m, 6, GS_DTYPE_COUNT, 8, &d), GS_ERR_PROTOCOL);
    assert_int_equal(decode_mutated(&m, 7, 0x80, 8, &d), GS_ERR_PROTOCOL); /* flags */
    assert_int_equal(decode_mutated(&m, 7, GS_PS_MSGF_PUSHED, 8, &d), GS_ERR_PROTOCOL);
    assert_int_equal(decode_mutated(&m, 8, 8, 8, &d), GS_ERR_PROTOCOL);     /* src == n */
    assert_int_equal(decode_mutated(&m, 11, 0xff, 8, &d), GS_ERR_PROTOCOL); /* src < 0 */
    assert_int_equal(decode_mutated(&m, 15, 0x10, 8, &d), GS_ERR_PROTOCOL); /* seq > 28 bits */
    assert_int_equal(decode_mutated(&m, 28, 1, 8, &d), GS_ERR_PROTOCOL);    /* status on push */
    assert_int_equal(decode_mutated(&m, 64, 'x', 8, &d), GS_ERR_PROTOCOL);  /* text on push */
    assert_int_equal(decode_mutated(&m, 63, 0x80, 8, &d), GS_ERR_PROTOCOL); /* clock < 0 */
    /* count 0, and offset + count past 2^64 */
    m.count = 0;
    assert_int_equal(decode_mutated(&m, 16, (uint8_t)(m.key & 0xff), 8, &d), GS_ERR_PROTOCOL);
    m = sample(GS_PS_MSG_PUSH);
    m.offset = UINT64_MAX - 10;
    assert_int_equal(decode_mutated(&m, 16, (uint8_t)(m.key & 0xff), 8, &d), GS_ERR_PROTOCOL);
    /* A text without its NUL. */
    m = sample(GS_PS_MSG_REPLY);
    gs__ps_msg_encode(&m, buf);
    memset(buf + GS_PS_MSG_TEXT_OFF, 'a', GS_PS_MSG_TEXT_MAX);
    assert_int_equal(gs__ps_msg_decode(buf, GS_PS_MSG_BYTES, 8, &d, why, sizeof(why)),
                     GS_ERR_PROTOCOL);
    /* Answers: an unknown status, GS_INPROGRESS, status and text that disagree. */
    m.status = -7;
    assert_int_equal(decode_mutated(&m, 16, (uint8_t)(m.key & 0xff), 8, &d), GS_ERR_PROTOCOL);
    m.status = GS_INPROGRESS;
    assert_int_equal(decode_mutated(&m, 16, (uint8_t)(m.key & 0xff), 8, &d), GS_ERR_PROTOCOL);
    m.status = GS_OK;
    assert_int_equal(decode_mutated(&m, 16, (uint8_t)(m.key & 0xff), 8, &d), GS_ERR_PROTOCOL);
    m.text[0] = '\0';
    assert_int_equal(decode_mutated(&m, 16, (uint8_t)(m.key & 0xff), 8, &d), GS_OK);
    m.status = GS_ERR_TIMEOUT;
    assert_int_equal(decode_mutated(&m, 16, (uint8_t)(m.key & 0xff), 8, &d), GS_ERR_PROTOCOL);
    /* Heartbeat, bye, clock carry nothing else. */
    m = sample(GS_PS_MSG_HEARTBEAT);
    assert_int_equal(decode_mutated(&m, 20, 1, 8, &d), GS_ERR_PROTOCOL);
    m = sample(GS_PS_MSG_BYE);
    assert_int_equal(decode_mutated(&m, 56, 1, 8, &d), GS_ERR_PROTOCOL);
    m = sample(GS_PS_MSG_CLOCK);
    assert_int_equal(decode_mutated(&m, 40, 1, 8, &d), GS_ERR_PROTOCOL);
    m.clock = 0;
    assert_int_equal(decode_mutated(&m, 16, 0, 8, &d), GS_ERR_PROTOCOL);
    /* A clear-to-send carries no flags, status or text. */
    m = sample(GS_PS_MSG_CTS);
    assert_int_equal(decode_mutated(&m, 7, GS_PS_MSGF_RNDV, 8, &d), GS_ERR_PROTOCOL);
    assert_int_equal(decode_mutated(&m, 28, 0xd8, 8, &d), GS_ERR_PROTOCOL);
    assert_int_equal(decode_mutated(&m, 64, 'x', 8, &d), GS_ERR_PROTOCOL);
}

static void test_ps_wire_random_bytes(void **state)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    uint8_t buf[GS_PS_MSG_BYTES];
    uint8_t again[GS_PS_MSG_BYTES];
    gs__ps_msg_t d;
    gs__ps_msg_t d2;
    char why[200];
    long ok = 0;

    (void)state;
    for (int it = 0; it < 200000; it++) {
        gs__ps_msg_t m = sample((uint8_t)(GS_PS_MSG_PUSH + it % 8));

        gs__ps_msg_encode(&m, buf);
        /* Flip a few random bytes (all of them now and then). */
        for (int f = 0; f < ((it % 97 == 0) ? (int)GS_PS_MSG_BYTES : 1 + it % 4); f++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            buf[(it % 97 == 0) ? f : (int)(x % GS_PS_MSG_BYTES)] = (uint8_t)(x >> 32);
        }
        if (gs__ps_msg_decode(buf, sizeof(buf), 8, &d, why, sizeof(why)) != GS_OK) {
            continue;
        }
        /* What decodes re-encodes to the same message. */
        ok++;
        gs__ps_msg_encode(&d, again);
        assert_int_equal(gs__ps_msg_decode(again, sizeof(again), 8, &d2, why, sizeof(why)), GS_OK);
        assert_int_equal(d2.type, d.type);
        assert_true(d2.key == d.key);
        assert_true(d2.count == d.count);
        assert_true(d2.nbytes == d.nbytes);
        assert_string_equal(d2.text, d.text);
    }
    assert_true(ok > 0);
}

static void test_ps_wire_check_shard(void **state)
{
    gs__ps_shard_expect_t e = {
        .offset = 1000, .count = 500, .dtype = GS_DTYPE_F32, .value_bytes = 2000, .max_encoded = 0};
    gs__ps_msg_t m = sample(GS_PS_MSG_PUSH);
    char why[200];

    (void)state;
    assert_int_equal(gs__ps_msg_check_shard(&m, &e, why, sizeof(why)), GS_OK);
    m.offset = 999;
    assert_int_equal(gs__ps_msg_check_shard(&m, &e, why, sizeof(why)), GS_ERR_PROTOCOL);
    m = sample(GS_PS_MSG_PUSH);
    m.count = 501;
    assert_int_equal(gs__ps_msg_check_shard(&m, &e, why, sizeof(why)), GS_ERR_PROTOCOL);
    m = sample(GS_PS_MSG_PUSH);
    m.dtype = GS_DTYPE_F64;
    assert_int_equal(gs__ps_msg_check_shard(&m, &e, why, sizeof(why)), GS_ERR_PROTOCOL);
    assert_non_null(strstr(why, "dtype"));
    m = sample(GS_PS_MSG_PUSH);
    for (uint64_t nb = 0; nb < 4100; nb += 7) {
        m.nbytes = nb;
        assert_int_equal(gs__ps_msg_check_shard(&m, &e, why, sizeof(why)),
                         (nb == 2000) ? GS_OK : GS_ERR_PROTOCOL);
    }
    m.nbytes = UINT64_MAX;
    assert_int_equal(gs__ps_msg_check_shard(&m, &e, why, sizeof(why)), GS_ERR_PROTOCOL);
    /* Compressed: only with a codec, and within the codec's sizes. */
    m = sample(GS_PS_MSG_PUSH);
    m.flags = GS_PS_MSGF_COMPRESSED;
    m.nbytes = 100;
    assert_int_equal(gs__ps_msg_check_shard(&m, &e, why, sizeof(why)), GS_ERR_PROTOCOL);
    e.max_encoded = 600;
    assert_int_equal(gs__ps_msg_check_shard(&m, &e, why, sizeof(why)), GS_OK);
    m.nbytes = GS_CODEC_HEADER_BYTES - 1;
    assert_int_equal(gs__ps_msg_check_shard(&m, &e, why, sizeof(why)), GS_ERR_PROTOCOL);
    m.nbytes = 601;
    assert_int_equal(gs__ps_msg_check_shard(&m, &e, why, sizeof(why)), GS_ERR_PROTOCOL);
    /* A large push carries the clear-to-send flag, a small one not. */
    e.max_encoded = 0;
    e.value_bytes = GS_PS_EAGER_BYTES + 4;
    m = sample(GS_PS_MSG_PUSH);
    m.nbytes = GS_PS_EAGER_BYTES + 4;
    assert_int_equal(gs__ps_msg_check_shard(&m, &e, why, sizeof(why)), GS_ERR_PROTOCOL);
    m.flags = GS_PS_MSGF_RNDV;
    assert_int_equal(gs__ps_msg_check_shard(&m, &e, why, sizeof(why)), GS_OK);
    e.value_bytes = 2000;
    m = sample(GS_PS_MSG_PUSH);
    m.flags = GS_PS_MSGF_RNDV;
    assert_int_equal(gs__ps_msg_check_shard(&m, &e, why, sizeof(why)), GS_ERR_PROTOCOL);
    /* A pull names the exact value size. */
    m = sample(GS_PS_MSG_PULL);
    assert_int_equal(gs__ps_msg_check_shard(&m, &e, why, sizeof(why)), GS_OK);
    m.nbytes = 1999;
    assert_int_equal(gs__ps_msg_check_shard(&m, &e, why, sizeof(why)), GS_ERR_PROTOCOL);
}

static void test_ps_wire_tags_distinct(void **state)
{
    (void)state;
    for (uint32_t seq = 0; seq < 1000; seq += 37) {
        const uint32_t s2 = seq | 0xf0000000u; /* high bits are dropped */

        assert_int_equal(gs__ps_tag(GS_PS_TAG_KIND_PULL_DATA, s2),
                         gs__ps_tag(GS_PS_TAG_KIND_PULL_DATA, seq));
        assert_int_not_equal(gs__ps_tag(GS_PS_TAG_KIND_PUSH_DATA, seq),
                             gs__ps_tag(GS_PS_TAG_KIND_PULL_DATA, seq));
        assert_int_not_equal(gs__ps_tag(GS_PS_TAG_KIND_PUSH_DATA, seq),
                             gs__ps_tag(GS_PS_TAG_KIND_CTRL, 0));
        assert_int_not_equal(gs__ps_tag(GS_PS_TAG_KIND_PULL_DATA, seq),
                             gs__ps_tag(GS_PS_TAG_KIND_CTRL, 0));
    }
}

/* ====================================================================== */
/* Rules                                                                  */
/* ====================================================================== */

static double rget(gs_dtype_t dt, const void *p, size_t i)
{
    switch (dt) {
    case GS_DTYPE_F64:
        return ((const double *)p)[i];
    case GS_DTYPE_F32:
        return ((const float *)p)[i];
    case GS_DTYPE_F16:
        return gs__f16_to_f32(((const uint16_t *)p)[i]);
    default:
        return gs__bf16_to_f32(((const uint16_t *)p)[i]);
    }
}

static void rset(gs_dtype_t dt, void *p, size_t i, double v)
{
    switch (dt) {
    case GS_DTYPE_F64:
        ((double *)p)[i] = v;
        break;
    case GS_DTYPE_F32:
        ((float *)p)[i] = (float)v;
        break;
    case GS_DTYPE_F16:
        ((uint16_t *)p)[i] = gs__f32_to_f16((float)v);
        break;
    default:
        ((uint16_t *)p)[i] = gs__f32_to_bf16((float)v);
        break;
    }
}

/* Reference step in double, on values as the shard stores them. */
static void ref_step(const gs__ps_rule_cfg_t *c, double *w, const double *g, double *m, double *v,
                     int t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const double d = g[i] + c->weight_decay * w[i];

        if (c->rule == GS_PS_RULE_SGD) {
            m[i] = c->momentum * m[i] + d;
            w[i] -= c->lr * ((c->momentum != 0.0) ? m[i] : d);
        } else {
            m[i] = c->beta1 * m[i] + (1 - c->beta1) * d;
            v[i] = c->beta2 * v[i] + (1 - c->beta2) * d * d;
            w[i] -= c->lr * (m[i] / (1 - pow(c->beta1, t))) /
                    (sqrt(v[i] / (1 - pow(c->beta2, t))) + c->eps);
        }
    }
}

static void check_rule(const gs__ps_rule_cfg_t *c, gs_dtype_t dt, double tol)
{
    enum { N = 257, STEPS = 5 };
    const gs_dtype_t at = gs__ps_acc_dtype(dt);
    const size_t es = gs__dtype_size(dt);
    const size_t as = gs__dtype_size(at);
    void *w = malloc(N * es);
    void *g = malloc(N * as);
    gs__ps_opt_state_t st = {calloc(N, as), calloc(N, as), 0};
    double rw[N];
    double rg[N];
    double rm[N] = {0};
    double rv[N] = {0};

    for (size_t i = 0; i < N; i++) {
        rset(dt, w, i, 0.25 * sin((double)i));
        rw[i] = rget(dt, w, i);
    }
    for (int t = 1; t <= STEPS; t++) {
        for (size_t i = 0; i < N; i++) {
            rset(at, g, i, 0.1 * cos(0.3 * (double)i + t));
            rg[i] = rget(at, g, i);
        }
        assert_int_equal(gs__ps_apply(c, 7, 0, dt, w, g, N, &st), GS_OK);
        ref_step(c, rw, rg, rm, rv, t, N);
        if ((dt == GS_DTYPE_F16) || (dt == GS_DTYPE_BF16)) {
            /* The shard holds rounded values: so does the reference. */
            for (size_t i = 0; i < N; i++) {
                assert_true(fabs(rget(dt, w, i) - rw[i]) <= tol * (1 + fabs(rw[i])));
                rw[i] = rget(dt, w, i);
            }
        }
    }
    for (size_t i = 0; i < N; i++) {
        assert_true(fabs(rget(dt, w, i) - rw[i]) <= tol * (1 + fabs(rw[i])));
    }
    if (c->rule == GS_PS_RULE_ADAM) {
        assert_int_equal(st.t, STEPS);
    }
    free(w);
    free(g);
    free(st.m);
    free(st.v);
}

static void test_ps_rule_against_reference(void **state)
{
    static const gs_dtype_t dts[] = {GS_DTYPE_F32, GS_DTYPE_F64, GS_DTYPE_F16, GS_DTYPE_BF16};
    static const double tols[] = {1e-5, 1e-12, 2e-3, 1.6e-2};
    gs__ps_rule_cfg_t sgd = {.rule = GS_PS_RULE_SGD, .lr = 0.1};
    gs__ps_rule_cfg_t sgdm = {
        .rule = GS_PS_RULE_SGD, .lr = 0.05, .momentum = 0.9, .weight_decay = 0.01};
    gs__ps_rule_cfg_t adam = {.rule = GS_PS_RULE_ADAM,
                              .lr = 0.01,
                              .beta1 = 0.9,
                              .beta2 = 0.999,
                              .eps = 1e-8,
                              .weight_decay = 0.001};

    (void)state;
    assert_int_equal(gs__ps_rule_nstate(&sgd), 0);
    assert_int_equal(gs__ps_rule_nstate(&sgdm), 1);
    assert_int_equal(gs__ps_rule_nstate(&adam), 2);
    for (size_t i = 0; i < 4; i++) {
        check_rule(&sgd, dts[i], tols[i]);
        check_rule(&sgdm, dts[i], tols[i]);
        check_rule(&adam, dts[i], (dts[i] == GS_DTYPE_F64) ? 1e-10 : tols[i] * 4);
    }
}

static void test_ps_rule_sgd_exact_sums(void **state)
{
    /* lr 1, no momentum: w -= g exactly for integer values, the property the
     * integration test's exact sums rely on. */
    gs__ps_rule_cfg_t c = {.rule = GS_PS_RULE_SGD, .lr = 1.0};
    float w[64];
    float g[64];
    gs__ps_opt_state_t st = {NULL, NULL, 0};

    (void)state;
    for (int i = 0; i < 64; i++) {
        w[i] = (float)i;
    }
    for (int step = 0; step < 1000; step++) {
        for (int i = 0; i < 64; i++) {
            g[i] = (float)((i + step) % 5 - 2);
        }
        assert_int_equal(gs__ps_apply(&c, 1, 0, GS_DTYPE_F32, w, g, 64, &st), GS_OK);
    }
    for (int i = 0; i < 64; i++) {
        double want = i;

        for (int step = 0; step < 1000; step++) {
            want -= (i + step) % 5 - 2;
        }
        assert_true((double)w[i] == want);
    }
}

typedef struct cb_seen {
    int calls;
    uint64_t key;
    size_t offset;
    size_t count;
    gs_dtype_t dtype;
    gs_dtype_t gdtype;
    gs_status_t ret;
} cb_seen_t;

static gs_status_t cb(void *user, uint64_t key, size_t offset, size_t count, void *weights,
                      gs_dtype_t dtype, const void *grad, gs_dtype_t grad_dtype)
{
    cb_seen_t *s = (cb_seen_t *)user;

    s->calls++;
    s->key = key;
    s->offset = offset;
    s->count = count;
    s->dtype = dtype;
    s->gdtype = grad_dtype;
    if (s->ret == GS_OK) {
        ((double *)weights)[0] += ((const double *)grad)[0];
    }
    return s->ret;
}

static void test_ps_rule_callback(void **state)
{
    cb_seen_t seen = {0};
    gs__ps_rule_cfg_t c = {.rule = GS_PS_RULE_CALLBACK, .fn = cb, .user = &seen};
    double w[3] = {1, 2, 3};
    double g[3] = {10, 0, 0};

    (void)state;
    assert_int_equal(gs__ps_apply(&c, 77, 500, GS_DTYPE_F64, w, g, 3, NULL), GS_OK);
    assert_int_equal(seen.calls, 1);
    assert_true(seen.key == 77);
    assert_int_equal(seen.offset, 500);
    assert_int_equal(seen.count, 3);
    assert_int_equal(seen.dtype, GS_DTYPE_F64);
    assert_int_equal(seen.gdtype, GS_DTYPE_F64);
    assert_true(w[0] == 11.0);
    seen.ret = GS_ERR_INVALID_ARG;
    assert_int_equal(gs__ps_apply(&c, 77, 500, GS_DTYPE_F64, w, g, 3, NULL), GS_ERR_INVALID_ARG);
    seen.ret = (gs_status_t)5; /* not an error code: still a failure */
    assert_int_equal(gs__ps_apply(&c, 77, 500, GS_DTYPE_F64, w, g, 3, NULL), GS_ERR_INVALID_USAGE);
}

static void test_ps_accumulate(void **state)
{
    static const gs_dtype_t dts[] = {GS_DTYPE_F32, GS_DTYPE_F64, GS_DTYPE_F16, GS_DTYPE_BF16};

    (void)state;
    for (size_t d = 0; d < 4; d++) {
        const gs_dtype_t dt = dts[d];
        const gs_dtype_t at = gs__ps_acc_dtype(dt);
        uint8_t src[64 * 8];
        uint8_t acc[64 * 8];

        for (int k = 0; k < 20; k++) {
            for (size_t i = 0; i < 64; i++) {
                rset(dt, src, i, (double)((int)(i + (size_t)k) % 7 - 3));
            }
            gs__ps_accumulate(dt, acc, src, 64, k == 0);
        }
        for (size_t i = 0; i < 64; i++) {
            double want = 0;

            for (int k = 0; k < 20; k++) {
                want += (int)(i + (size_t)k) % 7 - 3;
            }
            assert_true(rget(at, acc, i) == want);
        }
    }
    assert_int_equal(gs__ps_acc_dtype(GS_DTYPE_F64), GS_DTYPE_F64);
    assert_int_equal(gs__ps_acc_dtype(GS_DTYPE_BF16), GS_DTYPE_F32);
}

/* ====================================================================== */
/* Consistency                                                            */
/* ====================================================================== */

static void test_ps_consistency_predicates(void **state)
{
    (void)state;
    assert_true(gs__ps_pull_round(5, 1) == 5);
    assert_true(gs__ps_pull_round(5, 0) == 4);
    assert_true(gs__ps_pull_round(0, 0) == -1);
    /* Every combination of 2 workers' clocks and pushes. */
    for (int a = 0; a < 625; a++) {
        int64_t pc[4];
        int64_t wc[4];
        uint8_t pushed[4];
        int x = a;

        for (int w = 0; w < 2; w++) {
            pc[w] = x % 5 - 1;
            x /= 5;
            wc[w] = x % 5;
            x /= 5;
            pushed[w] = (uint8_t)(pc[w] >= 1);
        }
        for (int64_t need = -2; need <= 4; need++) {
            int first = -1;

            for (int w = 0; w < 2; w++) {
                if (!((pc[w] >= need) || (wc[w] > need)) && (first < 0)) {
                    first = w;
                }
            }
            assert_int_equal(gs__ps_ssp_blocker(pc, wc, 2, need), (need < 0) ? -1 : first);
            first = -1;
            for (int w = 0; w < 2; w++) {
                if (!pushed[w] && (wc[w] <= need) && (first < 0)) {
                    first = w;
                }
            }
            assert_int_equal(gs__ps_bsp_blocker(pushed, wc, 2, need), first);
        }
    }
    /* A worker that left never blocks. */
    {
        const int64_t pc[2] = {-1, -1};
        const int64_t wc[2] = {GS_PS_CLOCK_LEFT, 3};
        const uint8_t pushed[2] = {0, 0};

        assert_int_equal(gs__ps_ssp_blocker(pc, wc, 2, 2), -1);
        assert_int_equal(gs__ps_ssp_blocker(pc, wc, 2, 3), 1);
        assert_int_equal(gs__ps_bsp_blocker(pushed, wc, 2, 1000000), 1);
    }
}

static void test_ps_consistency_bsp_push_kind(void **state)
{
    (void)state;
    for (int64_t round = 0; round < 4; round++) {
        for (int64_t clock = 0; clock < 9; clock++) {
            for (int pushed = 0; pushed < 2; pushed++) {
                for (unsigned kept = 0; kept <= GS_PS_BSP_MAX_AHEAD + 1; kept++) {
                    for (int same = 0; same < 2; same++) {
                        const gs__ps_bsp_push_t k =
                            gs__ps_bsp_push_kind(clock, round, pushed, kept, same);
                        gs__ps_bsp_push_t want;

                        if ((clock < round) || ((clock == round) && pushed) ||
                            ((clock > round) && same)) {
                            want = GS_PS_BSP_TWICE;
                        } else if (clock == round) {
                            want = GS_PS_BSP_ADD;
                        } else {
                            want = (kept < GS_PS_BSP_MAX_AHEAD) ? GS_PS_BSP_KEEP : GS_PS_BSP_AHEAD;
                        }
                        assert_int_equal(k, want);
                    }
                }
            }
        }
    }
    /* One round of slack beyond what the model allows an honest worker. */
    assert_true(GS_PS_BSP_MAX_AHEAD >= 2);
}

/*
 * A BSP server and workers with instant messages, as in ps_server.c (rounds
 * advance by gs__ps_bsp_blocker, pushes go by gs__ps_bsp_push_kind, a pull
 * is answered once its round is applied): honest loops, interleaved at
 * random, must never be refused and must keep at most @p want_max pushes
 * per worker and shard. Loops: 0 "pull A, push A, clock"; 1 "push A, pull
 * A, clock"; 2 "push A, pull B, clock" (A and B on different shards, B
 * never pushed: pulling any key bounds a worker).
 */
/* Advance a simulated shard while its round is complete; kept pushes join
 * the round that opens, as bsp_advance does. */
static void sim_advance(int64_t *round, uint8_t *pushed, int64_t (*kept)[8], unsigned *nkept,
                        const int64_t *wclock, int nworkers)
{
    while (gs__ps_bsp_blocker(pushed, wclock, nworkers, *round) < 0) {
        (*round)++;
        memset(pushed, 0, (size_t)nworkers);
        for (int v = 0; v < nworkers; v++) {
            unsigned j = 0;

            for (unsigned i = 0; i < nkept[v]; i++) {
                if (kept[v][i] == *round) {
                    pushed[v] = 1;
                } else {
                    kept[v][j++] = kept[v][i];
                }
            }
            nkept[v] = j;
        }
    }
}

static void bsp_simulate(int loop, int nworkers, unsigned seed, unsigned want_max)
{
    enum { NW = 4, ITERS = 30 };
    int64_t wclock[NW] = {0};
    int64_t round[2] = {0, 0};
    uint8_t pushed[2][NW];
    int64_t kept[2][NW][8];
    unsigned nkept[2][NW];
    int step[NW] = {0};
    unsigned max_kept = 0;

    memset(pushed, 0, sizeof(pushed));
    memset(nkept, 0, sizeof(nkept));
    for (;;) {
        int ready[NW];
        int nready = 0;
        int w;

        /* The workers whose next step can run (a pull waits for its round). */
        for (w = 0; w < nworkers; w++) {
            const int is_pull = (loop == 0) ? (step[w] == 0) : (step[w] == 1);
            const int s = (loop == 2) ? 1 : 0;

            if (wclock[w] >= ITERS) {
                continue;
            }
            if (is_pull && (round[s] <= gs__ps_pull_round(wclock[w], loop == 1))) {
                continue;
            }
            ready[nready++] = w;
        }
        if (nready == 0) {
            break;
        }
        seed = seed * 1103515245u + 12345u;
        w = ready[(seed >> 16) % (unsigned)nready];
        if (((loop == 0) && (step[w] == 1)) || ((loop != 0) && (step[w] == 0))) {
            const gs__ps_bsp_push_t k = gs__ps_bsp_push_kind(wclock[w], round[0], pushed[0][w],
                                                             nkept[0][w], 0 /* once a clock */);

            assert_true((k == GS_PS_BSP_ADD) || (k == GS_PS_BSP_KEEP));
            if (k == GS_PS_BSP_ADD) {
                pushed[0][w] = 1;
            } else {
                kept[0][w][nkept[0][w]++] = wclock[w];
                max_kept = (nkept[0][w] > max_kept) ? nkept[0][w] : max_kept;
            }
        } else if (step[w] == 2) {
            wclock[w]++;
        }
        step[w] = (step[w] + 1) % 3;
        for (int s = 0; s < 2; s++) {
            sim_advance(&round[s], pushed[s], kept[s], nkept[s], wclock, nworkers);
        }
    }
    /* Nobody is stuck: every worker finished its clocks. */
    for (int w = 0; w < nworkers; w++) {
        assert_true(wclock[w] == ITERS);
    }
    assert_true(max_kept <= want_max);
}

static void test_ps_consistency_bsp_honest_loops(void **state)
{
    (void)state;
    for (int nw = 1; nw <= 4; nw++) {
        for (unsigned seed = 1; seed <= 200; seed++) {
            bsp_simulate(0, nw, seed, 0);
            bsp_simulate(1, nw, seed, 0);
            bsp_simulate(2, nw, seed, 1);
        }
    }
}

/* ====================================================================== */
/* Limits                                                                 */
/* ====================================================================== */

static void test_ps_limits_stage_cap(void **state)
{
    static const size_t shard_caps[] = {2, 8, 63, 64, 65, 100, 4096, 65537, (size_t)2 << 20};

    (void)state;
    for (size_t i = 0; i < sizeof(shard_caps) / sizeof(shard_caps[0]); i++) {
        const size_t sc = shard_caps[i];
        const size_t step = (sc > 5000) ? sc / 997 : 1;

        for (size_t need = 1; need <= sc; need += step) {
            const size_t cap = gs__ps_stage_cap(need, sc);

            assert_true(cap >= need);
            if (2 * need >= sc) {
                assert_true(cap == sc); /* full-size pushes share one pool size */
            } else {
                /* Never a whole shard for a small payload: at most twice it. */
                assert_true(cap <= ((need < GS_PS_STAGE_MIN) ? GS_PS_STAGE_MIN : 2 * need));
                assert_true((cap & (cap - 1)) == 0);
            }
        }
        assert_true(gs__ps_stage_cap(sc + 1, sc) == sc + 1);
    }
    /* The header flood of the audit: 64 announced bytes of a 2 MiB shard. */
    assert_true(gs__ps_stage_cap(64, (size_t)2 << 20) == 64);
}

static void test_ps_limits_stage_budget(void **state)
{
    (void)state;
    assert_true(gs__ps_stage_budget(0) == GS_PS_EAGER_BYTES);
    assert_true(gs__ps_stage_budget(100) == GS_PS_EAGER_BYTES);
    assert_true(gs__ps_stage_budget((size_t)1 << 20) == (size_t)2 << 20);
    assert_true(gs__ps_stage_budget((size_t)-1) == (size_t)-1);
    /* Admission: under the op count and the bytes, without overflow. */
    assert_true(gs__ps_stage_admit(0, 0, 100, 100));
    assert_false(gs__ps_stage_admit(0, 1, 100, 100));
    assert_true(gs__ps_stage_admit(GS_PS_STAGE_OPS - 1, 0, 1, 100));
    assert_false(gs__ps_stage_admit(GS_PS_STAGE_OPS, 0, 1, 100));
    assert_false(gs__ps_stage_admit(0, 200, 1, 100)); /* over already: never wraps */
    assert_false(gs__ps_stage_admit(0, 1, (size_t)-1, 100));
    /* Filling up: at most the budget is ever admitted. */
    {
        size_t bytes = 0;
        size_t ops = 0;

        while (gs__ps_stage_admit(ops, bytes, 4096, 100000)) {
            bytes += 4096;
            ops++;
        }
        assert_true(bytes <= 100000);
        assert_true((bytes + 4096 > 100000) || (ops == GS_PS_STAGE_OPS));
    }
}

/* ====================================================================== */
/* The server queue                                                       */
/* ====================================================================== */

static gs__ps_op_t *queued_op(gs__ps_op_type_t type, int worker, int64_t clock)
{
    gs__ps_op_t *op = calloc(1, sizeof(*op));

    assert_non_null(op);
    op->type = type;
    op->worker = worker;
    op->src = worker;
    op->clock = clock;
    return op;
}

static void test_ps_enqueue_merges_clocks(void **state)
{
    struct gs_ps *ps = calloc(1, sizeof(*ps));
    const gs__ps_op_t *op;
    int n = 0;

    (void)state;
    assert_non_null(ps);
    pthread_mutex_init(&ps->q_mu, NULL);
    pthread_cond_init(&ps->q_cv, NULL);
    ps->roles.nworkers = 2;
    ps->held.q_clock = calloc(2, sizeof(*ps->held.q_clock));
    assert_non_null(ps->held.q_clock);
    /* Worker 0: clocks 1, 2, 3 merge into one op; a push ends the run. */
    for (int64_t c = 1; c <= 3; c++) {
        gs__ps_enqueue(ps, queued_op(GS_PS_OP_CLOCK, 0, c));
    }
    gs__ps_enqueue(ps, queued_op(GS_PS_OP_CLOCK, 1, 1)); /* another worker's: its own */
    gs__ps_enqueue(ps, queued_op(GS_PS_OP_CLOCK, 0, 4)); /* worker 1 between: still merges */
    gs__ps_enqueue(ps, queued_op(GS_PS_OP_PUSH, 0, 4));
    gs__ps_enqueue(ps, queued_op(GS_PS_OP_CLOCK, 0, 5)); /* after the push: a new op */
    gs__ps_enqueue(ps, queued_op(GS_PS_OP_CLOCK, 0, 7)); /* not consecutive: kept apart */
    for (int64_t c = 8; c <= 100000; c++) {
        gs__ps_enqueue(ps, queued_op(GS_PS_OP_CLOCK, 0, c)); /* a flood costs one op */
    }
    for (op = ps->q_head; op != NULL; op = op->next) {
        n++;
    }
    assert_int_equal(n, 5);
    op = ps->q_head;
    assert_true((op->type == GS_PS_OP_CLOCK) && (op->worker == 0) && (op->clock == 1) &&
                (op->clock_to == 4));
    op = op->next;
    assert_true((op->worker == 1) && (op->clock == 1) && (op->clock_to == 1));
    op = op->next;
    assert_true(op->type == GS_PS_OP_PUSH);
    op = op->next;
    assert_true((op->clock == 5) && (op->clock_to == 5));
    op = op->next;
    assert_true((op->clock == 7) && (op->clock_to == 100000));
    assert_ptr_equal(ps->held.q_clock[0], op);
    gs__ps_queue_discard(ps); /* frees them */
    assert_null(ps->q_head);
    assert_null(ps->held.q_clock[0]);
    free(ps->held.q_clock);
    pthread_cond_destroy(&ps->q_cv);
    pthread_mutex_destroy(&ps->q_mu);
    free(ps);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ps_shard_roles),
        cmocka_unit_test(test_ps_shard_place_ranges),
        cmocka_unit_test(test_ps_shard_no_hot_spot),
        cmocka_unit_test(test_ps_wire_roundtrip),
        cmocka_unit_test(test_ps_wire_hostile_fields),
        cmocka_unit_test(test_ps_wire_random_bytes),
        cmocka_unit_test(test_ps_wire_check_shard),
        cmocka_unit_test(test_ps_wire_tags_distinct),
        cmocka_unit_test(test_ps_rule_against_reference),
        cmocka_unit_test(test_ps_rule_sgd_exact_sums),
        cmocka_unit_test(test_ps_rule_callback),
        cmocka_unit_test(test_ps_accumulate),
        cmocka_unit_test(test_ps_consistency_predicates),
        cmocka_unit_test(test_ps_consistency_bsp_push_kind),
        cmocka_unit_test(test_ps_consistency_bsp_honest_loops),
        cmocka_unit_test(test_ps_limits_stage_cap),
        cmocka_unit_test(test_ps_limits_stage_budget),
        cmocka_unit_test(test_ps_enqueue_merges_clocks),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
