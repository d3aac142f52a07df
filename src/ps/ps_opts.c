/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Options of the parameter server: defaults < environment (GS_PS_SERVERS,
 * GS_TIMEOUT_MS) < the caller's gs_ps_opts_t fields, validated on each
 * rank, then compared between ranks (gs_ps_create fails on every rank,
 * naming the first that differs). Reads only the fields that fit in the
 * caller's opts->size. Does not create anything.
 */
#include "ps/ps_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/config.h"
#include "core/log.h"

#define PS_DEFAULT_STALENESS 2
#define PS_DEFAULT_LR 0.01
#define PS_DEFAULT_SPLIT_BYTES (1 << 20)
#define PS_HEARTBEAT_MAX_NS 1000000000ull

/* ====================================================================== */
/* Options                                                                */
/* ====================================================================== */

#define OPT_HAS(_o, _field)                                                                        \
    (((_o) != NULL) &&                                                                             \
     ((_o)->size >= offsetof(gs_ps_opts_t, _field) + sizeof(((gs_ps_opts_t *)0)->_field)))

/* An integer knob of the environment, parsed by the configuration's own
 * parser (core/config.c, the one table of knobs); its error names
 * gs_ps_create. */
static gs_status_t ps_env_int(const char *env, int *value_out, int *set_out)
{
    const gs_status_t status = gs__cfg_env_int(env, value_out, set_out);

    if (status != GS_OK) {
        return gs__error_wrap(status, "gs_ps_create: %s", gs__error_get());
    }
    return GS_OK;
}

/* A real option: @p v when the caller's struct has the field and set it. */
static double opt_real(int has, double v, double def)
{
    return (has && (v != (double)GS_UNSET)) ? v : def;
}

