/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Diagnosis of collectives that cannot finish (docs/design.md, "Diagnosis"):
 * (the fingerprint every tag of an operation carries in its check bits is
 * the context's, algo/ctx/algo_desc.c), the flight-recorder hooks around
 * each collective, the words for a call ("allreduce(count=1000, f32, sum)"),
 * the timeout text naming the peers still waited on, and the mismatch
 * protocol: a rank whose receive meets a message with another fingerprint
 * sends a REPORT (its own call, in numbers) to every rank; every rank a
 * REPORT or DESCRIBE reaches sends a DESCRIBE of its own call to every rank
 * in turn; each waits until it has every rank's call (or knows the rank
 * failed), at most 10 s or the operation's timeout, so that every rank fails
 * with GS_ERR_MISMATCH naming all the calls in words and which ranks made
 * them, whichever side it is on and whoever found the mismatch first,
 * instead of waiting for its timeout. It never runs on the fast path: only a
 * failed receive or an operation blocked for 1 ms or more gets here.
 *
 * NOTE: a diagnosis message comes from the network: it is decoded field by
 * field and checked (diag_decode) before any value is used.
 */
#include "algo/diag/diag.h"
#include "algo/ctx/ctx_shm.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/clock.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/le.h"
#include "core/log.h"
#include "core/recorder.h"
#include "gradsync/compress.h"

/* A point-to-point tag no user tag can take (those have bits 32..47 clear). */
#define DIAG_TAG (GS_TP_TAG_P2P | (1ull << 47) | 0x4447ull)
#define DIAG_MAGIC 0x47534447u /* "GDSG" on the wire */
#define DIAG_VERSION 1u
#define DIAG_BYTES 48
#define DIAG_REPORT 1u
#define DIAG_DESCRIBE 2u
#define DIAG_SCAN_AFTER_NS 200000000ull /* stalled this long: look for early messages */
#define DIAG_SCAN_IDX 64u               /* message numbers looked at per peer */
#define DIAG_ANSWER_NS 10000000000ull   /* a round waits at most this long (or the op's timeout) */
#define DIAG_TAKE_NS 250000000ull       /* for the rest of a diagnosis message that has begun */
#define DIAG_STEP_NS 10000000ull
/* A stalled operation looks at what its host's ranks published after this long. */
#define DIAG_SHM_AFTER_NS 20000000ull
#define DIAG_EXPLAIN_NS 100000000ull /* a peer failure waits this long for a REPORT */

typedef struct diag_msg {
    unsigned type;
    int from;
    int blamed; /* REPORT: the rank whose message did not match; else -1 */
    uint32_t seq;
    uint16_t their_fp;    /* REPORT: the check bits of the blamed rank's message */
    gs__algo_call_t call; /* the sender's operation number seq */
} diag_msg_t;

static const char *const diag_codec_names[GS_CODEC_KIND_COUNT] = {
#define DIAG_CODEC_NAME_ROW(_name, _value, _str) [_value] = _str,
    GS_CODEC_MAP(DIAG_CODEC_NAME_ROW)
#undef DIAG_CODEC_NAME_ROW
};

/* "allreduce(count=1000, f32, sum)"; the count of a v call is this rank's
 * part, left out when @p vcount is SIZE_MAX (another rank's call). */
static void diag_words(const gs__algo_call_t *c, size_t vcount, char *buf, size_t len)
{
    const int v = gs__coll_is_v((gs__coll_kind_t)c->kind);
    int used;

    if (c->known && v && (vcount == SIZE_MAX)) {
        used = snprintf(buf, len, "%s(%s", gs__coll_name((gs__coll_kind_t)c->kind),
                        gs__dtype_name((gs_dtype_t)c->dtype));
        if ((used > 0) && ((size_t)used < len) && gs__coll_reduces(c->kind)) {
            used += snprintf(buf + used, len - (size_t)used, ", %s", gs__op_name((gs_op_t)c->op));
        }
        if ((used > 0) && ((size_t)used < len)) {
            snprintf(buf + used, len - (size_t)used, ")");
        }
        return;
    }

    if (!c->known) {
        snprintf(buf, len, "(no record of it)");
        return;
    }
    if (c->kind == GS_COLL_BARRIER) {
        snprintf(buf, len, "barrier()");
        return;
    }
    used = snprintf(buf, len, "%s(count=%llu%s, %s", gs__coll_name((gs__coll_kind_t)c->kind),
                    (unsigned long long)(v ? vcount : c->count), v ? " here" : "",
                    gs__dtype_name((gs_dtype_t)c->dtype));
    if ((used > 0) && ((size_t)used < len) && gs__coll_reduces(c->kind)) {
        used += snprintf(buf + used, len - (size_t)used, ", %s", gs__op_name((gs_op_t)c->op));
    }
    if ((used > 0) && ((size_t)used < len) && gs__coll_rooted(c->kind)) {
        used += snprintf(buf + used, len - (size_t)used, ", %s %d",
                         ((c->kind == GS_COLL_SEND) || (c->kind == GS_COLL_RECV)) ? "peer" : "root",
                         c->root);
    }
    if ((used > 0) && ((size_t)used < len) && (c->codec > 0) && (c->codec < GS_CODEC_KIND_COUNT)) {
        used += snprintf(buf + used, len - (size_t)used, ", codec %s", diag_codec_names[c->codec]);
    }
    if ((used > 0) && ((size_t)used < len)) {
        snprintf(buf + used, len - (size_t)used, ")");
    }
}

