/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The parameter server's update rules and gradient sums, over one shard:
 * SGD with momentum and weight decay, Adam, or the caller's callback. Pure
 * arithmetic on caller-owned arrays (no allocation, no locking); the unit
 * tests compare it with a double-precision reference.
 *
 * Gradients and optimizer state are kept in the accumulator type: f64 for
 * f64 keys, f32 for f32, f16 and bf16 keys (half weights are read into f32,
 * updated and rounded to nearest even once per step).
 *
 * SGD (PyTorch's torch.optim.SGD without dampening or Nesterov):
 *   d = g + wd * w;  v = mu * v + d (v starts at 0);  w -= lr * (mu ? v : d)
 * Adam (torch.optim.Adam, L2 weight decay), step t counted per shard from 1:
 *   d = g + wd * w;  m = b1 m + (1 - b1) d;  v = b2 v + (1 - b2) d^2
 *   w -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
 */
#ifndef GS_PS_RULE_H
#define GS_PS_RULE_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/ps.h"

typedef struct gs__ps_rule_cfg {
    gs_ps_rule_t rule;
    double lr;
    double momentum;
    double weight_decay;
    double beta1;
    double beta2;
    double eps;
    gs_ps_update_fn_t fn;
    void *user;
} gs__ps_rule_cfg_t;

/* Optimizer state of one shard: arrays of the accumulator type. */
typedef struct gs__ps_opt_state {
    void *m;    /* SGD velocity (momentum != 0) or Adam first moment */
    void *v;    /* Adam second moment */
    uint64_t t; /* Adam steps taken */
} gs__ps_opt_state_t;

/* The accumulator type of a key type (f64 for f64, else f32). */
gs_dtype_t gs__ps_acc_dtype(gs_dtype_t dtype);

/* Number of state arrays (0, 1 or 2) the rule needs per shard. */
int gs__ps_rule_nstate(const gs__ps_rule_cfg_t *c);

/*
 * acc (accumulator type) = src (key type) when @p first, else acc += src.
 * Sums of integer values stay exact while they fit the accumulator's
 * mantissa.
 */
void gs__ps_accumulate(gs_dtype_t dtype, void *acc, const void *src, size_t n, int first);

/*
 * Apply the rule to @p n weights (key type, elements [offset, offset + n)
 * of @p key) with gradient @p g (accumulator type).
 * Returns GS_OK, or the callback's error (weights as the callback left them).
 */
gs_status_t gs__ps_apply(const gs__ps_rule_cfg_t *c, uint64_t key, size_t offset, gs_dtype_t dtype,
                         void *w, const void *g, size_t n, gs__ps_opt_state_t *st);

#endif /* GS_PS_RULE_H */
