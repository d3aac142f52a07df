/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tree shapes as pure arithmetic: the in-order binary tree behind the
 * double binary tree all-reduce (algo_tree.c) and the binomial tree behind
 * binomial broadcast and reduce (algo_binomial.c). No I/O, no allocation:
 * every function answers for one rank in O(log n), so tests check the
 * shapes exhaustively for n = 1..64. Ranks and positions are int; -1 means
 * "none".
 *
 * In-order binary tree on positions 1..n: node x with lowest set bit b has
 * children x - b/2 and x + b/2 (the right child shrinks to x + b/4, x + b/8
 * ... while it lies past n), so the odd positions are the leaves and the
 * root is the largest power of two <= n. Depth is floor(log2 n).
 *
 *   n = 6:      4            n = 5:      4
 *             /   \                    /   \
 *            2     6                  2     5
 *           / \   /                  / \
 *          1   3 5                  1   3
 *
 * Double binary tree (NCCL's idea, our mapping): tree 0 puts rank r at
 * position r + 1; tree 1 puts rank r at position r, and rank 0 at position
 * n. Interior nodes sit at even positions, so tree 0's interior ranks are
 * the odd ranks and tree 1's are the even ranks (0 only when n is even):
 * every rank is interior in at most one tree, for every n. (NCCL mirrors
 * for even n and shifts for odd n; with its one-child root, the shift
 * leaves rank 0 interior in both trees. Shifting with an in-order root
 * avoids that.)
 *
 *   n = 5:  tree 0 (ranks)      tree 1 (ranks)
 *                3                   4
 *              /   \               /   \
 *             1     4             2     0
 *            / \                 / \
 *           0   2               1   3
 *
 * Binomial tree rooted at `root`, on virtual ranks v = (r - root) mod n:
 * the parent of v > 0 is v with its lowest set bit cleared; the children of
 * v are v + m for each power of two m below v's lowest set bit (below
 * 2^ceil(log2 n) for v = 0) with v + m < n.
 */
#ifndef GS_ALGO_PRIM_PATTERN_TREE_H
#define GS_ALGO_PRIM_PATTERN_TREE_H

/* Largest power of two <= n (n >= 1). */
static inline int gs__tree_pof2_floor(int n)
{
    int p = 1;

    while (p <= n / 2) {
        p *= 2;
    }
    return p;
}

/* Smallest power of two >= n (n >= 1). */
static inline int gs__tree_pof2_ceil(int n)
{
    int p = 1;

    while (p < n) {
        p *= 2;
    }
    return p;
}

/* floor(log2 n) for n >= 1. */
static inline int gs__tree_log2_floor(int n)
{
    int l = 0;

    while (n > 1) {
        n /= 2;
        l++;
    }
    return l;
}

/* ------------------------------------------------------------------ */
/* In-order binary tree on positions 1..n                              */
/* ------------------------------------------------------------------ */

static inline int gs__itree_root(int n)
{
    return gs__tree_pof2_floor(n);
}

/* Parent position of x (1 <= x <= n), or -1 for the root. */
static inline int gs__itree_parent(int n, int x)
{
    const int b = x & -x;

    if (x == gs__itree_root(n)) {
        return -1;
    }
    /* x is the natural left child of x + b unless that lies past n, in which
     * case x is the clipped right child of x - b. */
    if (((x & (2 * b)) == 0) && (x + b <= n)) {
        return x + b;
    }
    return x - b;
}

/* Child positions of x (-1 when absent); the left one is always lower. */
static inline void gs__itree_children(int n, int x, int *left, int *right)
{
    int c = (x & -x) / 2;

    *left = (c >= 1) ? x - c : -1;
    while ((c >= 1) && (x + c > n)) {
        c /= 2;
    }
    *right = (c >= 1) ? x + c : -1;
}

/* ------------------------------------------------------------------ */
/* Double binary tree on ranks 0..n-1                                  */
/* ------------------------------------------------------------------ */

/* Position of rank r in tree t (0 or 1). */
static inline int gs__dtree_pos(int n, int t, int r)
{
    if (t == 0) {
        return r + 1;
    }
    return (r == 0) ? n : r;
}

/* Rank at position x of tree t; -1 stays -1. */
static inline int gs__dtree_rank(int n, int t, int x)
{
    if (x < 0) {
        return -1;
    }
    if (t == 0) {
        return x - 1;
    }
    return (x == n) ? 0 : x;
}

/* The neighbours of rank r in tree t: parent and up to two children (-1 when absent). */
static inline void gs__dtree_node(int n, int t, int r, int *parent, int *child0, int *child1)
{
    const int x = gs__dtree_pos(n, t, r);
    int l, h;

    gs__itree_children(n, x, &l, &h);
    *parent = gs__dtree_rank(n, t, gs__itree_parent(n, x));
    *child0 = gs__dtree_rank(n, t, l);
    *child1 = gs__dtree_rank(n, t, h);
}

/* Root rank of tree t. */
static inline int gs__dtree_root(int n, int t)
{
    return gs__dtree_rank(n, t, gs__itree_root(n));
}

/* Edges on the longest root-to-leaf path (both trees have the same shape). */
static inline int gs__dtree_depth(int n)
{
    return gs__tree_log2_floor(n);
}

/* ------------------------------------------------------------------ */
/* Binomial tree on virtual ranks v = (rank - root) mod n               */
/* ------------------------------------------------------------------ */

static inline int gs__binom_vrank(int n, int root, int r)
{
    return (r - root + n) % n;
}

static inline int gs__binom_rank(int n, int root, int v)
{
    return (v < 0) ? -1 : (v + root) % n;
}

/* Parent virtual rank of v, or -1 for v = 0. */
static inline int gs__binom_parent(int v)
{
    return (v == 0) ? -1 : (v & (v - 1));
}

/* One past the largest child distance of v: children are v + m for powers
 * of two m < gs__binom_span(n, v) with v + m < n. */
static inline int gs__binom_span(int n, int v)
{
    return (v == 0) ? gs__tree_pof2_ceil(n) : (v & -v);
}

/* Number of children of v. */
static inline int gs__binom_nchildren(int n, int v)
{
    int k = 0;

    for (int m = 1; m < gs__binom_span(n, v); m *= 2) {
        k += (v + m < n);
    }
    return k;
}

/* Rounds of a binomial broadcast or reduce: ceil(log2 n). */
static inline int gs__binom_rounds(int n)
{
    return gs__tree_log2_floor(gs__tree_pof2_ceil(n));
}

#endif /* GS_ALGO_PRIM_PATTERN_TREE_H */