void gs__algo_recorder_describe(const struct gs__recorder_op *op, char *buf, size_t len)
{
    gs__algo_call_t c;

    c.known = 1;
    c.kind = op->kind;
    c.dtype = op->dtype;
    c.op = op->op;
    c.root = op->root;
    c.codec = op->codec;
    c.count = op->count;
    c.fp = op->fp;
    diag_words(&c, op->count, buf, len);
}

const char *gs__algo_recorder_algo_name(int algo)
{
    return gs__algo_name((gs_algo_t)algo);
}

void gs__algo_op_begin(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, uint64_t t0_ns)
{
    ctx->cur = d;
    ctx->fp = gs__algo_fingerprint(d);
    ctx->diag_scan_ns = 0;
    if (ctx->shm != NULL) {
        gs__shm_publish_op(ctx->shm, gs__shm_op_word(ctx->seq, ctx->fp));
    }
    if (ctx->recorder != NULL) {
        gs__recorder_op_t e;

        e.seq = ctx->seq;
        e.kind = (int)d->kind;
        e.dtype = (int)d->dtype;
        e.op = gs__coll_reduces(e.kind) ? (int)d->op : 0;
        e.root = gs__coll_rooted(e.kind) ? d->root : 0;
        e.codec = (d->codec != NULL) ? (int)d->codec->kind : 0;
        e.fp = ctx->fp;
        e.count = d->count;
        e.bytes = d->count * gs__dtype_size(d->dtype);
        e.t_start_ns = t0_ns;
        gs__recorder_begin(ctx->recorder, &e);
    }
}

void gs__algo_op_end(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, gs_status_t status,
                     uint64_t t1_ns)
{
    ctx->cur = NULL;
    if (ctx->shm != NULL) {
        gs__shm_publish_op(ctx->shm, 0);
    }
    if (ctx->recorder != NULL) {
        gs__recorder_end(ctx->recorder, (int)d->algo, status, t1_ns);
    }
}

/* This rank's operation number @p seq, from the call in flight or the recorder. */
static void diag_mine(const gs__algo_ctx_t *ctx, uint32_t seq, gs__algo_call_t *c, size_t *vcount)
{
    gs__recorder_op_t e;

    memset(c, 0, sizeof(*c));
    *vcount = 0;
    if ((ctx->cur != NULL) && (ctx->seq == seq)) {
        gs__algo_call_of(ctx->cur, c);
        c->fp = ctx->fp;
        *vcount = ctx->cur->count;
        return;
    }
    if ((ctx->recorder != NULL) && gs__recorder_find(ctx->recorder, seq, &e)) {
        c->known = 1;
        c->kind = e.kind;
        c->dtype = e.dtype;
        c->op = e.op;
        c->root = e.root;
        c->codec = e.codec;
        c->count = gs__coll_is_v((gs__coll_kind_t)e.kind) ? 0 : e.count;
        c->fp = e.fp;
        *vcount = e.count;
    }
}

/* ---------------------------------------------------------------------- */
/* The diagnosis message: 48 bytes, little-endian                          */
/* ---------------------------------------------------------------------- */

/*
 * Layout: 0 magic, 4 version (u16), 6 type (u16), 8 from (i32), 12 blamed
 * (i32, -1: none), 16 seq, 20 their_fp (u16), 22 fp (u16), 24 known (u8),
 * 25 kind (u8), 26 dtype (u8), 27 op (u8), 28 root (i32), 32 codec, 36 zero,
 * 40 count (u64).
 */
static void diag_encode(const diag_msg_t *m, uint8_t *b)
{
    memset(b, 0, DIAG_BYTES);
    gs__put_le32(b + 0, DIAG_MAGIC);
    gs__put_le32(b + 4, DIAG_VERSION | (m->type << 16));
    gs__put_le32(b + 8, (uint32_t)m->from);
    gs__put_le32(b + 12, (uint32_t)m->blamed);
    gs__put_le32(b + 16, m->seq);
    gs__put_le32(b + 20, (uint32_t)m->their_fp | ((uint32_t)m->call.fp << 16));
    b[24] = (uint8_t)m->call.known;
    b[25] = (uint8_t)m->call.kind;
    b[26] = (uint8_t)m->call.dtype;
    b[27] = (uint8_t)m->call.op;
    gs__put_le32(b + 28, (uint32_t)m->call.root);
    gs__put_le32(b + 32, (uint32_t)m->call.codec);
    gs__put_le64(b + 40, m->call.count);
}