/* Resolve and validate the options of this rank. */
gs_status_t gs__ps_cfg_resolve(const gs_ps_opts_t *o, int nranks, gs__ps_cfg_t *c)
{
    int set = 0;

    memset(c, 0, sizeof(*c));
    if ((o != NULL) && (o->size < offsetof(gs_ps_opts_t, consistency) + sizeof(o->consistency))) {
        return gs__error_set(
            GS_ERR_INVALID_ARG,
            "gs_ps_create: opts->size is %zu (initialise opts with GS_PS_OPTS_INIT)", o->size);
    }
    c->consistency = OPT_HAS(o, consistency) ? o->consistency : GS_PS_BSP;
    if ((c->consistency != GS_PS_BSP) && (c->consistency != GS_PS_SSP) &&
        (c->consistency != GS_PS_ASP)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_ps_create: opts->consistency is %d",
                             (int)c->consistency);
    }
    c->staleness =
        (OPT_HAS(o, staleness) && (o->staleness != GS_UNSET)) ? o->staleness : PS_DEFAULT_STALENESS;
    if (c->staleness < 0) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_ps_create: opts->staleness is %d (must be >= 0)", c->staleness);
    }
    if (c->consistency == GS_PS_BSP) {
        c->staleness = 0;
    }
    if (OPT_HAS(o, servers) && (o->servers != GS_UNSET)) {
        c->servers = o->servers;
    } else {
        GS_CHECK(ps_env_int("GS_PS_SERVERS", &c->servers, &set));
        if (set) {
            GS_INFO(ENV, "GS_PS_SERVERS=%d", c->servers);
        }
    }
    if ((c->servers < 0) || ((c->servers > 0) && (c->servers >= nranks))) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_ps_create: %d server ranks asked of %d ranks (0 for colocated "
                             "servers, else 1 .. %d, leaving at least one worker)",
                             c->servers, nranks, nranks - 1);
    }
    c->rule.rule = OPT_HAS(o, rule) ? o->rule : GS_PS_RULE_SGD;
    c->rule.lr = opt_real(OPT_HAS(o, lr), OPT_HAS(o, lr) ? o->lr : 0, PS_DEFAULT_LR);
    c->rule.momentum = opt_real(OPT_HAS(o, momentum), OPT_HAS(o, momentum) ? o->momentum : 0, 0.0);
    c->rule.weight_decay =
        opt_real(OPT_HAS(o, weight_decay), OPT_HAS(o, weight_decay) ? o->weight_decay : 0, 0.0);
    c->rule.beta1 = opt_real(OPT_HAS(o, beta1), OPT_HAS(o, beta1) ? o->beta1 : 0, 0.9);
    c->rule.beta2 = opt_real(OPT_HAS(o, beta2), OPT_HAS(o, beta2) ? o->beta2 : 0, 0.999);
    c->rule.eps = opt_real(OPT_HAS(o, eps), OPT_HAS(o, eps) ? o->eps : 0, 1e-8);
    c->rule.fn = OPT_HAS(o, update_fn) ? o->update_fn : NULL;
    c->rule.user = OPT_HAS(o, user) ? o->user : NULL;
    if ((c->rule.rule != GS_PS_RULE_SGD) && (c->rule.rule != GS_PS_RULE_ADAM) &&
        (c->rule.rule != GS_PS_RULE_CALLBACK)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_ps_create: opts->rule is %d",
                             (int)c->rule.rule);
    }
    if ((c->rule.rule == GS_PS_RULE_CALLBACK) && (c->rule.fn == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_ps_create: opts->rule is GS_PS_RULE_CALLBACK but opts->update_fn "
                             "is NULL");
    }
    if (!isfinite(c->rule.lr) || !(c->rule.momentum >= 0.0) || !(c->rule.momentum < 1.0) ||
        !(c->rule.weight_decay >= 0.0) || !isfinite(c->rule.weight_decay) ||
        !(c->rule.beta1 >= 0.0) || !(c->rule.beta1 < 1.0) || !(c->rule.beta2 >= 0.0) ||
        !(c->rule.beta2 < 1.0) || !(c->rule.eps > 0.0) || !isfinite(c->rule.eps)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_ps_create: bad rule parameters (lr %g finite, momentum %g and "
                             "beta1 %g, beta2 %g in [0, 1), weight_decay %g >= 0, eps %g > 0)",
                             c->rule.lr, c->rule.momentum, c->rule.beta1, c->rule.beta2,
                             c->rule.weight_decay, c->rule.eps);
    }
    {
        const gs_codec_config_t *cc = OPT_HAS(o, codec) ? o->codec : NULL;
        gs_codec_config_t def = GS_CODEC_CONFIG_INIT;

        c->codec = def;
        if (cc != NULL) {
            size_t nb;

            if ((cc->size < offsetof(gs_codec_config_t, kind) + sizeof(cc->kind)) ||
                (cc->size > 4096)) {
                return gs__error_set(GS_ERR_INVALID_ARG,
                                     "gs_ps_create: opts->codec->size is %zu (initialise it with "
                                     "GS_CODEC_CONFIG_INIT)",
                                     cc->size);
            }
            memcpy(&c->codec, cc, (cc->size < sizeof(c->codec)) ? cc->size : sizeof(c->codec));
            c->codec.size = sizeof(c->codec);
            if (gs_codec_encoded_size(&c->codec, 1, GS_DTYPE_F32, &nb) != GS_OK) {
                return gs__error_wrap(GS_ERR_INVALID_ARG, "gs_ps_create: opts->codec: %s",
                                      gs__error_get());
            }
            c->has_codec = (c->codec.kind != GS_CODEC_NONE) || (c->codec.zstd != GS_CODEC_ZSTD_OFF);
        }
    }
    c->split_bytes = PS_DEFAULT_SPLIT_BYTES;
    if (OPT_HAS(o, split_bytes) && (o->split_bytes != (int64_t)GS_UNSET)) {
        if (o->split_bytes < 1) {
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "gs_ps_create: opts->split_bytes is %lld (must be >= 1)",
                                 (long long)o->split_bytes);
        }
        c->split_bytes = (uint64_t)o->split_bytes;
    }
    if (OPT_HAS(o, timeout_ms) && (o->timeout_ms != GS_UNSET)) {
        c->timeout_ms = o->timeout_ms;
    } else {
        GS_CHECK(ps_env_int("GS_TIMEOUT_MS", &c->timeout_ms, &set));
    }
    if (c->timeout_ms < 1) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_ps_create: timeout of %d ms", c->timeout_ms);
    }
    c->timeout_ns = (uint64_t)c->timeout_ms * 1000000ull;
    c->heartbeat_ns = c->timeout_ns / 4;
    if (c->heartbeat_ns > PS_HEARTBEAT_MAX_NS) {
        c->heartbeat_ns = PS_HEARTBEAT_MAX_NS;
    }
    return GS_OK;
}

