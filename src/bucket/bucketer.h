/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bucketer object behind gradsync/bucket.h, shared by its two files:
 * bucketer.c (create, add, destroy, the grouping and its buffers,
 * introspection) and bucketer_step.c (ready, launch in bucket order, wait,
 * the rebuild after the first step). The grouping arithmetic itself is
 * pure and lives in bucket_plan.c. Built on the public API and core only:
 * no transport, algorithm or CUDA calls here.
 */
#ifndef GS_BUCKET_BUCKETER_H
#define GS_BUCKET_BUCKETER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "bucket/bucket_plan.h"
#include "gradsync/bucket.h"
#include "gradsync/compress.h"
#include "gradsync/gradsync.h"
#include "core/error.h"

/* Settings resolved from gs_bucketer_opts_t at create. */
typedef struct bkt_config {
    uint64_t bucket_bytes;   /* close a bucket at this many bytes */
    uint64_t first_bytes;    /* the same for bucket 0 */
    gs_op_t op;              /* GS_OP_SUM or GS_OP_AVG */
    gs_algo_t algo;          /* passed to gs_iallreduce_ex */
    int use_codec;           /* 1 when codec is set */
    int use_ef;              /* 1: an error-feedback residual per bucket */
    int rebuild;             /* -1 unset, 0 off, 1 on */
    void *stream;            /* passed to gs_iallreduce_ex */
    gs_codec_config_t codec; /* the caller's codec, copied */
} bkt_config_t;

/* The registered tensors (grows during registration only). */
typedef struct bkt_registry {
    gs__bplan_tensor_t *t; /* [n] address, count, element size, dtype */
    void **ptr;            /* [n] the caller's pointers */
    size_t n;              /* tensors registered */
    size_t cap;            /* allocated entries */
    uint64_t bytes;        /* sum of the tensors' bytes */
    int device;            /* 1: the tensors are device memory (all of them) */
    int host;              /* 1: some non-empty tensor is host memory */
    uintptr_t end;         /* one past the last non-empty tensor (the device rule) */
    size_t last_nonempty;  /* its id (valid when end != 0) */
} bkt_registry_t;

/* One bucket of a grouping, and its state in the current step. */
typedef struct bkt_bucket {
    size_t count;              /* elements */
    gs_dtype_t dtype;          /* element type */
    size_t esize;              /* bytes per element */
    int inplace;               /* reduced where its tensors lie */
    void *fusion;              /* fusion buffer (NULL when in place or empty) */
    void *base;                /* what is reduced: fusion, or the first tensor */
    gs_ef_t ef;                /* error-feedback residual, or GS_EF_NULL */
    gs_request_t req;          /* in flight since launch, until wait */
    gs_status_t launch_status; /* GS_OK, or why it did not start */
    gs_status_t status;        /* its result, once reaped early by a ready() */
    _Atomic size_t pending;    /* tensors not ready yet in this step */
} bkt_bucket_t;

/* A grouping: the assignment, its fused layout and its buckets. */
typedef struct bkt_plan {
    size_t nbuckets;
    uint32_t *bucket_of;   /* [ntensors] */
    size_t *offset_of;     /* [ntensors] element offset in the bucket */
    size_t *first;         /* [nbuckets + 1] into members */
    uint32_t *members;     /* [ntensors] ids by bucket, ascending in each */
    size_t *count_of;      /* [nbuckets] */
    bkt_bucket_t *buckets; /* [nbuckets] */
    uint64_t fusion_bytes; /* bytes of fusion buffers */
    size_t inplace;        /* buckets reduced in place */
} bkt_plan_t;

/* Per-step state, reset by wait. Written by ready() from any thread. */
typedef struct bkt_step {
    _Atomic unsigned char *ready; /* [ntensors] 1 once marked in this step */
    uint32_t *order;              /* [ntensors] ids in the order they were marked */
    _Atomic size_t claimed;       /* slots of order handed out */
    _Atomic size_t marked;        /* ready() calls completed (order written) */
    _Atomic uint64_t first_ns;    /* when the step's first ready() came */
    _Atomic uint64_t last_ns;     /* when its last ready() came */
    size_t next_launch;           /* first bucket not started (under mu) */
    size_t next_reap;             /* first bucket not finished and copied out early (under mu) */
    gs_status_t launch_err;       /* first failed launch of the step (under mu) */
    char launch_msg[GS_ERROR_MSG_MAX]; /* its sentence */
    gs_status_t reap_err;              /* first error of a bucket reaped early (under mu) */
    char reap_msg[GS_ERROR_MSG_MAX];   /* its sentence */
} bkt_step_t;

/* Counters behind gs_bucketer_stats (written by wait only). */
typedef struct bkt_counters {
    uint64_t steps;
    uint64_t failed_steps;
    uint64_t last_exposed_ns;
    uint64_t total_exposed_ns;
    uint64_t last_step_ns;
    int rebuilt;
} bkt_counters_t;

struct gs_bucketer {
    gs_comm_t comm;
    int rank;
    bkt_config_t cfg;
    bkt_registry_t reg;
    bkt_plan_t *plan;     /* NULL until the first ready() */
    _Atomic int built;    /* 1 once plan is set (release) */
    uint64_t steps_begun; /* steps whose wait finished; 0 during the first */
    gs_status_t dead;     /* GS_OK, or the error that made the bucketer unusable */
    pthread_mutex_t mu;   /* the build and the launches */
    bkt_step_t step;
    uint32_t *scratch;  /* [ntensors] the rebuild's order and assignment */
    uint32_t *scratch2; /* [ntensors] */
    uint8_t *seen;      /* [ntensors] permutation check */
    bkt_counters_t counters;
};

/* bucketer.c: form a grouping filled in @p order (ids) and allocate its
 * fusion buffers and residuals. GS_OK, GS_ERR_NO_MEMORY, GS_ERR_UNSUPPORTED
 * (a device bucket that is not contiguous), or an error of gs_ef_create. */
gs_status_t gs__bucketer_plan_create(gs_bucketer_t b, const uint32_t *order, bkt_plan_t **plan_out);

/* bucketer.c: free a grouping (its requests must be finished). */
void gs__bucketer_plan_destroy(bkt_plan_t *plan);

/* bucketer.c: the per-step arrays, allocated with the first grouping. */
gs_status_t gs__bucketer_step_alloc(gs_bucketer_t b);

/* bucketer.c: free the per-step arrays (NULL ones too) and set them to NULL. */
void gs__bucketer_step_free(gs_bucketer_t b);

/* bucketer_step.c: put the step state back to "nothing marked" for @p plan. */
void gs__bucketer_step_reset(gs_bucketer_t b);

#endif /* GS_BUCKET_BUCKETER_H */