static gs_status_t diag_decode(const uint8_t *b, size_t n, int size, diag_msg_t *m, char *why,
                               size_t whylen)
{
    uint32_t vt;
    uint32_t codec;

    if (n != DIAG_BYTES) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen, "%zu bytes, expected %d", n,
                                 DIAG_BYTES);
    }
    vt = gs__get_le32(b + 4);
    codec = gs__get_le32(b + 32);
    if ((gs__get_le32(b) != DIAG_MAGIC) || ((vt & 0xffffu) != DIAG_VERSION)) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen, "bad magic or version");
    }
    m->type = vt >> 16;
    m->from = (int)gs__get_le32(b + 8);
    m->blamed = (int)gs__get_le32(b + 12);
    m->seq = gs__get_le32(b + 16);
    m->their_fp = (uint16_t)(gs__get_le32(b + 20) & 0x7fffu);
    m->call.fp = (uint16_t)((gs__get_le32(b + 20) >> 16) & 0x7fffu);
    m->call.known = b[24];
    m->call.kind = b[25];
    m->call.dtype = b[26];
    m->call.op = b[27];
    m->call.root = (int)gs__get_le32(b + 28);
    m->call.codec = (int)codec;
    m->call.count = gs__get_le64(b + 40);
    if (((m->type != DIAG_REPORT) && (m->type != DIAG_DESCRIBE)) || (m->from < 0) ||
        (m->from >= size) || (m->blamed < -1) || (m->blamed >= size) || (m->call.known > 1)) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen, "bad type, rank or flag");
    }
    if (m->call.known &&
        ((m->call.kind >= GS_COLL_KIND_COUNT) || (m->call.dtype >= GS_DTYPE_COUNT) ||
         (m->call.op >= GS_OP_COUNT) || (codec >= GS_CODEC_KIND_COUNT))) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                 "collective %d, dtype %d, op %d or "
                                 "codec %u out of range",
                                 m->call.kind, m->call.dtype, m->call.op, codec);
    }
    return GS_OK;
}

gs_status_t gs__algo_diag_decode(const uint8_t *buf, size_t n, int size, char *words, size_t wlen,
                                 char *why, size_t whylen)
{
    diag_msg_t m;
    const gs_status_t status = diag_decode(buf, n, size, &m, why, whylen);

    if ((status == GS_OK) && (wlen > 0)) {
        diag_words(&m.call, m.call.count, words, wlen);
    }
    return status;
}

/* Send @p m to @p peer; *req_out is NULL when the send could not start. */
static void diag_send(gs__algo_ctx_t *ctx, int peer, const uint8_t *buf, gs__tp_req_t **req_out)
{
    *req_out = NULL;
    if (gs__tp_isend(ctx->tr, peer, DIAG_TAG, buf, DIAG_BYTES, req_out) != GS_OK) {
        *req_out = NULL;
    }
}

/* 1 when *req finished (and released) or was never started. */
static int diag_send_done(gs__algo_ctx_t *ctx, gs__tp_req_t **req)
{
    int done = 0;

    if (*req == NULL) {
        return 1;
    }
    (void)gs__tp_test(ctx->tr, *req, &done, NULL);
    if (done) {
        gs__tp_req_release(ctx->tr, *req);
        *req = NULL;
    }
    return done;
}

/*
 * Take one diagnosis message if one has arrived: 1 with *m filled, 0 when
 * none is there (or the transport cannot probe), -1 when one was dropped
 * (malformed, or not whole by @p deadline).
 */