/* The options every rank must agree on, as bytes (doubles by bit pattern). */
typedef struct ps_digest {
    int64_t valid;
    int64_t consistency;
    int64_t staleness;
    int64_t servers;
    int64_t rule;
    double lr;
    double momentum;
    double weight_decay;
    double beta1;
    double beta2;
    double eps;
    int64_t has_fn;
    int64_t codec_kind;
    int64_t codec_block;
    double codec_ratio;
    int64_t codec_levels;
    uint64_t codec_seed;
    int64_t codec_zstd;
    int64_t codec_zstd_level;
    uint64_t split_bytes;
    int64_t timeout_ms;
} ps_digest_t;

static void digest_make(const gs__ps_cfg_t *c, int valid, ps_digest_t *d)
{
    memset(d, 0, sizeof(*d));
    d->valid = valid;
    if (!valid) {
        return;
    }
    d->consistency = c->consistency;
    d->staleness = c->staleness;
    d->servers = c->servers;
    d->rule = c->rule.rule;
    d->lr = c->rule.lr;
    d->momentum = c->rule.momentum;
    d->weight_decay = c->rule.weight_decay;
    d->beta1 = c->rule.beta1;
    d->beta2 = c->rule.beta2;
    d->eps = c->rule.eps;
    d->has_fn = (c->rule.fn != NULL);
    d->codec_kind = c->has_codec ? (int64_t)c->codec.kind : -1;
    d->codec_block = c->has_codec ? c->codec.block_size : 0;
    d->codec_ratio = c->has_codec ? c->codec.ratio : 0;
    d->codec_levels = c->has_codec ? c->codec.levels : 0;
    d->codec_seed = c->has_codec ? c->codec.seed : 0;
    d->codec_zstd = c->has_codec ? c->codec.zstd : 0;
    d->codec_zstd_level = c->has_codec ? c->codec.zstd_level : 0;
    d->split_bytes = c->split_bytes;
    d->timeout_ms = c->timeout_ms;
}

gs_status_t gs__ps_cfg_agree(gs_ps_t ps, int valid, const char *own_error)
{
    ps_digest_t mine;
    ps_digest_t *all;
    gs_status_t status;

    digest_make(&ps->cfg, valid, &mine);
    all = calloc((size_t)ps->nranks, sizeof(*all));
    if (all == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "gs_ps_create: out of memory");
    }
    status = gs_allgather(ps->ccomm, &mine, all, sizeof(mine), GS_DTYPE_U8);
    if (status != GS_OK) {
        free(all);
        return status;
    }
    for (int r = 0; r < ps->nranks; r++) {
        if (!valid) {
            gs__error_copy_in(own_error); /* this rank's own reason comes first */
            status = GS_ERR_INVALID_ARG;
            break;
        }
        if (!all[r].valid) {
            if (r != ps->rank) {
                status = gs__error_set(GS_ERR_INVALID_ARG,
                                       "gs_ps_create: rank %d passed invalid options (its "
                                       "gs_last_error() says which)",
                                       r);
            } else {
                gs__error_copy_in(own_error);
                status = GS_ERR_INVALID_ARG;
            }
            break;
        }
        /* 8-byte fields without padding; the doubles are compared bit for bit on purpose. */
        /* NOLINTNEXTLINE(bugprone-suspicious-memory-comparison) */
        if (memcmp(&all[r], &all[0], sizeof(mine)) != 0) {
            status = gs__error_set(GS_ERR_INVALID_ARG,
                                   "gs_ps_create: rank %d passed options that differ from rank "
                                   "0's (consistency, staleness, servers, rule and its "
                                   "parameters, codec, split_bytes and timeout must be equal)",
                                   r);
            break;
        }
    }
    free(all);
    return status;
}
