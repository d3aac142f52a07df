/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Update rules and gradient sums of the parameter server (ps_rule.h has
 * the formulas). f32 and f64 run plain loops the compiler vectorises; f16
 * and bf16 weights go through f32 one element at a time.
 */
#include "ps/ps_rule.h"

#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "gradsync/gradsync.h"

gs_dtype_t gs__ps_acc_dtype(gs_dtype_t dtype)
{
    return (dtype == GS_DTYPE_F64) ? GS_DTYPE_F64 : GS_DTYPE_F32;
}

int gs__ps_rule_nstate(const gs__ps_rule_cfg_t *c)
{
    switch (c->rule) {
    case GS_PS_RULE_SGD:
        return (c->momentum != 0.0) ? 1 : 0;
    case GS_PS_RULE_ADAM:
        return 2;
    default:
        return 0;
    }
}

static float half_get(gs_dtype_t dtype, const void *p, size_t i)
{
    const uint16_t h = ((const uint16_t *)p)[i];

    return (dtype == GS_DTYPE_F16) ? gs__f16_to_f32(h) : gs__bf16_to_f32(h);
}

static void half_set(gs_dtype_t dtype, void *p, size_t i, float x)
{
    ((uint16_t *)p)[i] = (dtype == GS_DTYPE_F16) ? gs__f32_to_f16(x) : gs__f32_to_bf16(x);
}

void gs__ps_accumulate(gs_dtype_t dtype, void *acc, const void *src, size_t n, int first)
{
    if (dtype == GS_DTYPE_F64) {
        double *a = (double *)acc;
        const double *s = (const double *)src;

        if (first) {
            memcpy(a, s, n * sizeof(double));
            return;
        }
        for (size_t i = 0; i < n; i++) {
            a[i] += s[i];
        }
    } else if (dtype == GS_DTYPE_F32) {
        float *a = (float *)acc;
        const float *s = (const float *)src;

        if (first) {
            memcpy(a, s, n * sizeof(float));
            return;
        }
        for (size_t i = 0; i < n; i++) {
            a[i] += s[i];
        }
    } else {
        float *a = (float *)acc;

        for (size_t i = 0; i < n; i++) {
            const float x = half_get(dtype, src, i);

            a[i] = first ? x : a[i] + x;
        }
    }
}

/* ---------------------------------------------------------------------- */
/* SGD                                                                    */
/* ---------------------------------------------------------------------- */

static void sgd_f32(const gs__ps_rule_cfg_t *c, float *w, const float *g, float *m, size_t n)
{
    const float lr = (float)c->lr;
    const float mu = (float)c->momentum;
    const float wd = (float)c->weight_decay;

    if ((m == NULL) && (wd == 0.0f)) {
        for (size_t i = 0; i < n; i++) {
            w[i] -= lr * g[i];
        }
        return;
    }
    for (size_t i = 0; i < n; i++) {
        float d = g[i] + wd * w[i];

        if (m != NULL) {
            m[i] = mu * m[i] + d;
            d = m[i];
        }
        w[i] -= lr * d;
    }
}

static void sgd_f64(const gs__ps_rule_cfg_t *c, double *w, const double *g, double *m, size_t n)
{
    const double lr = c->lr;
    const double mu = c->momentum;
    const double wd = c->weight_decay;

    for (size_t i = 0; i < n; i++) {
        double d = g[i] + wd * w[i];

        if (m != NULL) {
            m[i] = mu * m[i] + d;
            d = m[i];
        }
        w[i] -= lr * d;
    }
}

static void sgd_half(const gs__ps_rule_cfg_t *c, gs_dtype_t dtype, void *w, const float *g,
                     float *m, size_t n)
{
    const float lr = (float)c->lr;
    const float mu = (float)c->momentum;
    const float wd = (float)c->weight_decay;

    for (size_t i = 0; i < n; i++) {
        const float x = half_get(dtype, w, i);
        float d = g[i] + wd * x;

        if (m != NULL) {
            m[i] = mu * m[i] + d;
            d = m[i];
        }
        half_set(dtype, w, i, x - lr * d);
    }
}