static int diag_take(gs__algo_ctx_t *ctx, diag_msg_t *m, uint64_t deadline)
{
    uint8_t buf[DIAG_BYTES];
    char why[128];
    gs__tp_completion_t comp;
    gs__tp_req_t *req = NULL;
    int found = 0;
    int done = 0;

    if (!gs__tp_has_probe(ctx->tr) ||
        (gs__tp_probe(ctx->tr, GS_ANY_SOURCE, DIAG_TAG, &found, &comp) != GS_OK) || !found) {
        return 0;
    }
    if (gs__tp_irecv(ctx->tr, comp.peer, DIAG_TAG, buf, sizeof(buf), &req) != GS_OK) {
        return 0;
    }
    for (;;) {
        const uint64_t now = gs__now_ns();

        (void)gs__tp_test(ctx->tr, req, &done, &comp);
        if (done || (now >= deadline)) {
            break;
        }
        if (gs__tp_progress(ctx->tr, (now + DIAG_STEP_NS < deadline) ? now + DIAG_STEP_NS
                                                                     : deadline) != GS_OK) {
            break;
        }
    }
    gs__tp_req_release(ctx->tr, req);
    if (!done || (comp.status != GS_OK)) {
        return -1;
    }
    if (diag_decode(buf, comp.nbytes, ctx->size, m, why, sizeof(why)) != GS_OK) {
        GS_WARN("%s: dropping a malformed diagnosis message from rank %d: %s", ctx->opname,
                comp.peer, why);
        return -1;
    }
    if (m->from != comp.peer) {
        GS_WARN("%s: dropping a diagnosis message from rank %d that claims to come from rank %d",
                ctx->opname, comp.peer, m->from);
        return -1;
    }
    return 1;
}

static const char diag_advice[] =
    "every rank must call the same collectives in the same order with the same count, dtype, "
    "op, root and codec; the communicator is failed, destroy it";

/*
 * One diagnosis round about operation number seq. Every rank that takes part
 * (the ones that found a mismatch and the ones a diagnosis message reached)
 * sends its own call to every other rank once, then waits until it has heard
 * every rank (or knows it failed) or until the deadline, so that each of them
 * can name every call in words whichever side it is on and whoever spoke
 * first.
 */
enum { DIAG_UNHEARD = 0, DIAG_HEARD, DIAG_OTHER_SEQ, DIAG_GONE };

typedef struct diag_round {
    uint32_t seq;
    int left;               /* ranks neither heard nor known to have failed */
    uint8_t *state;         /* per rank: DIAG_UNHEARD ... DIAG_GONE */
    int *group;             /* per rank, while the sentence is built */
    gs__algo_call_t *calls; /* per rank: its call as operation seq (DIAG_HEARD) */
    uint64_t deadline;
    uint64_t deadline_ms; /* how long the round waits, for the text */
} diag_round_t;

/* Wait (until @p deadline) for the one send *req. */
static void diag_send_wait(gs__algo_ctx_t *ctx, gs__tp_req_t **req, uint64_t deadline)
{
    while (!diag_send_done(ctx, req)) {
        const uint64_t now = gs__now_ns();

        if ((now >= deadline) ||
            (gs__tp_progress(ctx->tr, (now + DIAG_STEP_NS < deadline) ? now + DIAG_STEP_NS
                                                                      : deadline) != GS_OK)) {
            gs__tp_req_release(ctx->tr, *req);
            *req = NULL;
            return;
        }
    }
}

/* Describe this rank's operation @p seq to @p peer (a round about another number). */
static void diag_answer(gs__algo_ctx_t *ctx, int peer, uint32_t seq, uint64_t deadline)
{
    uint8_t buf[DIAG_BYTES];
    gs__tp_req_t *req = NULL;
    diag_msg_t out;
    size_t vcount;

    memset(&out, 0, sizeof(out));
    out.type = DIAG_DESCRIBE;
    out.from = ctx->rank;
    out.blamed = -1;
    out.seq = seq;
    diag_mine(ctx, seq, &out.call, &vcount);
    diag_encode(&out, buf);
    diag_send(ctx, peer, buf, &req);
    diag_send_wait(ctx, &req, deadline);
}

static void diag_mark(diag_round_t *r, int peer, uint8_t state)
{
    if ((r->state != NULL) && (r->state[peer] == DIAG_UNHEARD)) {
        r->state[peer] = state;
        r->left--;
    }
}

/* A diagnosis message of another rank: its call, or (another operation
 * number: its own round) this rank's call of that number in answer. */
static void diag_record(gs__algo_ctx_t *ctx, diag_round_t *r, const diag_msg_t *m)
{
    if ((r->state == NULL) || (r->state[m->from] != DIAG_UNHEARD)) {
        return;
    }
    if (m->seq == r->seq) {
        r->calls[m->from] = m->call;
        diag_mark(r, m->from, DIAG_HEARD);
        return;
    }
    diag_mark(r, m->from, DIAG_OTHER_SEQ);
    diag_answer(ctx, m->from, m->seq, r->deadline);
}

/* Take every diagnosis message that has arrived; mark the peers that failed. */
static void diag_gather(gs__algo_ctx_t *ctx, diag_round_t *r)
{
    diag_msg_t in;
    int got;

    while ((got = diag_take(ctx, &in, r->deadline)) != 0) {
        if (got > 0) {
            diag_record(ctx, r, &in);
        }
    }
    if ((r->state != NULL) && gs__tp_has_peer_failed(ctx->tr)) {
        for (int p = 0; p < ctx->size; p++) {
            if ((r->state[p] == DIAG_UNHEARD) && gs__tp_peer_failed(ctx->tr, p)) {
                diag_mark(r, p, DIAG_GONE);
            }
        }
    }
}

