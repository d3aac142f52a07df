/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Collectives in the host segment (GS_ALGO_SHM; ctx_shm.h has the segment,
 * docs/design.md "Collectives in a host segment" the design). Every member
 * is rank m of a communicator on one host; n members; S bytes.
 *
 * All-reduce, three designs (d->design, chosen by selection):
 * - one round: copy the input into this member's slot, finish the phase,
 *   wait for every member, reduce the n slots in member order into the
 *   output. 1 phase; traffic (n + 3) S per member.
 * - chunked: per chunk of one slot, copy it in (phase 1), reduce this
 *   member's 1/n part over the n slots into the output and back into its
 *   slot (phase 2), copy the others' parts out. 2 phases per chunk;
 *   traffic about 5 S per member, the slots staying in the cache.
 * - single copy: publish the buffers (phase 1), read this member's 1/n
 *   part of every peer's input with process_vm_readv in pieces and reduce
 *   it into the output (phase 2), read every peer's reduced part straight
 *   into the output, and keep the output readable until every peer has
 *   read it (phase 3). Traffic about 3 S per member.
 * Each part of the result is computed by one member in one fixed order
 * and copied to the others, so every rank gets the same bits.
 * Barrier: one phase.
 *
 * Slots: every call (one-round) or chunk alternates between the member's
 * two slots, so no trailing barrier is needed (ctx_shm.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* process_vm_readv */
#endif

#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "algo/ctx/ctx_shm.h"
#include "algo/prim/prim.h"
#include "core/clock.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/reduce_cpu.h"

/* A failed read waits this long (in passes of a step) for the transport to see
 * the peer's death before it calls the address bad. */
#define SHM_DYING_NS 2000000000ull
#define SHM_DYING_STEP_NS 10000000ull
#define SHM_DYING_PASSES 400
/* Bytes a single-copy read brings in at a time (two such buffers stay in L2). */
#define SHM_PIECE_BYTES (256u << 10)

static const char *const design_names[GS_SHM_DESIGN_COUNT] = {"one-round", "chunked",
                                                              "single-copy"};

const char *gs__shm_design_name(int design)
{
    return ((unsigned)design < GS_SHM_DESIGN_COUNT) ? design_names[design] : "unknown";
}

int gs__shm_design_parse(const char *text)
{
    for (int i = 0; i < GS_SHM_DESIGN_COUNT; i++) {
        if (strcmp(text, design_names[i]) == 0) {
            return i;
        }
    }
    return -1;
}

static gs_status_t shm_none(gs__algo_ctx_t *ctx)
{
    return gs__error_set(GS_ERR_UNSUPPORTED,
                         "%s: algorithm 'shm' needs every rank of the communicator on one host "
                         "with a host segment (GS_SHM=1; see the WARN at init for why there is "
                         "none)",
                         ctx->opname);
}

static gs_status_t shm_one_round(gs__algo_ctx_t *ctx, gs__host_seg_t *s, const gs__coll_desc_t *d)
{
    const size_t esz = gs__dtype_size(d->dtype);
    const size_t bytes = d->count * esz;
    const int b = (int)(s->calls++ & 1u);
    gs_status_t status;

    if (bytes > s->slot_bytes) {
        return gs__error_set(GS_ERR_INTERNAL, "%s: %zu bytes do not fit a slot of %zu", ctx->opname,
                             bytes, s->slot_bytes);
    }
    memcpy(gs__shm_slot(s, s->me, b), d->sendbuf, bytes);
    status = gs__shm_wait_all(ctx, s, gs__shm_arrive(s), "one-round all-reduce");
    if (status != GS_OK) {
        return status;
    }
    gs__reduce(d->recvbuf, gs__shm_slot(s, 0, b), gs__shm_slot(s, 1, b), d->count, d->dtype, d->op);
    for (int m = 2; m < s->n; m++) {
        gs__reduce(d->recvbuf, d->recvbuf, gs__shm_slot(s, m, b), d->count, d->dtype, d->op);
    }
    if (d->op == GS_OP_AVG) {
        gs__reduce_scale(d->recvbuf, d->count, d->dtype, s->n);
    }
    return GS_OK;
}

static gs_status_t shm_chunked(gs__algo_ctx_t *ctx, gs__host_seg_t *s, const gs__coll_desc_t *d)
{
    const size_t esz = gs__dtype_size(d->dtype);
    const size_t ce = s->slot_bytes / esz; /* elements per chunk */
    const uint8_t *in = d->sendbuf;
    uint8_t *out = d->recvbuf;
    gs_status_t status = GS_OK;

    for (size_t off = 0; (off < d->count) && (status == GS_OK); off += ce) {
        const size_t len = (d->count - off < ce) ? d->count - off : ce;
        const int b = (int)(s->calls++ & 1u);
        uint8_t *mine = gs__shm_slot(s, s->me, b);
        size_t po;
        size_t pl;

        memcpy(mine, in + off * esz, len * esz);
        status = gs__shm_wait_all(ctx, s, gs__shm_arrive(s), "chunked all-reduce, copy-in");
        if (status != GS_OK) {
            break;
        }
        gs__algo_split(len, s->n, s->me, &po, &pl);
        if (pl > 0) {
            uint8_t *dst = out + (off + po) * esz;
            gs__reduce(dst, gs__shm_slot(s, 0, b) + po * esz, gs__shm_slot(s, 1, b) + po * esz, pl,
                       d->dtype, d->op);
            for (int m = 2; m < s->n; m++) {
                gs__reduce(dst, dst, gs__shm_slot(s, m, b) + po * esz, pl, d->dtype, d->op);
            }
            if (d->op == GS_OP_AVG) {
                gs__reduce_scale(dst, pl, d->dtype, s->n);
            }
            memcpy(mine + po * esz, dst, pl * esz);
        }
        status = gs__shm_wait_all(ctx, s, gs__shm_arrive(s), "chunked all-reduce, reduce");
        for (int m = 0; (m < s->n) && (status == GS_OK); m++) {
            size_t qo;
            size_t ql;

            if (m == s->me) {
                continue;
            }
            gs__algo_split(len, s->n, m, &qo, &ql);
            memcpy(out + (off + qo) * esz, gs__shm_slot(s, m, b) + qo * esz, ql * esz);
        }
    }
    return status;
}

/*
 * A read of member @p m's memory failed: a process being killed loses its
 * memory (EFAULT, then ESRCH) before its sockets close, and one that left the
 * collective (it saw another member fail) has moved on. Drive the transport
 * for up to SHM_DYING_NS until it sees member m, or any other member, fail
 * (and tells the others). Returns the failed member's rank, or -1.
 */
static int shm_peer_dying(gs__algo_ctx_t *ctx, const gs__host_seg_t *s, int m)
{
    const uint64_t until = gs__now_ns() + SHM_DYING_NS;

    if (!gs__tp_has_peer_failed(ctx->tr)) {
        return -1;
    }
    for (int i = 0;; i++) {
        /* Member m, else any other: a member that failed broke the collective, and
         * m may be alive and gone from it (this rank may have no link to m). */
        for (int k = -1; k < s->n; k++) {
            const int q = (k < 0) ? gs__shm_rank(s, m) : gs__shm_rank(s, k);

            if ((q != ctx->rank) && gs__tp_peer_failed(ctx->tr, q)) {
                return q;
            }
        }
        if ((i >= SHM_DYING_PASSES) || (gs__now_ns() >= until) ||
            (gs__tp_progress(ctx->tr, gs__now_ns() + SHM_DYING_STEP_NS) != GS_OK)) {
            return -1;
        }
    }
}

/* Read @p len bytes at @p remote of member @p m into @p dst. */
static gs_status_t shm_cma_read(gs__algo_ctx_t *ctx, const gs__host_seg_t *s, int m, void *dst,
                                uint64_t remote, size_t len)
{
    const gs__shm_line_t *l = gs__shm_line(s, m);
    size_t done = 0;

    while (done < len) {
        struct iovec li = {.iov_base = (uint8_t *)dst + done, .iov_len = len - done};
        struct iovec ri = {.iov_base = (void *)(uintptr_t)(remote + done), .iov_len = len - done};
        const ssize_t got = process_vm_readv((pid_t)l->pid, &li, 1, &ri, 1, 0);

        if (got <= 0) {
            const int e = (got < 0) ? errno : EIO;
            /* Gone (ESRCH), or dying: let the transport see it first, so that it
             * tells the other ranks and every rank names the same first failure. */
            const int failed = shm_peer_dying(ctx, s, m);

            if ((failed >= 0) || (e == ESRCH)) {
                return gs__shm_peer_gone(ctx, (failed >= 0) ? failed : gs__shm_rank(s, m),
                                         "reading (process_vm_readv) the buffer of",
                                         "single-copy all-reduce", s->phase);
            }
            return gs__error_set(GS_ERR_PROTOCOL,
                                 "%s: reading %zu bytes of rank %d's buffer at 0x%llx failed: %s "
                                 "(the address it published is not readable)",
                                 ctx->opname, len - done, gs__shm_rank(s, m),
                                 (unsigned long long)(remote + done), strerror(e));
        }
        done += (size_t)got;
    }
    return GS_OK;
}

static gs_status_t shm_single_copy(gs__algo_ctx_t *ctx, gs__host_seg_t *s, const gs__coll_desc_t *d)
{
    const size_t esz = gs__dtype_size(d->dtype);
    const size_t pe = SHM_PIECE_BYTES / esz; /* elements per piece */
    gs__shm_line_t *me = gs__shm_line(s, s->me);
    const uint8_t *in = d->sendbuf;
    uint8_t *out = d->recvbuf;
    uint8_t *tmp;
    size_t po;
    size_t pl;
    gs_status_t status = gs__algo_scratch(ctx, SHM_PIECE_BYTES, (void **)&tmp);

    if (status != GS_OK) {
        return status;
    }
    me->sbuf = (uint64_t)(uintptr_t)d->sendbuf;
    me->rbuf = (uint64_t)(uintptr_t)d->recvbuf;
    status = gs__shm_wait_all(ctx, s, gs__shm_arrive(s), "single-copy all-reduce, publish");
    gs__algo_split(d->count, s->n, s->me, &po, &pl);
    /* Reduce-scatter: this member's part, own input first, then every peer's in order. */
    for (size_t off = 0; (off < pl) && (status == GS_OK); off += pe) {
        const size_t len = (pl - off < pe) ? pl - off : pe;
        uint8_t *dst = out + (po + off) * esz;
        const uint8_t *own = in + (po + off) * esz;
        int first = 1;

        for (int m = 0; (m < s->n) && (status == GS_OK); m++) {
            if (m == s->me) {
                continue;
            }
            status = shm_cma_read(ctx, s, m, tmp, gs__shm_line(s, m)->sbuf + (po + off) * esz,
                                  len * esz);
            if (status == GS_OK) {
                gs__reduce(dst, first ? own : dst, tmp, len, d->dtype, d->op);
                first = 0;
            }
        }
        if ((status == GS_OK) && (d->op == GS_OP_AVG)) {
            gs__reduce_scale(dst, len, d->dtype, s->n);
        }
    }
    if (status == GS_OK) {
        status = gs__shm_wait_all(ctx, s, gs__shm_arrive(s), "single-copy all-reduce, reduce");
    }
    /* All-gather: every peer's reduced part straight into the output. */
    for (int m = 0; (m < s->n) && (status == GS_OK); m++) {
        size_t qo;
        size_t ql;

        if (m == s->me) {
            continue;
        }
        gs__algo_split(d->count, s->n, m, &qo, &ql);
        if (ql > 0) {
            status = shm_cma_read(ctx, s, m, out + qo * esz, gs__shm_line(s, m)->rbuf + qo * esz,
                                  ql * esz);
        }
    }
    if (status == GS_OK) {
        /* Every peer has read this member's part before its output changes hands. */
        status = gs__shm_wait_all(ctx, s, gs__shm_arrive(s), "single-copy all-reduce, gather");
    }
    return status;
}

gs_status_t gs__shm_allreduce(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    gs__host_seg_t *s = ctx->shm;

    if (ctx->size == 1) { /* alone: no segment, nothing to wait for */
        if (d->recvbuf != d->sendbuf) {
            memmove(d->recvbuf, d->sendbuf, d->count * gs__dtype_size(d->dtype));
        }
        return GS_OK;
    }
    if ((s == NULL) || (s->n != ctx->size)) {
        return shm_none(ctx);
    }
    if (d->count == 0) {
        return GS_OK;
    }
    s->sig = gs__shm_op_word(ctx->seq, ctx->fp);
    switch (d->design) {
    case GS_SHM_ONE_ROUND:
        if (d->count * gs__dtype_size(d->dtype) <= s->slot_bytes) {
            return shm_one_round(ctx, s, d);
        }
        return shm_chunked(ctx, s, d);
    case GS_SHM_SINGLE_COPY:
        if (s->cma) {
            return shm_single_copy(ctx, s, d);
        }
        return shm_chunked(ctx, s, d);
    default:
        return shm_chunked(ctx, s, d);
    }
}

/* The part member @p m owns: [*lo, *hi). */
static void shm_owned(const gs__host_seg_t *s, int m, const size_t *bounds, size_t *lo, size_t *hi)
{
    const int c = (m + 1) % s->n;

    *lo = bounds[c];
    *hi = bounds[c + 1];
}

/* The intersection of [lo, hi) with the window [off, off + len): [*a, *e). */
static int shm_clip(size_t lo, size_t hi, size_t off, size_t len, size_t *a, size_t *e)
{
    *a = (lo > off) ? lo : off;
    *e = (hi < off + len) ? hi : off + len;
    return *a < *e;
}

/* Reduce-scatter, one window: this member's owned part of it, over the
 * members' slots in member order, into recvbuf. */
static void shm_rs_window(const gs__host_seg_t *s, const gs__coll_desc_t *d, const size_t *bounds,
                          size_t off, size_t len, int b)
{
    const size_t esz = gs__dtype_size(d->dtype);
    size_t lo;
    size_t hi;
    size_t a;
    size_t e;

    shm_owned(s, s->me, bounds, &lo, &hi);
    if (shm_clip(lo, hi, off, len, &a, &e)) {
        uint8_t *dst = (uint8_t *)d->recvbuf + a * esz;
        const size_t k = (a - off) * esz;

        gs__reduce(dst, gs__shm_slot(s, 0, b) + k, gs__shm_slot(s, 1, b) + k, e - a, d->dtype,
                   d->op);
        for (int m = 2; m < s->n; m++) {
            gs__reduce(dst, dst, gs__shm_slot(s, m, b) + k, e - a, d->dtype, d->op);
        }
    }
}

/* All-gather, one window: every other member's owned part of it, from its
 * slot into recvbuf. */
static void shm_ag_window(const gs__host_seg_t *s, const gs__coll_desc_t *d, const size_t *bounds,
                          size_t off, size_t len, int b)
{
    const size_t esz = gs__dtype_size(d->dtype);

    for (int m = 0; m < s->n; m++) {
        size_t lo;
        size_t hi;
        size_t a;
        size_t e;

        shm_owned(s, m, bounds, &lo, &hi);
        if ((m != s->me) && shm_clip(lo, hi, off, len, &a, &e)) {
            memcpy((uint8_t *)d->recvbuf + a * esz, gs__shm_slot(s, m, b) + (a - off) * esz,
                   (e - a) * esz);
        }
    }
}

/*
 * Both phases move the vector through the slots a window of one slot at a
 * time, one phase per window: a member fills its slot (reduce-scatter: its
 * input window; all-gather: its owned part of recvbuf), finishes the phase,
 * then reads the others' slots. The slots alternate, so a member rewrites
 * slot b two windows later, after every member has passed the phase in
 * between, which each passed only after reading the window before it.
 */
static gs_status_t shm_host_phase(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d,
                                  const size_t *bounds, int gather)
{
    gs__host_seg_t *s = ctx->shm;
    const size_t esz = gs__dtype_size(d->dtype);
    gs_status_t status = GS_OK;
    size_t ce;
    size_t lo;
    size_t hi;

    if (s == NULL) {
        return shm_none(ctx);
    }
    ce = s->slot_bytes / esz;
    shm_owned(s, s->me, bounds, &lo, &hi);
    s->sig = gs__shm_op_word(ctx->seq, ctx->fp);
    for (size_t off = 0; (off < d->count) && (status == GS_OK); off += ce) {
        const size_t len = (d->count - off < ce) ? d->count - off : ce;
        const int b = (int)(s->calls++ & 1u);
        size_t a;
        size_t e;

        if (!gather) {
            memcpy(gs__shm_slot(s, s->me, b), (const uint8_t *)d->sendbuf + off * esz, len * esz);
        } else if (shm_clip(lo, hi, off, len, &a, &e)) {
            memcpy(gs__shm_slot(s, s->me, b) + (a - off) * esz,
                   (const uint8_t *)d->recvbuf + a * esz, (e - a) * esz);
        }
        status = gs__shm_wait_all(ctx, s, gs__shm_arrive(s),
                                  gather ? "hierarchical all-reduce, host all-gather"
                                         : "hierarchical all-reduce, host reduce-scatter");
        if ((status == GS_OK) && !gather) {
            shm_rs_window(s, d, bounds, off, len, b);
        } else if (status == GS_OK) {
            shm_ag_window(s, d, bounds, off, len, b);
        }
    }
    return status;
}

gs_status_t gs__shm_rs_chunks(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, const size_t *bounds)
{
    return shm_host_phase(ctx, d, bounds, 0);
}

gs_status_t gs__shm_ag_chunks(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, const size_t *bounds)
{
    return shm_host_phase(ctx, d, bounds, 1);
}

gs_status_t gs__shm_barrier(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    gs__host_seg_t *s = ctx->shm;

    (void)d;
    if (ctx->size == 1) {
        return GS_OK;
    }
    if ((s == NULL) || (s->n != ctx->size)) {
        return shm_none(ctx);
    }
    s->sig = gs__shm_op_word(ctx->seq, ctx->fp);
    return gs__shm_wait_all(ctx, s, gs__shm_arrive(s), "barrier");
}
