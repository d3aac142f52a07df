/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Recursive doubling and recursive halving as pure arithmetic, for
 * algo_rd.c and algo_rabenseifner.c. No I/O, no allocation; tests check
 * every function exhaustively for n = 1..64.
 *
 * Any n is handled with MPICH's fold. Let p be the largest power of two
 * <= n and rem = n - p. Among the first 2*rem ranks each even rank hands
 * its whole vector to the odd rank above it and sits out ("folded"); each
 * odd rank r takes new rank r/2. Ranks r >= 2*rem take new rank r - rem.
 * The p new ranks then run a power-of-two algorithm, and at the end each
 * odd rank among the first 2*rem returns the result to the even rank below.
 *
 *   n = 5 (p = 4, rem = 1):  rank   0  1  2  3  4
 *                            new    -  0  1  2  3
 *
 * Recursive doubling, step k = 0..log2(p)-1: new rank v exchanges with
 * v ^ 2^k. Recursive halving (Rabenseifner's reduce-scatter) splits the
 * vector into p blocks and runs the masks m = p/2, p/4, .., 1: before the
 * step with mask m, v holds blocks gs__rd_window(v, 2m); it keeps
 * gs__rd_window(v, m) and sends the partner's gs__rd_window(v ^ m, m).
 * The all-gather runs the masks back up, m = 1, 2, .., p/2, sending
 * gs__rd_window(v, m) and receiving gs__rd_window(v ^ m, m). After the
 * reduce-scatter v holds block v.
 */
#ifndef GS_ALGO_PRIM_PATTERN_RD_H
#define GS_ALGO_PRIM_PATTERN_RD_H

#include <stddef.h>

/* Largest power of two <= n (n >= 1). */
static inline int gs__rd_pof2(int n)
{
    int p = 1;

    while (p <= n / 2) {
        p *= 2;
    }
    return p;
}

/* log2 of a power of two. */
static inline int gs__rd_log2(int p)
{
    int l = 0;

    while ((1 << l) < p) {
        l++;
    }
    return l;
}

/* Ranks beyond the power of two: n - p. */
static inline int gs__rd_rem(int n)
{
    return n - gs__rd_pof2(n);
}

/* New rank of rank r, or -1 when r is folded out. */
static inline int gs__rd_newrank(int n, int r)
{
    const int rem = gs__rd_rem(n);

    if (r < 2 * rem) {
        return ((r % 2) == 0) ? -1 : r / 2;
    }
    return r - rem;
}

/* Rank that holds new rank v. */
static inline int gs__rd_oldrank(int n, int v)
{
    const int rem = gs__rd_rem(n);

    return (v < rem) ? 2 * v + 1 : v + rem;
}

/* Fold partner of r (r ^ 1 among the first 2*rem ranks), or -1. */
static inline int gs__rd_fold_peer(int n, int r)
{
    return (r < 2 * gs__rd_rem(n)) ? (r ^ 1) : -1;
}

/* Rank r's partner at recursive doubling step k (mask 2^k), or -1 when r is folded out. */
static inline int gs__rd_peer(int n, int r, int k)
{
    const int v = gs__rd_newrank(n, r);

    return (v < 0) ? -1 : gs__rd_oldrank(n, v ^ (1 << k));
}

/* Blocks [*lo, *hi) of the aligned window of m blocks that contains block v. */
static inline void gs__rd_window(int v, int m, int *lo, int *hi)
{
    *lo = v & ~(m - 1);
    *hi = *lo + m;
}

/* Element offset of block b when count elements are split into p balanced
 * blocks (the first count % p blocks hold one more); b may be p (the end). */
static inline size_t gs__rd_block_off(size_t count, int p, int b)
{
    const size_t base = count / (size_t)p;
    const size_t extra = count % (size_t)p;
    const size_t ub = (size_t)b;

    return ub * base + (ub < extra ? ub : extra);
}

#endif /* GS_ALGO_PRIM_PATTERN_RD_H */