/* Send @p out to every other rank, 64 sends in flight at a time (buf
 * outlives them), taking what arrives meanwhile. */
static void diag_tell_all(gs__algo_ctx_t *ctx, diag_round_t *r, const uint8_t *buf)
{
    gs__tp_req_t *sends[64];
    int first = 0;

    while (first < ctx->size) {
        int n = 0;

        for (; (first < ctx->size) && (n < 64); first++) {
            if (first != ctx->rank) {
                diag_send(ctx, first, buf, &sends[n]);
                if (sends[n] == NULL) {
                    diag_mark(r, first, DIAG_GONE); /* it cannot be reached */
                }
                n++;
            }
        }
        for (;;) {
            const uint64_t now = gs__now_ns();
            int left = 0;

            for (int i = 0; i < n; i++) {
                left += !diag_send_done(ctx, &sends[i]);
            }
            diag_gather(ctx, r);
            if ((left == 0) || (now >= r->deadline) ||
                (gs__tp_progress(ctx->tr, (now + DIAG_STEP_NS < r->deadline)
                                              ? now + DIAG_STEP_NS
                                              : r->deadline) != GS_OK)) {
                break;
            }
        }
        for (int i = 0; i < n; i++) {
            if (sends[i] != NULL) {
                gs__tp_req_release(ctx->tr, sends[i]);
            }
        }
        if (gs__now_ns() >= r->deadline) {
            return;
        }
    }
}

static int diag_same_call(const gs__algo_call_t *a, const gs__algo_call_t *b)
{
    return (a->known == b->known) && (a->kind == b->kind) && (a->dtype == b->dtype) &&
           (a->op == b->op) && (a->root == b->root) && (a->codec == b->codec) &&
           (a->count == b->count);
}

/* "rank 2", "ranks 0, 1", "ranks 0-3, 5": the ranks whose r->group is @p g
 * (runs of three or more as a range), cut with "..." when @p len is short. */
static void diag_ranks(const diag_round_t *r, int size, int g, char *buf, size_t len)
{
    size_t used;
    int n = 0;
    int sep = 0;

    for (int p = 0; p < size; p++) {
        n += (r->group[p] == g);
    }
    used = (size_t)snprintf(buf, len, "%s", (n == 1) ? "rank " : "ranks ");
    for (int p = 0; (p < size) && (used < len); p++) {
        int e = p;

        if (r->group[p] != g) {
            continue;
        }
        while ((e + 1 < size) && (r->group[e + 1] == g)) {
            e++;
        }
        if (used + 32 >= len) {
            snprintf(buf + used, len - used, "%s...", sep ? ", " : "");
            return;
        }
        if (e - p >= 2) {
            used += (size_t)snprintf(buf + used, len - used, "%s%d-%d", sep ? ", " : "", p, e);
            p = e;
        } else {
            used += (size_t)snprintf(buf + used, len - used, "%s%d", sep ? ", " : "", p);
        }
        sep = 1;
    }
}

/* Append to @p buf (holding *used of @p len bytes). */
__attribute__((format(printf, 4, 5))) static void diag_cat(char *buf, size_t len, size_t *used,
                                                           const char *fmt, ...)
{
    va_list ap;
    int n;

    if (*used >= len) {
        return;
    }
    va_start(ap, fmt);
    n = vsnprintf(buf + *used, len - *used, fmt, ap);
    va_end(ap);
    if (n > 0) {
        *used = ((size_t)n < len - *used) ? *used + (size_t)n : len;
    }
}

#define DIAG_GROUPS 4 /* distinct calls named one by one; the rest together */

/* Group the ranks of round @p r by their call (group 0: this rank's; 1..:
 * another call each; DIAG_GROUPS + 1: yet other calls; + 2: no record of the
 * operation or at another one; + 3: not heard). Returns the groups of other
 * calls named one by one. */
static int diag_group(const gs__algo_ctx_t *ctx, diag_round_t *r, gs__algo_call_t *rep)
{
    int ngroups = 0;

    for (int p = 0; p < ctx->size; p++) {
        const gs__algo_call_t *c = &r->calls[p];
        int g;

        if (p == ctx->rank) {
            r->group[p] = -1; /* this rank: named on its own */
            continue;
        }
        if ((r->state[p] == DIAG_UNHEARD) || (r->state[p] == DIAG_GONE)) {
            r->group[p] = DIAG_GROUPS + 3;
            continue;
        }
        if ((r->state[p] == DIAG_OTHER_SEQ) || !c->known) {
            r->group[p] = DIAG_GROUPS + 2;
            continue;
        }
        if (diag_same_call(c, &r->calls[ctx->rank])) {
            r->group[p] = 0;
            continue;
        }
        for (g = 1; g <= ngroups; g++) {
            if (diag_same_call(c, &rep[g])) {
                break;
            }
        }
        if (g > ngroups) {
            if (ngroups == DIAG_GROUPS) {
                g = DIAG_GROUPS + 1;
            } else {
                rep[++ngroups] = *c;
            }
        }
        r->group[p] = g;
    }
    return ngroups;
}

