/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pure arithmetic of gradient bucketing: which tensors go into which
 * bucket, where each one sits in its bucket's fused layout, and whether a
 * bucket's tensors already lie back to back in memory (then it is reduced
 * in place, without a fusion copy). No allocation, no I/O, no threads:
 * the unit tests (tests/unit/test_bucket.c) check these functions alone,
 * and bucketer.c feeds them the registered tensors.
 *
 * The rules, shared by the first grouping and the rebuilt one:
 * - Tensors are taken in a fill order: the reverse registration order
 *   first, rank 0's observed ready order after a rebuild.
 * - A bucket is closed as soon as it holds at least its limit of bytes
 *   (first_bytes for bucket 0, bytes for the others; DDP's rule, so the
 *   tensor that crosses the limit stays in the bucket).
 * - A tensor whose dtype differs from the open bucket's closes that bucket
 *   first: a bucket holds one dtype.
 * - Inside a bucket the tensors are laid out in ascending id order, not in
 *   fill order, so the fused layout depends only on the ids, and it is the
 *   memory order of a flat gradient buffer registered in forward order.
 */
#ifndef GS_BUCKET_BUCKET_PLAN_H
#define GS_BUCKET_BUCKET_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/types.h"

/* What the plan needs to know of one registered tensor. */
typedef struct gs__bplan_tensor {
    uintptr_t addr;   /* first byte (any value when count is 0) */
    size_t count;     /* elements */
    size_t esize;     /* bytes per element */
    gs_dtype_t dtype; /* element type */
} gs__bplan_tensor_t;

/*
 * Assign the @p n tensors to buckets, taking them in @p order (a
 * permutation of 0..n-1). Writes bucket_of[id] for every id and returns
 * the number of buckets (0 when n is 0). Bucket indexes follow the fill
 * order: bucket 0 holds order[0].
 */
size_t gs__bplan_assign(const gs__bplan_tensor_t *t, size_t n, const uint32_t *order,
                        uint64_t first_bytes, uint64_t bytes, uint32_t *bucket_of);

/*
 * The fused layout of an assignment: members[first[b] .. first[b+1]) are
 * the ids of bucket b in ascending order (first has nbuckets + 1 entries),
 * offset_of[id] is the element offset of tensor id inside its bucket and
 * count_of[b] the elements of bucket b.
 */
void gs__bplan_layout(const gs__bplan_tensor_t *t, size_t n, const uint32_t *bucket_of,
                      size_t nbuckets, size_t *first, uint32_t *members, size_t *offset_of,
                      size_t *count_of);

/*
 * 1 when the @p nmembers tensors listed in @p members (in layout order) lie
 * back to back in memory in that order, empty tensors ignored; *base_out is
 * then the first byte of the first non-empty one (0 when all are empty).
 * 0 otherwise (*base_out untouched).
 */
int gs__bplan_contiguous(const gs__bplan_tensor_t *t, const uint32_t *members, size_t nmembers,
                         uintptr_t *base_out);

/* 1 when @p order holds every value 0..n-1 exactly once; @p seen is n bytes of scratch. */
int gs__bplan_is_permutation(const uint32_t *order, size_t n, uint8_t *seen);

/* 1 when two assignments of n tensors are the same. */
int gs__bplan_same(const uint32_t *bucket_of_a, const uint32_t *bucket_of_b, size_t n);

/* order = n-1, n-2, ..., 0: the fill order of the first step. */
void gs__bplan_reverse_order(uint32_t *order, size_t n);

#endif /* GS_BUCKET_BUCKET_PLAN_H */
