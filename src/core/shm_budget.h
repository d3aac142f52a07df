/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GS_SHM_MAX_BYTES (env_table.h): how much shared memory the L ranks of a
 * communicator on one host take together, and so how large each pair's
 * rings are and which pairs have them. Pure functions: config.c validates
 * the knob with gs__shm_budget_parse, the TCP transport sizes its pair
 * rings with gs__shm_plan (tcp_pipe_shm.c), and the unit tests check both.
 *
 * The budget holds the communicator's host segment first (L x 2 slots,
 * algo/ctx/ctx_shm.h), then the L (L - 1) / 2 pair segments (two rings and
 * an overhead each). The ring is the largest power of two up to
 * GS_SHM_BYTES that lets every pair fit; below GS_SHM_RING_FLOOR it stays
 * at the floor and only the nearest pairs get one: local ranks i and j are
 * d = min(|i - j|, L - |i - j|) apart around the host, and the pairs of
 * distance 1, 2, ... are taken while all of a distance fit, so a ring
 * algorithm's neighbours keep shared memory longest. Memory grows with L,
 * not L squared: auto is 32 MiB per local rank.
 */
#ifndef GS_CORE_SHM_BUDGET_H
#define GS_CORE_SHM_BUDGET_H

#include <stdint.h>
#include <string.h>

#include "core/msg_limit.h"

/* The smallest GS_SHM_MAX_BYTES accepted, and the smallest ring a pair gets
 * for the budget's sake (a smaller GS_SHM_BYTES still wins). */
#define GS_SHM_BUDGET_MIN (64ull << 10)
#define GS_SHM_RING_FLOOR (64ull << 10)
/* auto: this much per local rank, at most half of /dev/shm. */
#define GS_SHM_AUTO_PER_RANK (32ull << 20)

/* What a budget gives the pairs of L local ranks. */
typedef struct gs__shm_plan {
    uint64_t budget; /* the whole budget, bytes */
    uint64_t ring;   /* bytes per direction of every pair that has shared memory */
    int max_dist;    /* pairs at most this far apart around the host have it */
    int pairs;       /* how many pairs have it */
    int pairs_total; /* L (L - 1) / 2 */
    uint64_t need;   /* bytes that would give every pair a GS_SHM_BYTES ring */
} gs__shm_plan_t;

/*
 * Parse GS_SHM_MAX_BYTES: "auto" (or empty) sets *auto_out to 1 and *out to
 * 0; otherwise a size (gs__size_parse) from GS_SHM_BUDGET_MIN to 16 TiB.
 * Returns 0, or -1 for anything else (outputs untouched).
 */
static inline int gs__shm_budget_parse(const char *text, int *auto_out, uint64_t *out)
{
    uint64_t v = 0;

    if ((text == NULL) || (text[0] == '\0') || (strcmp(text, "auto") == 0)) {
        *auto_out = 1;
        *out = 0;
        return 0;
    }
    if (gs__size_parse(text, GS_SHM_BUDGET_MIN, GS_MAX_MESSAGE_BYTES_MAX, &v) != 0) {
        return -1;
    }
    *auto_out = 0;
    *out = v;
    return 0;
}

/* The budget of @p nlocal ranks: @p value, or for auto the lesser of 32 MiB
 * a rank and half of @p shm_total (the size of /dev/shm; 0: unknown). */
static inline uint64_t gs__shm_budget(int is_auto, uint64_t value, int nlocal, uint64_t shm_total)
{
    uint64_t b = value;

    if (is_auto) {
        b = GS_SHM_AUTO_PER_RANK * (uint64_t)(nlocal > 0 ? nlocal : 1);
        if ((shm_total != 0) && (b > shm_total / 2u)) {
            b = shm_total / 2u;
        }
    }
    return b;
}

/* Pairs of @p nlocal ranks at most @p d apart around the host. */
static inline int gs__shm_pairs_within(int nlocal, int d)
{
    int n = 0;

    for (int k = 1; (k <= d) && (2 * k <= nlocal); k++) {
        n += (2 * k == nlocal) ? nlocal / 2 : nlocal;
    }
    return n;
}

/*
 * Plan the pair rings of @p nlocal ranks under @p budget bytes, of which
 * @p reserve go first (the host segment); @p ring_max is GS_SHM_BYTES and
 * @p pair_overhead the bytes a pair segment takes beyond its two rings.
 */
static inline void gs__shm_plan(uint64_t budget, int nlocal, uint64_t reserve, uint64_t ring_max,
                                uint64_t pair_overhead, gs__shm_plan_t *out)
{
    const uint64_t left = (budget > reserve) ? budget - reserve : 0;
    const int total = (nlocal > 1) ? nlocal * (nlocal - 1) / 2 : 0;
    const uint64_t floor = (ring_max < GS_SHM_RING_FLOOR) ? ring_max : GS_SHM_RING_FLOOR;
    uint64_t ring = ring_max;
    int d = 0;

    memset(out, 0, sizeof(*out));
    out->budget = budget;
    out->pairs_total = total;
    out->need = reserve + (uint64_t)total * (2u * ring_max + pair_overhead);
    if (total == 0) {
        out->ring = ring_max;
        return;
    }
    /* The largest power of two (or ring_max itself) that fits every pair. */
    while ((ring > floor) && ((uint64_t)total * (2u * ring + pair_overhead) > left)) {
        uint64_t p = 1;

        while (p * 2u < ring) {
            p *= 2u;
        }
        ring = (p < floor) ? floor : p;
    }
    out->ring = ring;
    if ((uint64_t)total * (2u * ring + pair_overhead) <= left) {
        out->max_dist = nlocal / 2;
        out->pairs = total;
        return;
    }
    /* At the floor: the nearest pairs, a whole distance at a time. */
    while ((2 * (d + 1) <= nlocal) &&
           ((uint64_t)gs__shm_pairs_within(nlocal, d + 1) * (2u * ring + pair_overhead) <= left)) {
        d++;
    }
    out->max_dist = d;
    out->pairs = gs__shm_pairs_within(nlocal, d);
}

/* The ring of local ranks @p i and @p j under @p plan: plan->ring, or 0 when
 * the pair talks TCP. */
static inline uint64_t gs__shm_plan_ring(const gs__shm_plan_t *plan, int nlocal, int i, int j)
{
    const int a = (i > j) ? i - j : j - i;
    const int d = (a < nlocal - a) ? a : nlocal - a;

    return ((d >= 1) && (d <= plan->max_dist)) ? plan->ring : 0;
}

#endif /* GS_CORE_SHM_BUDGET_H */