static int diag_any(const diag_round_t *r, int size, int g)
{
    for (int p = 0; p < size; p++) {
        if (r->group[p] == g) {
            return 1;
        }
    }
    return 0;
}

/*
 * GS_ERR_MISMATCH naming every call heard in words and which ranks made it:
 * "rank 2 called allreduce(count=1001, f32, sum) as operation #3 while this
 * rank (0) called allreduce(count=1000, f32, sum), as did rank 1; ...".
 * @p blamed and @p first say who was found out when no other call was heard.
 */
static gs_status_t diag_fail(gs__algo_ctx_t *ctx, diag_round_t *r, const char *mine_words,
                             int blamed, const diag_msg_t *first)
{
    gs__algo_call_t rep[DIAG_GROUPS + 1];
    char text[GS_ERROR_MSG_MAX];
    char ranks[96];
    char words[160];
    const unsigned long long ms = (unsigned long long)r->deadline_ms;
    size_t used = 0;
    int ngroups;

    ngroups = diag_group(ctx, r, rep);
    for (int g = 1; g <= ngroups; g++) {
        diag_ranks(r, ctx->size, g, ranks, sizeof(ranks));
        diag_words(&rep[g], SIZE_MAX, words, sizeof(words));
        diag_cat(text, sizeof(text), &used, "%s%s called %s", (g > 1) ? " and " : "", ranks, words);
    }
    if (diag_any(r, ctx->size, DIAG_GROUPS + 1)) {
        diag_ranks(r, ctx->size, DIAG_GROUPS + 1, ranks, sizeof(ranks));
        diag_cat(text, sizeof(text), &used, " and %s yet other collectives", ranks);
    }
    if (ngroups > 0) {
        diag_cat(text, sizeof(text), &used, " as operation #%u while this rank (%d) called %s",
                 r->seq, ctx->rank, mine_words);
    } else if ((blamed >= 0) && (blamed != ctx->rank)) {
        diag_cat(text, sizeof(text), &used,
                 "rank %d sent a message of operation #%u for another call than this rank's "
                 "(%d), %s",
                 blamed, r->seq, ctx->rank, mine_words);
    } else if ((first != NULL) && (first->blamed >= 0) && (first->blamed != ctx->rank)) {
        diag_cat(text, sizeof(text), &used,
                 "rank %d found that rank %d's call as operation #%u differs from its own, "
                 "which this rank (%d) shares: %s",
                 first->from, first->blamed, r->seq, ctx->rank, mine_words);
    } else {
        diag_cat(text, sizeof(text), &used,
                 "rank %d found that this rank's (%d) call as operation #%u, %s, differs from "
                 "its own",
                 (first != NULL) ? first->from : -1, ctx->rank, r->seq, mine_words);
    }
    if (diag_any(r, ctx->size, 0)) {
        diag_ranks(r, ctx->size, 0, ranks, sizeof(ranks));
        diag_cat(text, sizeof(text), &used, ", as did %s", ranks);
    }
    if (diag_any(r, ctx->size, DIAG_GROUPS + 2)) {
        diag_ranks(r, ctx->size, DIAG_GROUPS + 2, ranks, sizeof(ranks));
        diag_cat(text, sizeof(text), &used, "; %s had no operation #%u or were at another one",
                 ranks, r->seq);
    }
    if (diag_any(r, ctx->size, DIAG_GROUPS + 3)) {
        diag_ranks(r, ctx->size, DIAG_GROUPS + 3, ranks, sizeof(ranks));
        diag_cat(text, sizeof(text), &used, "; %s did not describe their call within %llu ms",
                 ranks, ms);
    }
    return gs__error_set(GS_ERR_MISMATCH, "%s: %s; %s", ctx->opname, text, diag_advice);
}

/*
 * The round about operation @p seq: this rank's call to every rank (a REPORT
 * blaming @p blamed when this rank found the mismatch, else a DESCRIBE), then
 * every rank's, then GS_ERR_MISMATCH in words. @p first: the message that
 * brought this rank in, or NULL.
 */
