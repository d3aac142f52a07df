/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Algorithm selection: the only place that decides which algorithm runs.
 * Precedence: the caller's explicit choice (gs_allreduce_ex opts.algo), then
 * GS_ALGO, then the model. In this release every collective has one
 * bandwidth-optimal algorithm for large messages (ring, chain or direct);
 * the alpha-beta cost model that picks between tree, recursive doubling,
 * Rabenseifner and ring by message size arrives with the algorithms issue
 * and plugs in at algo_choose().
 */
#include <stdio.h>
#include <string.h>

#include "algo/algo.h"
#include "core/error.h"
#include "core/log.h"

static const char *const coll_names[GS_COLL_KIND_COUNT] = {
    [GS_COLL_ALLREDUCE] = "allreduce",
    [GS_COLL_BROADCAST] = "broadcast",
    [GS_COLL_REDUCE] = "reduce",
    [GS_COLL_ALLGATHER] = "allgather",
    [GS_COLL_REDUCE_SCATTER] = "reduce_scatter",
    [GS_COLL_ALLTOALL] = "alltoall",
    [GS_COLL_BARRIER] = "barrier",
    [GS_COLL_SEND] = "send",
    [GS_COLL_RECV] = "recv",
};

#define GS_ALGO_NAME_ROW(_name, _value, _str) [_value] = _str,
static const char *const algo_names[GS_ALGO_COUNT] = {GS_ALGO_MAP(GS_ALGO_NAME_ROW)};
#undef GS_ALGO_NAME_ROW

typedef gs_status_t (*algo_fn_t)(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);

/* Which algorithm implements which collective (NULL: not offered). */
static const algo_fn_t algo_table[GS_COLL_KIND_COUNT][GS_ALGO_COUNT] = {
    [GS_COLL_ALLREDUCE] = {[GS_ALGO_RING] = gs__ring_allreduce},
    [GS_COLL_BROADCAST] = {[GS_ALGO_CHAIN] = gs__chain_broadcast},
    [GS_COLL_REDUCE] = {[GS_ALGO_CHAIN] = gs__chain_reduce},
    [GS_COLL_ALLGATHER] = {[GS_ALGO_RING] = gs__ring_allgather},
    [GS_COLL_REDUCE_SCATTER] = {[GS_ALGO_RING] = gs__ring_reduce_scatter},
    [GS_COLL_ALLTOALL] = {[GS_ALGO_DIRECT] = gs__direct_alltoall},
    [GS_COLL_BARRIER] = {[GS_ALGO_DIRECT] = gs__direct_barrier},
    [GS_COLL_SEND] = {[GS_ALGO_DIRECT] = gs__p2p_send},
    [GS_COLL_RECV] = {[GS_ALGO_DIRECT] = gs__p2p_recv},
};

/* The model's choice when nothing is forced. */
static gs_algo_t algo_choose(const gs_algo_ctx_t *ctx, const gs_coll_desc_t *d)
{
    (void)ctx;
    switch (d->kind) {
    case GS_COLL_ALLREDUCE:
    case GS_COLL_ALLGATHER:
    case GS_COLL_REDUCE_SCATTER:
        return GS_ALGO_RING;
    case GS_COLL_BROADCAST:
    case GS_COLL_REDUCE:
        return GS_ALGO_CHAIN;
    default:
        return GS_ALGO_DIRECT;
    }
}

int gs__algo_offers(gs_coll_kind_t kind, gs_algo_t algo)
{
    if (((unsigned)kind >= GS_COLL_KIND_COUNT) || ((unsigned)algo >= GS_ALGO_COUNT)) {
        return 0;
    }
    return (algo == GS_ALGO_AUTO) || (algo_table[kind][algo] != NULL);
}

const char *gs__coll_name(gs_coll_kind_t kind)
{
    return ((unsigned)kind < GS_COLL_KIND_COUNT) ? coll_names[kind] : "unknown";
}

