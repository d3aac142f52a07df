/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Compressed all-reduce: the two-phase scheme (as in 1-bit Adam and
 * PowerSGD's reference implementations), with error feedback owned by the
 * library on both sides.
 *
 *   1. Every rank adds its worker residual to its input and encodes each of
 *      the n chunks (balanced split) separately.
 *   2. All-to-all: chunk c goes to rank c, which receives n encoded copies
 *      of its chunk (its own included, decoded locally).
 *   3. Rank r decodes and sums them in f32 (dividing by n for AVG), adds its
 *      server residual for chunk r and encodes the sum once more.
 *   4. All-gather of the encoded sums; every rank decodes all n chunks,
 *      its own included, so every rank ends with identical values.
 *
 * Wire bytes per rank: 2(n-1)/n * encoded size, i.e. the codec's ratio
 * times what the uncompressed ring sends. Two steps of alpha each (all
 * peers at once), so the latency term is 2 alpha + the per-peer costs.
 * Payloads carry the codec's self-describing header and are validated
 * before anything is decoded: a payload that does not match is
 * GS_ERR_PROTOCOL, never a read past a buffer. Lengths vary (zstd, sparse
 * codecs): receives are posted with the codec's upper bound and the real
 * length comes from the transport.
 *
 * Sparsifiers (top-k, random-k) run through the same scheme, so each chunk
 * is sparsified once by its sender and once by its owner; both residuals
 * keep what was dropped. Odd world sizes and counts < n need nothing
 * special: chunks may be empty, and an empty chunk still sends its header.
 *
 * Step table, n = 3 (chunk c of rank r written c@r; E = encode):
 *   phase 1:  r0 sends E(1@0) to r1, E(2@0) to r2; receives E(0@1), E(0@2)
 *   phase 2:  r0 sums 0@0+0@1+0@2, encodes S0, sends it to r1 and r2;
 *             receives S1 from r1, S2 from r2; decodes S0 S1 S2.
 */
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "compress/codec.h"
#include "core/clock.h"
#include "core/dtype.h"
#include "core/error.h"

#define COMP_ALIGN 64

typedef struct comp_layout {
    size_t cap;            /* encoded bytes of the largest chunk */
    size_t scratch;        /* codec scratch bytes */
    uint8_t *send;         /* n * cap: phase 1 payloads, then [r] = the encoded sum */
    uint8_t *recv;         /* n * cap: phase 1 receives, then phase 2 receives */
    size_t *send_len;      /* n */
    size_t *recv_len;      /* n */
    float *acc;            /* chunk r, f32 */
    uint8_t *codec_scratch;
    gs_algo_req_t *reqs;   /* 2n */
} comp_layout_t;

static size_t comp_align(size_t x)
{
    return (x + COMP_ALIGN - 1) & ~(size_t)(COMP_ALIGN - 1);
}

/* Post receives from every peer into recv slots and sends of send slots
 * (send_slot(c) for peer c), then wait for all; records the received
 * lengths. */
static gs_status_t comp_exchange(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d, comp_layout_t *l,
                                 uint32_t phase, int send_same_slot)
{
    const int n = ctx->size;
    const int r = ctx->rank;
    gs_status_t status = GS_OK;
    uint64_t deadline;
    int left = 0;

    memset(l->reqs, 0, sizeof(gs_algo_req_t) * 2 * (size_t)n);
    for (int i = 1; (i < n) && (status == GS_OK); i++) {
        const int from = (r - i + n) % n;
        status = gs__algo_irecv(ctx, from, gs__algo_tag(ctx, d, phase),
                                l->recv + (size_t)from * l->cap, l->cap, &l->reqs[2 * from]);
        left += (status == GS_OK);
    }
    for (int i = 1; (i < n) && (status == GS_OK); i++) {
        const int to = (r + i) % n;
        const int slot = send_same_slot ? r : to;
        status = gs__algo_isend(ctx, to, gs__algo_tag(ctx, d, phase),
                                l->send + (size_t)slot * l->cap, l->send_len[slot],
                                &l->reqs[2 * to + 1]);
        left += (status == GS_OK);
    }
    gs__algo_renew(ctx, &deadline);
    while ((status == GS_OK) && (left > 0)) {
        const gs_algo_req_t *blame = NULL;
        int progressed = 0;

        for (int i = 0; (i < 2 * n) && (status == GS_OK); i++) {
            gs_algo_req_t *q = &l->reqs[i];
            size_t nbytes = 0;
            int done = 0;

            if (q->req == NULL) {
                continue;
            }
            status = gs__algo_check_len(ctx, q, &done, &nbytes);
            if (done) {
                left--;
                progressed = 1;
                if (!q->is_send) {
                    l->recv_len[q->peer] = nbytes;
                }
            } else if (blame == NULL) {
                blame = q;
            }
        }
        if ((status == GS_OK) && (left > 0)) {
            if (progressed) {
                gs__algo_renew(ctx, &deadline);
            } else {
                status = gs__algo_progress(ctx, &deadline, blame);
            }
        }
    }
    if (status != GS_OK) {
        gs__algo_release_all(ctx, l->reqs, 2 * (size_t)n);
    }
    return status;
}

static gs_status_t comp_layout(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d, comp_layout_t *l)
{
    const gs_codec_config_t *cfg = (const gs_codec_config_t *)d->codec;
    const size_t n = (size_t)ctx->size;
    const size_t max_chunk = (d->count + n - 1) / n;
    size_t own_off, own_len, sc_in, sc_acc, total;
    uint8_t *base = NULL;
    gs_status_t status;
    void *mem = NULL;

    gs__algo_split(d->count, ctx->size, ctx->rank, &own_off, &own_len);
    status = gs_codec_encoded_size(cfg, max_chunk, d->dtype, &l->cap);
    if (status == GS_OK) {
        status = gs_codec_scratch_size(cfg, max_chunk, d->dtype, &sc_in);
    }
    if (status == GS_OK) {
        status = gs_codec_scratch_size(cfg, own_len, GS_DTYPE_F32, &sc_acc);
    }
    if (status != GS_OK) {
        return status;
    }
    l->cap = comp_align(l->cap);
    l->scratch = (sc_in > sc_acc) ? sc_in : sc_acc;
    total = 2 * n * l->cap + comp_align(2 * n * sizeof(size_t)) +
            comp_align(own_len * sizeof(float) + 1) + comp_align(l->scratch + 1) +
            comp_align(2 * n * sizeof(gs_algo_req_t));
    status = gs__algo_scratch(ctx, total + COMP_ALIGN, &mem);
    if (status != GS_OK) {
        return status;
    }
    base = (uint8_t *)comp_align((size_t)mem);
    l->send = base;
    base += n * l->cap;
    l->recv = base;
    base += n * l->cap;
    l->send_len = (size_t *)base;
    l->recv_len = l->send_len + n;
    base += comp_align(2 * n * sizeof(size_t));
    l->acc = (float *)base;
    base += comp_align(own_len * sizeof(float) + 1);
    l->codec_scratch = base;
    base += comp_align(l->scratch + 1);
    l->reqs = (gs_algo_req_t *)base;
    return GS_OK;
}

/* The server residual of this rank's chunk, (re)made when the chunk changes. */
static gs_status_t comp_server_ef(gs_ef_t ef, size_t own_len, gs_ef_t *out)
{
    gs_status_t status;

    *out = GS_EF_NULL;
    if (ef == GS_EF_NULL) {
        return GS_OK;
    }
    if ((ef->server != GS_EF_NULL) && (ef->server->count != own_len)) {
        gs_ef_destroy(ef->server);
        ef->server = GS_EF_NULL;
    }
    if (ef->server == GS_EF_NULL) {
        status = gs_ef_create(own_len, GS_DTYPE_F32, &ef->server);
        if (status != GS_OK) {
            return status;
        }
    }
    *out = ef->server;
    return GS_OK;
}

gs_status_t gs__compressed_allreduce(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d)
{
    const gs_codec_config_t *cfg = (const gs_codec_config_t *)d->codec;
    gs_ef_t ef = (gs_ef_t)d->ef;
    const int n = ctx->size;
    const int r = ctx->rank;
    const size_t esize = gs__dtype_size(d->dtype);
    const uint8_t *src = (const uint8_t *)d->sendbuf;
    uint8_t *dst = (uint8_t *)d->recvbuf;
    size_t own_off, own_len;
    comp_layout_t l;
    gs_ef_t server = GS_EF_NULL;
    gs_status_t status;

    if (d->count == 0) {
        return GS_OK;
    }
    gs__algo_split(d->count, n, r, &own_off, &own_len);
    status = comp_layout(ctx, d, &l);
    if (status == GS_OK) {
        status = comp_server_ef(ef, own_len, &server);
    }
    if (status != GS_OK) {
        return status;
    }

    /* Phase 1: encode every chunk with a view of the worker residual. */
    for (int c = 0; (c < n) && (status == GS_OK); c++) {
        size_t off, len;
        struct gs_ef view;
        gs__algo_split(d->count, n, c, &off, &len);
        if (ef != GS_EF_NULL) {
            view = *ef;
            view.count = len;
            view.residual = ef->residual + off;
            view.server = GS_EF_NULL;
        }
        status = gs_codec_encode(cfg, src + off * esize, len, d->dtype,
                                 (ef != GS_EF_NULL) ? &view : GS_EF_NULL, l.codec_scratch,
                                 l.scratch, l.send + (size_t)c * l.cap, l.cap, &l.send_len[c]);
    }
    if (ef != GS_EF_NULL) {
        ef->step++;
    }
    if (status == GS_OK) {
        /* Our own chunk never crosses the wire: decode it from the send slot. */
        memcpy(l.recv + (size_t)r * l.cap, l.send + (size_t)r * l.cap, l.send_len[r]);
        l.recv_len[r] = l.send_len[r];
        status = comp_exchange(ctx, d, &l, 0, 0);
    }

    /* Sum the n encoded copies of chunk r in f32; AVG divides once. */
    if (status == GS_OK) {
        memset(l.acc, 0, own_len * sizeof(float));
        for (int q = 0; (q < n) && (status == GS_OK); q++) {
            status = gs_codec_decode_accumulate(cfg, l.recv + (size_t)q * l.cap, l.recv_len[q],
                                                own_len, GS_DTYPE_F32, l.codec_scratch, l.scratch,
                                                l.acc);
            if (status != GS_OK) {
                status = gs__error_wrap(status, "%s: the compressed chunk from rank %d is bad: %s",
                                        ctx->opname, q, gs__error_get());
            }
        }
    }
    if ((status == GS_OK) && (d->op == GS_OP_AVG)) {
        const float inv = 1.0f / (float)n;
        for (size_t i = 0; i < own_len; i++) {
            l.acc[i] *= inv;
        }
    }
    /* Phase 2: encode the sum with the server residual; all-gather. */
    if (status == GS_OK) {
        status = gs_codec_encode(cfg, l.acc, own_len, GS_DTYPE_F32, server, l.codec_scratch,
                                 l.scratch, l.send + (size_t)r * l.cap, l.cap, &l.send_len[r]);
    }
    if (status == GS_OK) {
        memcpy(l.recv + (size_t)r * l.cap, l.send + (size_t)r * l.cap, l.send_len[r]);
        l.recv_len[r] = l.send_len[r];
        status = comp_exchange(ctx, d, &l, 1, 1);
    }
    for (int c = 0; (c < n) && (status == GS_OK); c++) {
        size_t off, len;
        gs__algo_split(d->count, n, c, &off, &len);
        status = gs_codec_decode(cfg, l.recv + (size_t)c * l.cap, l.recv_len[c], len, d->dtype,
                                 l.codec_scratch, l.scratch, dst + off * esize);
        if (status != GS_OK) {
            status = gs__error_wrap(status, "%s: the compressed sum from rank %d is bad: %s",
                                    ctx->opname, c, gs__error_get());
        }
    }
    return status;
}