/* ---------------------------------------------------------------------- */
/* Adam                                                                   */
/* ---------------------------------------------------------------------- */

static void adam_f32(const gs__ps_rule_cfg_t *c, gs_dtype_t dtype, void *wv, const float *g,
                     float *m, float *v, uint64_t t, size_t n)
{
    const float b1 = (float)c->beta1;
    const float b2 = (float)c->beta2;
    const float wd = (float)c->weight_decay;
    const float eps = (float)c->eps;
    /* lr / (1 - b1^t) and 1 / sqrt(1 - b2^t), computed once in double. */
    const float step = (float)(c->lr / (1.0 - pow(c->beta1, (double)t)));
    const float rc2 = (float)(1.0 / sqrt(1.0 - pow(c->beta2, (double)t)));

    for (size_t i = 0; i < n; i++) {
        const float x = (dtype == GS_DTYPE_F32) ? ((float *)wv)[i] : half_get(dtype, wv, i);
        const float d = g[i] + wd * x;
        float y;

        m[i] = b1 * m[i] + (1.0f - b1) * d;
        v[i] = b2 * v[i] + (1.0f - b2) * d * d;
        y = x - step * m[i] / (sqrtf(v[i]) * rc2 + eps);
        if (dtype == GS_DTYPE_F32) {
            ((float *)wv)[i] = y;
        } else {
            half_set(dtype, wv, i, y);
        }
    }
}

static void adam_f64(const gs__ps_rule_cfg_t *c, double *w, const double *g, double *m, double *v,
                     uint64_t t, size_t n)
{
    const double b1 = c->beta1;
    const double b2 = c->beta2;
    const double step = c->lr / (1.0 - pow(b1, (double)t));
    const double rc2 = 1.0 / sqrt(1.0 - pow(b2, (double)t));

    for (size_t i = 0; i < n; i++) {
        const double d = g[i] + c->weight_decay * w[i];

        m[i] = b1 * m[i] + (1.0 - b1) * d;
        v[i] = b2 * v[i] + (1.0 - b2) * d * d;
        w[i] -= step * m[i] / (sqrt(v[i]) * rc2 + c->eps);
    }
}

gs_status_t gs__ps_apply(const gs__ps_rule_cfg_t *c, uint64_t key, size_t offset, gs_dtype_t dtype,
                         void *w, const void *g, size_t n, gs__ps_opt_state_t *st)
{
    switch (c->rule) {
    case GS_PS_RULE_SGD:
        if (dtype == GS_DTYPE_F64) {
            sgd_f64(c, (double *)w, (const double *)g, (double *)st->m, n);
        } else if (dtype == GS_DTYPE_F32) {
            sgd_f32(c, (float *)w, (const float *)g, (float *)st->m, n);
        } else {
            sgd_half(c, dtype, w, (const float *)g, (float *)st->m, n);
        }
        return GS_OK;
    case GS_PS_RULE_ADAM:
        st->t++;
        if (dtype == GS_DTYPE_F64) {
            adam_f64(c, (double *)w, (const double *)g, (double *)st->m, (double *)st->v, st->t, n);
        } else {
            adam_f32(c, dtype, w, (const float *)g, (float *)st->m, (float *)st->v, st->t, n);
        }
        return GS_OK;
    case GS_PS_RULE_CALLBACK: {
        const gs_status_t status =
            c->fn(c->user, key, offset, n, w, dtype, g, gs__ps_acc_dtype(dtype));

        if (status != GS_OK) {
            return gs__error_set(GS_IS_ERR(status) ? status : GS_ERR_INVALID_USAGE,
                                 "the update callback returned %s for key %llu elements "
                                 "[%zu, +%zu)",
                                 gs_status_name(status), (unsigned long long)key, offset, n);
        }
        return GS_OK;
    }
    default:
        return gs__error_set(GS_ERR_INTERNAL, "unknown update rule %d", (int)c->rule);
    }
}