static gs_status_t diag_round(gs__algo_ctx_t *ctx, uint32_t seq, const diag_msg_t *first,
                              int blamed, uint16_t their_fp)
{
    const uint64_t wait_ns = (ctx->timeout_ns < DIAG_ANSWER_NS) ? ctx->timeout_ns : DIAG_ANSWER_NS;
    const size_t n = (size_t)ctx->size;
    uint8_t buf[DIAG_BYTES];
    char mine_words[192];
    diag_round_t r;
    diag_msg_t out;
    size_t vcount;
    gs_status_t status;
    void *mem;

    memset(&r, 0, sizeof(r));
    memset(&out, 0, sizeof(out));
    r.seq = seq;
    r.deadline = gs__now_ns() + wait_ns;
    r.deadline_ms = wait_ns / 1000000ull;
    r.left = ctx->size - 1;
    /* Without memory for the round this rank still tells the others. */
    mem = calloc(n, sizeof(gs__algo_call_t) + sizeof(int) + 1);
    if (mem != NULL) {
        r.calls = (gs__algo_call_t *)mem;
        r.group = (int *)(void *)(r.calls + n);
        r.state = (uint8_t *)(r.group + n);
        r.state[ctx->rank] = DIAG_HEARD;
    }
    out.type = (blamed >= 0) ? DIAG_REPORT : DIAG_DESCRIBE;
    out.from = ctx->rank;
    out.blamed = blamed;
    out.seq = seq;
    out.their_fp = their_fp;
    diag_mine(ctx, seq, &out.call, &vcount);
    diag_words(&out.call, vcount, mine_words, sizeof(mine_words));
    if (!out.call.known && (ctx->cur != NULL)) {
        char cur[160];
        gs__algo_call_t c;

        /* Another number: this rank is at an earlier or later operation. */
        gs__algo_call_of(ctx->cur, &c);
        diag_words(&c, ctx->cur->count, cur, sizeof(cur));
        snprintf(mine_words, sizeof(mine_words), "%s as operation #%u", cur, ctx->seq);
    } else if (!out.call.known) {
        snprintf(mine_words, sizeof(mine_words),
                 "nothing its flight recorder still holds as operation #%u", seq);
    }
    diag_encode(&out, buf);
    if (first != NULL) {
        diag_record(ctx, &r, first);
    }
    diag_tell_all(ctx, &r, buf);
    while ((r.state != NULL) && (r.left > 0)) {
        const uint64_t now = gs__now_ns();

        diag_gather(ctx, &r);
        if ((r.left == 0) || (now >= r.deadline) ||
            (gs__tp_progress(ctx->tr, (now + DIAG_STEP_NS < r.deadline) ? now + DIAG_STEP_NS
                                                                        : r.deadline) != GS_OK)) {
            break;
        }
    }
    if (r.state == NULL) {
        return gs__error_set(GS_ERR_MISMATCH,
                             "%s: the ranks called different collectives as operation #%u (this "
                             "rank, %d, called %s; out of memory to hear the others' calls); %s",
                             ctx->opname, seq, ctx->rank, mine_words, diag_advice);
    }
    r.calls[ctx->rank] = out.call;
    status = diag_fail(ctx, &r, mine_words, blamed, first);
    free(mem);
    return status;
}

gs_status_t gs__algo_diag_mismatch(gs__algo_ctx_t *ctx, int peer, uint64_t their_tag)
{
    const uint16_t their_fp = (uint16_t)((their_tag >> 48) & 0x7fffu);

    /* The raw check bits are detail; the error names both calls in words. */
    GS_INFO(COLL,
            "%s: rank %d's message of operation #%u has tag 0x%016llx (check bits 0x%04x) where "
            "this rank's call has check bits 0x%04x",
            ctx->opname, peer, ctx->seq, (unsigned long long)their_tag, (unsigned)their_fp,
            (unsigned)ctx->fp);
    return diag_round(ctx, ctx->seq, NULL, peer, their_fp);
}

/* Another rank's diagnosis message: take part in its round, then fail. */
static gs_status_t diag_reported(gs__algo_ctx_t *ctx, const diag_msg_t *m)
{
    return diag_round(ctx, m->seq, m, -1, 0);
}

