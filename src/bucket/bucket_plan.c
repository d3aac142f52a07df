/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bucket assignment, fused layout and contiguity (bucket_plan.h has the
 * rules). Pure functions over caller-owned arrays: they never allocate and
 * never fail, so bucketer.c can run them on a step's critical path and the
 * unit tests can run them exhaustively.
 */
#include "bucket/bucket_plan.h"

#include <string.h>

size_t gs__bplan_assign(const gs__bplan_tensor_t *t, size_t n, const uint32_t *order,
                        uint64_t first_bytes, uint64_t bytes, uint32_t *bucket_of)
{
    size_t nbuckets = 0;
    uint64_t filled = 0;
    int open = 0;
    gs_dtype_t open_dtype = GS_DTYPE_F32;

    for (size_t k = 0; k < n; k++) {
        const uint32_t id = order[k];

        if (open && (t[id].dtype != open_dtype)) {
            nbuckets++;
            open = 0;
        }
        if (!open) {
            open = 1;
            filled = 0;
            open_dtype = t[id].dtype;
        }
        bucket_of[id] = (uint32_t)nbuckets;
        filled += (uint64_t)t[id].count * t[id].esize;
        if (filled >= ((nbuckets == 0) ? first_bytes : bytes)) {
            nbuckets++;
            open = 0;
        }
    }
    return nbuckets + (open ? 1u : 0u);
}

void gs__bplan_layout(const gs__bplan_tensor_t *t, size_t n, const uint32_t *bucket_of,
                      size_t nbuckets, size_t *first, uint32_t *members, size_t *offset_of,
                      size_t *count_of)
{
    /* A counting sort by bucket; scanning ids upwards keeps each bucket's ids ascending. */
    memset(first, 0, (nbuckets + 1) * sizeof(*first));
    for (size_t id = 0; id < n; id++) {
        first[bucket_of[id] + 1]++;
    }
    for (size_t b = 0; b < nbuckets; b++) {
        first[b + 1] += first[b];
        count_of[b] = 0;
    }
    for (size_t id = 0; id < n; id++) {
        const uint32_t b = bucket_of[id];

        members[first[b]++] = (uint32_t)id;
        offset_of[id] = count_of[b];
        count_of[b] += t[id].count;
    }
    /* first[b] now points one past bucket b's last member: shift back. */
    for (size_t b = nbuckets; b > 0; b--) {
        first[b] = first[b - 1];
    }
    first[0] = 0;
}

int gs__bplan_contiguous(const gs__bplan_tensor_t *t, const uint32_t *members, size_t nmembers,
                         uintptr_t *base_out)
{
    uintptr_t base = 0, next = 0;
    int seen = 0;

    for (size_t k = 0; k < nmembers; k++) {
        const gs__bplan_tensor_t *x = &t[members[k]];

        if (x->count == 0) {
            continue;
        }
        if (seen && (x->addr != next)) {
            return 0;
        }
        if (!seen) {
            base = x->addr;
            seen = 1;
        }
        next = x->addr + (uintptr_t)(x->count * x->esize);
    }
    *base_out = base;
    return 1;
}

int gs__bplan_is_permutation(const uint32_t *order, size_t n, uint8_t *seen)
{
    memset(seen, 0, n);
    for (size_t k = 0; k < n; k++) {
        if ((order[k] >= n) || seen[order[k]]) {
            return 0;
        }
        seen[order[k]] = 1;
    }
    return 1;
}

int gs__bplan_same(const uint32_t *bucket_of_a, const uint32_t *bucket_of_b, size_t n)
{
    return (n == 0) || (memcmp(bucket_of_a, bucket_of_b, n * sizeof(*bucket_of_a)) == 0);
}

void gs__bplan_reverse_order(uint32_t *order, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        order[k] = (uint32_t)(n - 1 - k);
    }
}
