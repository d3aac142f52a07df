/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Diagnosis of collectives that cannot finish (docs/design.md, "Diagnosis"):
 * (the fingerprint every tag of an operation carries in its check bits is
 * the context's, algo/ctx/algo_desc.c), the flight-recorder hooks around each collective, the words for a call
 * ("allreduce(count=1000, f32, sum)"), the timeout text naming the peers
 * still waited on, and the mismatch protocol: a rank whose receive meets a
 * message with another fingerprint sends a REPORT (its own call, in
 * numbers) to every rank and waits up to 1 s for the blamed rank's
 * description, so that every rank fails with GS_ERR_MISMATCH naming both
 * calls instead of waiting for its timeout. It never runs on the fast path:
 * only a failed receive or an operation blocked for 1 ms or more gets here.
 *
 * NOTE: a diagnosis message comes from the network: it is decoded field by
 * field and checked (diag_decode) before any value is used.
 */
#include "algo/diag/diag.h"

#include <stdio.h>
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
#define DIAG_ANSWER_NS 1000000000ull    /* a detector waits this long for the other side */
#define DIAG_STEP_NS 10000000ull
#define DIAG_OTHER_NS 200000000ull   /* then another rank's differing call will do */
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

/* "allreduce(count=1000, f32, sum)"; the count of a v call is this rank's part. */
static void diag_words(const gs__algo_call_t *c, size_t vcount, char *buf, size_t len)
{
    const int v = gs__coll_is_v((gs__coll_kind_t)c->kind);
    int used;

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

/* Keep @p in in *best when it says more about operation ctx->seq: the blamed
 * rank's own words (score 2) win over another rank's call that differs from
 * this rank's (score 1), which names the other side when the blamed rank is
 * silent (it may have failed on another rank's REPORT already). */
static void diag_consider(const gs__algo_ctx_t *ctx, int peer, const diag_msg_t *in,
                          diag_msg_t *best, int *score)
{
    int s = 0;

    if ((in->seq == ctx->seq) && in->call.known) {
        s = (in->from == peer) ? 2 : ((in->call.fp != ctx->fp) ? 1 : 0);
    }
    if (s > *score) {
        *best = *in;
        *score = s;
    }
}

gs_status_t gs__algo_diag_mismatch(gs__algo_ctx_t *ctx, int peer, uint64_t their_tag)
{
    const uint16_t their_fp = (uint16_t)((their_tag >> 48) & 0x7fffu);
    const uint64_t start = gs__now_ns();
    const uint64_t deadline = start + DIAG_ANSWER_NS;
    uint8_t buf[DIAG_BYTES];
    gs__tp_req_t *sends[64];
    char mine_words[192];
    char their_words[192];
    diag_msg_t out;
    diag_msg_t in;
    diag_msg_t best;
    size_t vcount;
    int score = 0;
    int left = 0;
    int first = 0;

    memset(&out, 0, sizeof(out));
    memset(&best, 0, sizeof(best));
    out.type = DIAG_REPORT;
    out.from = ctx->rank;
    out.blamed = peer;
    out.seq = ctx->seq;
    out.their_fp = their_fp;
    diag_mine(ctx, ctx->seq, &out.call, &vcount);
    diag_words(&out.call, vcount, mine_words, sizeof(mine_words));
    diag_encode(&out, buf);
    /* Tell every rank, in batches of 64 sends in flight (buf outlives them all). */
    while ((first < ctx->size) || (left > 0)) {
        int n = 0;

        for (int p = first; (p < ctx->size) && (n < 64); p++, first++) {
            if (p != ctx->rank) {
                diag_send(ctx, p, buf, &sends[n++]);
            }
        }
        for (;;) {
            const uint64_t now = gs__now_ns();

            left = 0;
            for (int i = 0; i < n; i++) {
                left += !diag_send_done(ctx, &sends[i]);
            }
            while ((score < 2) && (diag_take(ctx, &in, deadline) > 0)) {
                diag_consider(ctx, peer, &in, &best, &score);
            }
            if ((left == 0) || (now >= deadline)) {
                break;
            }
            (void)gs__tp_progress(ctx->tr,
                                  (now + DIAG_STEP_NS < deadline) ? now + DIAG_STEP_NS : deadline);
        }
        for (int i = 0; i < n; i++) {
            if (sends[i] != NULL) {
                gs__tp_req_release(ctx->tr, sends[i]);
            }
        }
        left = 0;
        if (gs__now_ns() >= deadline) {
            break;
        }
    }
    /* Then the blamed rank's own words (a REPORT of its own, or a DESCRIBE);
     * another rank's differing call will do after DIAG_OTHER_NS. */
    while (score < 2) {
        const uint64_t now = gs__now_ns();

        if (diag_take(ctx, &in, deadline) > 0) {
            diag_consider(ctx, peer, &in, &best, &score);
            continue;
        }
        if ((now >= deadline) || ((score == 1) && (now >= start + DIAG_OTHER_NS)) ||
            (gs__tp_progress(ctx->tr, (now + DIAG_STEP_NS < deadline) ? now + DIAG_STEP_NS
                                                                      : deadline) != GS_OK)) {
            break;
        }
    }
    if (score > 0) {
        char note[96] = "";

        if (best.from != peer) {
            snprintf(note, sizeof(note),
                     " (rank %d's message did not match either; it did not describe its call)",
                     peer);
        }
        diag_words(&best.call, best.call.count, their_words, sizeof(their_words));
        return gs__error_set(GS_ERR_MISMATCH,
                             "%s: rank %d called %s as operation #%u while this rank (%d) called "
                             "%s%s; %s",
                             ctx->opname, best.from, their_words, ctx->seq, ctx->rank, mine_words,
                             note, diag_advice);
    }
    return gs__error_set(GS_ERR_MISMATCH,
                         "%s: rank %d sent a message of operation #%u with fingerprint 0x%04x "
                         "while this rank (%d) called %s (fingerprint 0x%04x): rank %d called "
                         "another collective or passed other arguments (it did not describe its "
                         "call within %llu ms); %s",
                         ctx->opname, peer, ctx->seq, (unsigned)their_fp, ctx->rank, mine_words,
                         (unsigned)ctx->fp, peer, (unsigned long long)(DIAG_ANSWER_NS / 1000000ull),
                         diag_advice);
}

/* Another rank's REPORT: describe this rank's call to it when blamed, then fail. */
static gs_status_t diag_reported(gs__algo_ctx_t *ctx, const diag_msg_t *m)
{
    char mine_words[192];
    char their_words[192];
    char also[96];
    gs__algo_call_t mine;
    size_t vcount;

    diag_mine(ctx, m->seq, &mine, &vcount);
    if (m->blamed == ctx->rank) {
        const uint64_t deadline = gs__now_ns() + DIAG_ANSWER_NS;
        uint8_t buf[DIAG_BYTES];
        gs__tp_req_t *req = NULL;
        diag_msg_t out;

        memset(&out, 0, sizeof(out));
        out.type = DIAG_DESCRIBE;
        out.from = ctx->rank;
        out.blamed = -1;
        out.seq = m->seq;
        out.call = mine;
        diag_encode(&out, buf);
        diag_send(ctx, m->from, buf, &req);
        while (!diag_send_done(ctx, &req)) {
            const uint64_t now = gs__now_ns();

            if ((now >= deadline) ||
                (gs__tp_progress(ctx->tr, (now + DIAG_STEP_NS < deadline) ? now + DIAG_STEP_NS
                                                                          : deadline) != GS_OK)) {
                gs__tp_req_release(ctx->tr, req);
                break;
            }
        }
        also[0] = '\0';
    } else {
        snprintf(also, sizeof(also), " (rank %d found that rank %d's call does not match its own)",
                 m->from, m->blamed);
    }
    diag_words(&m->call, m->call.count, their_words, sizeof(their_words));
    diag_words(&mine, vcount, mine_words, sizeof(mine_words));
    if (!mine.known && (ctx->cur != NULL)) {
        char cur[160];
        gs__algo_call_t c;

        /* Another number: this rank is at an earlier or later operation. */
        gs__algo_call_of(ctx->cur, &c);
        diag_words(&c, ctx->cur->count, cur, sizeof(cur));
        snprintf(mine_words, sizeof(mine_words), "%s as operation #%u", cur, ctx->seq);
    } else if (!mine.known) {
        snprintf(mine_words, sizeof(mine_words),
                 "nothing its flight recorder still holds as operation #%u", m->seq);
    }
    return gs__error_set(GS_ERR_MISMATCH,
                         "%s: rank %d called %s as operation #%u while this rank (%d) called %s%s; "
                         "%s",
                         ctx->opname, m->from, their_words, m->seq, ctx->rank, mine_words, also,
                         diag_advice);
}

gs_status_t gs__algo_diag_poll(gs__algo_ctx_t *ctx, uint64_t stalled_ns)
{
    const uint64_t now = gs__now_ns();
    diag_msg_t m;
    int r;

    if ((ctx->cur == NULL) || !gs__tp_has_probe(ctx->tr)) {
        return GS_OK;
    }
    while ((r = diag_take(ctx, &m, now + DIAG_ANSWER_NS / 4)) != 0) {
        if ((r > 0) && (m.type == DIAG_REPORT)) {
            return diag_reported(ctx, &m);
        }
        /* A DESCRIBE that nobody waits for any more: dropped. */
    }
    if ((stalled_ns < DIAG_SCAN_AFTER_NS) || (now < ctx->diag_scan_ns) || (ctx->recorder == NULL)) {
        return GS_OK;
    }
    ctx->diag_scan_ns = now + DIAG_SCAN_AFTER_NS;
    /* A peer waited on may have sent messages of this operation number that
     * no receive here takes, because their index differs: then they belong
     * to another call, and their check bits say so. */
    for (int p = 0; p < ctx->size; p++) {
        if ((p == ctx->rank) ||
            (atomic_load_explicit(&ctx->recorder->pend_recv[p], memory_order_relaxed) <= 0)) {
            continue;
        }
        for (uint32_t idx = 0; idx < DIAG_SCAN_IDX; idx++) {
            const uint64_t tag = ((uint64_t)(ctx->seq & 0xffffffu) << 24) | idx;
            gs__tp_completion_t comp;
            int found = 0;

            if (gs__tp_probe(ctx->tr, p, tag, &found, &comp) != GS_OK) {
                break;
            }
            if (found && ((comp.tag & GS_TP_TAG_P2P) == 0) &&
                ((uint16_t)((comp.tag >> 48) & 0x7fffu) != ctx->fp)) {
                return gs__algo_diag_mismatch(ctx, p, comp.tag);
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

        if ((r > 0) && (m.type == DIAG_REPORT)) {
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