static int algo_lookup(const char *name, size_t len, gs_algo_t *out)
{
    for (int a = 0; a < GS_ALGO_COUNT; a++) {
        if ((strlen(algo_names[a]) == len) && (strncmp(algo_names[a], name, len) == 0)) {
            *out = (gs_algo_t)a;
            return 0;
        }
    }
    return -1;
}

static int coll_lookup(const char *name, size_t len, gs_coll_kind_t *out)
{
    for (int k = 0; k < GS_COLL_KIND_COUNT; k++) {
        if ((strlen(coll_names[k]) == len) && (strncmp(coll_names[k], name, len) == 0)) {
            *out = (gs_coll_kind_t)k;
            return 0;
        }
    }
    return -1;
}

gs_status_t gs__algo_policy_parse(const char *text, gs_algo_policy_t *out)
{
    gs_algo_policy_t p;
    const char *s = text;

    memset(&p, 0, sizeof(p));
    while ((s != NULL) && (*s != '\0')) {
        const char *end = strchr(s, ',');
        const size_t len = (end != NULL) ? (size_t)(end - s) : strlen(s);
        const char *colon = memchr(s, ':', len);
        gs_algo_t algo;

        if (colon == NULL) {
            /* A bare name applies to every collective that offers it. */
            int used = 0;
            if (algo_lookup(s, len, &algo) != 0) {
                return gs__error_set(GS_ERR_INVALID_ARG, "GS_ALGO: unknown algorithm '%.*s'",
                                     (int)len, s);
            }
            for (int k = 0; k < GS_COLL_KIND_COUNT; k++) {
                if ((algo == GS_ALGO_AUTO) || (algo_table[k][algo] != NULL)) {
                    p.forced[k] = algo;
                    used = 1;
                }
            }
            if (!used) {
                return gs__error_set(GS_ERR_INVALID_ARG,
                                     "GS_ALGO: no collective implements '%.*s'", (int)len, s);
            }
        } else {
            gs_coll_kind_t kind;
            const size_t clen = (size_t)(colon - s);
            if (coll_lookup(s, clen, &kind) != 0) {
                return gs__error_set(GS_ERR_INVALID_ARG, "GS_ALGO: unknown collective '%.*s'",
                                     (int)clen, s);
            }
            if ((algo_lookup(colon + 1, len - clen - 1, &algo) != 0) ||
                ((algo != GS_ALGO_AUTO) && (algo_table[kind][algo] == NULL))) {
                return gs__error_set(GS_ERR_INVALID_ARG,
                                     "GS_ALGO: '%.*s' is not an algorithm of %s", (int)(len - clen - 1),
                                     colon + 1, coll_names[kind]);
            }
            p.forced[kind] = algo;
        }
        s = (end != NULL) ? end + 1 : NULL;
    }
    *out = p;
    return GS_OK;
}

gs_status_t gs__algo_run(gs_algo_ctx_t *ctx, const gs_algo_policy_t *policy, gs_coll_desc_t *d)
{
    gs_algo_t algo = d->algo;
    algo_fn_t fn;

    if ((algo == GS_ALGO_AUTO) && (policy != NULL)) {
        algo = policy->forced[d->kind];
    }
    if (algo == GS_ALGO_AUTO) {
        algo = algo_choose(ctx, d);
    }
    if (((unsigned)algo >= GS_ALGO_COUNT) || (algo_table[d->kind][algo] == NULL)) {
        return gs__error_set(GS_ERR_UNSUPPORTED, "%s: algorithm '%s' does not implement %s",
                             ctx->opname,
                             ((unsigned)algo < GS_ALGO_COUNT) ? algo_names[algo] : "unknown",
                             coll_names[d->kind]);
    }
    d->algo = algo;
    fn = algo_table[d->kind][algo];
    GS_TRACE(ALGO, "%s: %s count %zu with %s", ctx->opname, coll_names[d->kind], d->count,
             algo_names[algo]);
    return fn(ctx, d);
}
