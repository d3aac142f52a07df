/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Names from the X-macro tables: collective kinds (GS_COLL_KIND_MAP) and
 * algorithms (the public GS_ALGO_MAP); a call in numbers and its
 * fingerprint, the check bits of every tag of an operation. Pure.
 */
#include "algo/ctx/ctx_desc.h"

#include "core/htab.h"
#include "gradsync/compress.h"

#define COLL_NAME_ROW(_kind, _public, _name, _api) [_kind] = _name,
static const char *const coll_names[GS_COLL_KIND_COUNT] = {GS_COLL_KIND_MAP(COLL_NAME_ROW)};
#undef COLL_NAME_ROW

#define GS_ALGO_NAME_ROW(_name, _value, _str) [_value] = _str,
static const char *const algo_names[GS_ALGO_COUNT] = {GS_ALGO_MAP(GS_ALGO_NAME_ROW)};
#undef GS_ALGO_NAME_ROW

#define COLL_API_ROW(_kind, _public, _name, _api) [_kind] = _api,
static const char *const coll_api_names[GS_COLL_KIND_COUNT] = {GS_COLL_KIND_MAP(COLL_API_ROW)};
#undef COLL_API_ROW

const char *gs__algo_name(gs_algo_t algo)
{
    return ((unsigned)algo < GS_ALGO_COUNT) ? algo_names[algo] : "unknown";
}

const char *gs__coll_name(gs__coll_kind_t kind)
{
    return ((unsigned)kind < GS_COLL_KIND_COUNT) ? coll_names[kind] : "unknown";
}

const char *gs__coll_api_name(gs__coll_kind_t kind)
{
    return ((unsigned)kind < GS_COLL_KIND_COUNT) ? coll_api_names[kind] : "unknown";
}

void gs__algo_call_of(const gs__coll_desc_t *d, gs__algo_call_t *c)
{
    c->known = 1;
    c->kind = (int)d->kind;
    c->dtype = (int)d->dtype;
    c->op = gs__coll_reduces(c->kind) ? (int)d->op : 0;
    c->root = gs__coll_rooted(c->kind) ? d->root : 0;
    c->codec = (d->codec != NULL) ? (int)d->codec->kind : 0;
    c->count = gs__coll_is_v(d->kind) ? 0 : (uint64_t)d->count;
    c->fp = 0;
}

/* A few multiplies (splitmix64's finalizer), not a byte loop: it runs once per call. */
static uint16_t call_hash(const gs__algo_call_t *c)
{
    uint64_t h = (uint64_t)(uint8_t)c->kind | ((uint64_t)(uint8_t)c->dtype << 8) |
                 ((uint64_t)(uint8_t)c->op << 16) | ((uint64_t)(uint8_t)c->codec << 24) |
                 ((uint64_t)(uint32_t)c->root << 32);

    h ^= c->count * 0x9e3779b97f4a7c15ull;
    return (uint16_t)(gs__mix64(h) & 0x7fffu);
}

uint16_t gs__algo_fingerprint(const gs__coll_desc_t *d)
{
    gs__algo_call_t c;

    gs__algo_call_of(d, &c);
    return call_hash(&c);
}
