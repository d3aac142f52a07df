/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rabenseifner all-reduce: a recursive-halving reduce-scatter followed by a
 * recursive-doubling all-gather, for mid-size messages.
 *
 * What: with p = 2^k ranks the vector is split into p balanced blocks
 * (the first count % p hold one element more). Reduce-scatter, masks
 * m = p/2, p/4, .., 1: rank v keeps the half of its current window that
 * holds block v, sends the other half to v ^ m and reduces the partner's
 * copy of the kept half into its own. After k steps v holds the full
 * result of block v. All-gather, masks m = 1, 2, .., p/2: v sends its
 * window (m blocks) to v ^ m and receives the partner's window straight
 * into recvbuf (no copy), doubling the window. Each block is reduced on
 * one path only and then copied, so every rank ends bit-identical.
 * Cost, n = p a power of two, B bytes:
 *   T = 2 log2(n) alpha + 2 (n-1)/n B beta + (n-1)/n B gamma
 * Ring's bandwidth with log2(n) instead of n-1 latency terms; it loses to
 * the ring for large B only because its steps are not pipelined.
 *
 * Odd n (any n that is not a power of two): MPICH's fold, shared with
 * recursive doubling (algo_rd.c, pattern_rd.h): the even ranks among the
 * first 2*rem = 2(n - p) send their whole vector to the odd rank above,
 * which reduces it and takes part as new rank r/2; the result goes back at
 * the end. Extra cost 2 (alpha + B beta) + B gamma.
 * AVG: each active rank divides its own block by n once, after the
 * reduce-scatter. count < p leaves some blocks empty: empty messages are
 * skipped on both sides (both compute the same lengths). The first step
 * reads sendbuf directly; only the kept halves are ever written to
 * recvbuf, so in place and out of place both need no copy.
 *
 * Step table, n = 4, blocks A B C D (send/keep; "+" = reduce):
 *            RS m=2         RS m=1       AG m=1        AG m=2
 *   r0:  >2 CD, keep AB+  >1 B, A+     <>1 A|B       <>2 AB|CD
 *   r1:  >3 CD, keep AB+  >0 A, B+     <>0 B|A       <>3 AB|CD
 *   r2:  >0 AB, keep CD+  >3 D, C+     <>3 C|D       <>0 CD|AB
 *   r3:  >1 AB, keep CD+  >2 C, D+     <>2 D|C       <>1 CD|AB
 * n = 3 (p = 2; rank 0 folds into 1; new ranks 1->0, 2->1; blocks A B):
 *   fold 0 > 1+;  RS m=1: 1 keeps A, 2 keeps B;  AG m=1: 1 <> 2;  unfold 1 > 0
 * n = 5 (p = 4; rank 0 folds into 1; new ranks 1->0, 2->1, 3->2, 4->3):
 *   fold 0 > 1+;  then the n = 4 table on ranks 1 2 3 4;  unfold 1 > 0
 * Message indices: fold 0, RS step s -> 1 + s, AG step s -> 1 + k + s,
 * unfold 1 + 2k.
 */
#include "algo/prim/prim.h"
#include "algo/prim/pattern_rd.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/reduce_cpu.h"

/* Element range [*off, *off + *len) of the aligned window of m blocks that holds block v. */
static void rab_window(size_t count, int p, int v, int m, size_t *off, size_t *len)
{
    int lo, hi;

    gs__rd_window(v, m, &lo, &hi);
    *off = gs__rd_block_off(count, p, lo);
    *len = gs__rd_block_off(count, p, hi) - *off;
}

gs_status_t gs__rabenseifner_allreduce(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    const int n = ctx->size;
    const int p = gs__rd_pof2(n);
    const int k = gs__rd_log2(p);
    const int v = gs__rd_newrank(n, ctx->rank);
    const size_t esize = gs__dtype_size(d->dtype);
    uint8_t *const dst = (uint8_t *)d->recvbuf;
    const uint8_t *src = NULL;
    const void *fold_src = NULL;
    void *tmp = NULL;
    int done = 0;
    gs_status_t status = gs__rd_start(ctx, d, &tmp, &fold_src, &done);
    int s = 0;

    if ((status != GS_OK) || done) {
        return status;
    }
    src = (const uint8_t *)fold_src;
    /* Reduce-scatter by recursive halving. */
    for (int m = p / 2; (status == GS_OK) && (src != NULL) && (m >= 1); m /= 2, s++) {
        const int peer = gs__rd_oldrank(n, v ^ m);
        size_t koff, klen, soff, slen;

        rab_window(d->count, p, v, m, &koff, &klen);     /* kept */
        rab_window(d->count, p, v ^ m, m, &soff, &slen); /* sent */
        status = gs__algo_sendrecv(ctx, d, peer, (uint32_t)(1 + s), src + soff * esize,
                                   slen * esize, tmp, klen * esize);
        if (status != GS_OK) {
            break;
        }
        if ((v ^ m) < v) {
            gs__reduce(dst + koff * esize, tmp, src + koff * esize, klen, d->dtype, d->op);
        } else {
            /* cppcheck-suppress nullPointerArithmeticRedundantCheck ; the loop tests src != NULL */
            gs__reduce(dst + koff * esize, src + koff * esize, tmp, klen, d->dtype, d->op);
        }
        src = dst;
    }
    if ((status == GS_OK) && (src != NULL) && (d->op == GS_OP_AVG)) {
        size_t off, len;

        rab_window(d->count, p, v, 1, &off, &len);
        gs__reduce_scale(dst + off * esize, len, d->dtype, n);
    }
    /* All-gather by recursive doubling, receiving in place. */
    for (int m = 1; (status == GS_OK) && (src != NULL) && (m < p); m *= 2, s++) {
        const int peer = gs__rd_oldrank(n, v ^ m);
        size_t moff, mlen, poff, plen;

        rab_window(d->count, p, v, m, &moff, &mlen);     /* sent */
        rab_window(d->count, p, v ^ m, m, &poff, &plen); /* received */
        status = gs__algo_sendrecv(ctx, d, peer, (uint32_t)(1 + s), dst + moff * esize,
                                   mlen * esize, dst + poff * esize, plen * esize);
    }
    if (status == GS_OK) {
        status = gs__rd_fold_out(ctx, d, (uint32_t)(1 + 2 * k));
    }
    return status;
}