gs_status_t gs__algo_diag_poll(gs__algo_ctx_t *ctx, uint64_t stalled_ns)
{
    const uint64_t now = gs__now_ns();
    diag_msg_t m;
    int r;

    if ((ctx->cur == NULL) || !gs__tp_has_probe(ctx->tr)) {
        return GS_OK;
    }
    while ((r = diag_take(ctx, &m, now + DIAG_TAKE_NS)) != 0) {
        if (r > 0) {
            return diag_reported(ctx, &m); /* a REPORT, or a DESCRIBE of a round under way */
        }
    }
    if ((ctx->shm != NULL) && (stalled_ns >= DIAG_SHM_AFTER_NS)) {
        /* Ranks on one host say which operation they are in: a peer in this
         * operation number with another fingerprint runs another call. */
        for (int p = 0; p < ctx->shm->n; p++) {
            const uint64_t w = gs__shm_peer_op(ctx->shm, p);

            if ((p != ctx->shm->me) && (w != 0) && ((uint32_t)(w >> 17) == ctx->seq) &&
                ((uint16_t)((w >> 1) & 0xffffu) != ctx->fp)) {
                return gs__algo_diag_mismatch(ctx, gs__shm_rank(ctx->shm, p),
                                              ((w >> 1) & 0x7fffull) << 48);
            }
        }
    }
    if ((stalled_ns < DIAG_SCAN_AFTER_NS) || (now < ctx->diag_scan_ns) || (ctx->recorder == NULL)) {
        return GS_OK;
    }
    ctx->diag_scan_ns = now + DIAG_SCAN_AFTER_NS;
    /* A peer waited on may have sent messages of this operation number that
     * no receive here takes, because their index differs: then they belong
     * to another call, and their check bits say so. */
    for (int p = 0; p <= ctx->size; p++) {
        /* ... and so may any other peer (p == size: any source): a rank in
         * another collective may send to one this rank does not wait on. */
        const int src = (p == ctx->size) ? GS_ANY_SOURCE : p;

        if ((p == ctx->rank) ||
            ((p < ctx->size) &&
             (atomic_load_explicit(&ctx->recorder->pend_recv[p], memory_order_relaxed) <= 0))) {
            continue;
        }
        for (uint32_t idx = 0; idx < DIAG_SCAN_IDX; idx++) {
            const uint64_t tag = ((uint64_t)(ctx->seq & 0xffffffu) << 24) | idx;
            gs__tp_completion_t comp;
            int found = 0;

            if (gs__tp_probe(ctx->tr, src, tag, &found, &comp) != GS_OK) {
                break;
            }
            if (found && ((comp.tag & GS_TP_TAG_P2P) == 0) &&
                ((uint16_t)((comp.tag >> 48) & 0x7fffu) != ctx->fp)) {
                return gs__algo_diag_mismatch(ctx, comp.peer, comp.tag);
            }
        }
    }
    return GS_OK;
}

gs_status_t gs__algo_diag_explain(gs__algo_ctx_t *ctx)
{
    const uint64_t deadline = gs__now_ns() + DIAG_EXPLAIN_NS;
    char saved[GS_ERROR_MSG_MAX];
    diag_msg_t m;

    if ((ctx->cur == NULL) || !gs__tp_has_probe(ctx->tr)) {
        return GS_OK;
    }
    snprintf(saved, sizeof(saved), "%s", gs__error_get());
    for (;;) {
        const uint64_t now = gs__now_ns();
        const int r = diag_take(ctx, &m, deadline);

        if (r > 0) {
            return diag_reported(ctx, &m);
        }
        if (r != 0) {
            continue;
        }
        if ((now >= deadline) ||
            (gs__tp_progress(ctx->tr, (now + DIAG_STEP_NS < deadline) ? now + DIAG_STEP_NS
                                                                      : deadline) != GS_OK)) {
            break;
        }
    }
    gs__error_copy_in(saved);
    return GS_OK;
}

gs_status_t gs__algo_diag_timeout(gs__algo_ctx_t *ctx, const gs__algo_req_t *waiting_on)
{
    char waits[256];
    char words[192];
    gs__algo_call_t c;
    const unsigned long long ms = (unsigned long long)(ctx->timeout_ns / 1000000ull);

    GS_ASSERT(ctx->cur != NULL); /* the context times out calls outside an operation itself */
    gs__algo_call_of(ctx->cur, &c);
    diag_words(&c, ctx->cur->count, words, sizeof(words));
    if ((ctx->recorder == NULL) ||
        (gs__recorder_waiting(ctx->recorder, waits, sizeof(waits)) == 0)) {
        if (waiting_on != NULL) {
            snprintf(waits, sizeof(waits), "%s rank %d",
                     waiting_on->is_send ? "send to" : "receive from", waiting_on->peer);
        } else {
            snprintf(waits, sizeof(waits), "an unnamed peer");
        }
    }
    return gs__error_set(GS_ERR_TIMEOUT,
                         "%s: rank %d timed out after %llu ms without progress in operation #%u, "
                         "%s: still waiting to %s; the ranks named are stuck, dead or in "
                         "another operation (GS_DUMP_SIGNAL or gs_comm_dump there shows which)",
                         ctx->opname, ctx->rank, ms, ctx->seq, words, waits);
}

const gs__algo_diag_ops_t gs__algo_diag_ops = {
    .mismatch = gs__algo_diag_mismatch,
    .explain = gs__algo_diag_explain,
    .poll = gs__algo_diag_poll,
    .timeout = gs__algo_diag_timeout,
};
