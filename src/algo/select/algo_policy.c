/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GS_ALGO: the forced algorithm per collective, parsed once per
 * communicator ("ring", or "allreduce:ring,broadcast:chain"). An entry
 * names only what the execution table offers (gs__algo_offers).
 */
#include <string.h>

#include "algo/select/select.h"
#include "core/error.h"

static int algo_lookup(const char *name, size_t len, gs_algo_t *out)
{
    for (int a = 0; a < GS_ALGO_COUNT; a++) {
        const char *an = gs__algo_name((gs_algo_t)a);
        if ((strlen(an) == len) && (strncmp(an, name, len) == 0)) {
            *out = (gs_algo_t)a;
            return 0;
        }
    }
    return -1;
}

static int coll_lookup(const char *name, size_t len, gs__coll_kind_t *out)
{
    for (int k = 0; k < GS_COLL_KIND_COUNT; k++) {
        const char *cn = gs__coll_name((gs__coll_kind_t)k);
        if ((strlen(cn) == len) && (strncmp(cn, name, len) == 0)) {
            *out = (gs__coll_kind_t)k;
            return 0;
        }
    }
    return -1;
}

gs_status_t gs__algo_policy_parse(const char *text, gs__algo_policy_t *out)
{
    gs__algo_policy_t p;
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
                if (gs__algo_offers((gs__coll_kind_t)k, algo)) {
                    p.forced[k] = algo;
                    used = 1;
                }
            }
            if (!used) {
                return gs__error_set(GS_ERR_INVALID_ARG, "GS_ALGO: no collective implements '%.*s'",
                                     (int)len, s);
            }
        } else {
            gs__coll_kind_t kind;
            const size_t clen = (size_t)(colon - s);
            if (coll_lookup(s, clen, &kind) != 0) {
                return gs__error_set(GS_ERR_INVALID_ARG, "GS_ALGO: unknown collective '%.*s'",
                                     (int)clen, s);
            }
            if ((algo_lookup(colon + 1, len - clen - 1, &algo) != 0) ||
                !gs__algo_offers(kind, algo)) {
                return gs__error_set(GS_ERR_INVALID_ARG,
                                     "GS_ALGO: '%.*s' is not an algorithm of %s",
                                     (int)(len - clen - 1), colon + 1, gs__coll_name(kind));
            }
            p.forced[kind] = algo;
        }
        s = (end != NULL) ? end + 1 : NULL;
    }
    *out = p;
    return GS_OK;
}
