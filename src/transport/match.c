/* SPDX-License-Identifier: Apache-2.0 */
/* Tag matching shared by the transports (match.h). */
#include "transport/match.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

gs_status_t gs__match_bind(uint64_t want_tag, size_t cap, int peer, uint64_t tag, uint64_t len,
                           char *why, size_t whylen)
{
    if (tag != want_tag) {
        (void)snprintf(why, whylen,
                       "message from peer %d has tag 0x%016" PRIx64
                       " but the receive expects 0x%016" PRIx64
                       " (the ranks are running different operations)",
                       peer, tag, want_tag);
        return GS_ERR_MISMATCH;
    }
    if (len > cap) {
        (void)snprintf(why, whylen,
                       "message of %" PRIu64 " bytes from peer %d (tag 0x%016" PRIx64
                       ") is larger than the receive buffer of %zu bytes",
                       len, peer, tag, cap);
        return GS_ERR_TRUNCATED;
    }
    return GS_OK;
}

bool gs__match_budget_fits(const gs__match_budget_t *b, uint64_t overhead, uint64_t held,
                           uint64_t len, char *why, size_t whylen)
{
    if ((b->msgs >= b->max_msgs) || (b->bytes > b->max_bytes) ||
        (overhead > b->max_bytes - b->bytes) || (held > b->max_bytes - b->bytes - overhead)) {
        (void)snprintf(why, whylen,
                       "sent a message of %" PRIu64 " bytes while %" PRIu64 " messages (%" PRIu64
                       " bytes) are held; the limit is %" PRIu64 " messages and %" PRIu64
                       " bytes, all peers together",
                       len, b->msgs, b->bytes, b->max_msgs, b->max_bytes);
        return false;
    }
    return true;
}

/* Every held entry with one matching tag from one peer (peer >= 0), or from
 * any peer (peer == -1), in arrival order. */
typedef struct gs__match_key {
    gs__hnode_t node; /* first: a node is its key */
    uint64_t tag;
    int peer;
    gs__match_entry_t *head;
    gs__match_entry_t *tail;
} gs__match_key_t;

_Static_assert(2 * (sizeof(gs__match_key_t) + 2 * sizeof(size_t)) + 4 * sizeof(void *) <=
                   GS_MATCH_ENTRY_OVERHEAD,
               "GS_MATCH_ENTRY_OVERHEAD covers two keys and their slots");

#define MATCH_ANY (-1)

void gs__match_init(gs__match_index_t *x)
{
    gs__htab_init(&x->keys);
    x->head = NULL;
    x->tail = NULL;
    x->n = 0;
    x->steps = 0;
}

static uint64_t key_hash(const gs__match_index_t *x, int peer, uint64_t tag)
{
    return gs__htab_hash(&x->keys, tag, (uint64_t)(int64_t)peer);
}

static gs__match_key_t *key_find(gs__match_index_t *x, int peer, uint64_t tag)
{
    const uint64_t h = key_hash(x, peer, tag);

    for (gs__hnode_t *n = gs__htab_chain(&x->keys, h); n != NULL; n = n->next) {
        gs__match_key_t *k = (gs__match_key_t *)n;

        x->steps++;
        if ((n->hash == h) && (k->tag == tag) && (k->peer == peer)) {
            return k;
        }
    }
    return NULL;
}

/* The key (peer, tag), made when there is none yet; NULL when out of memory. */
static gs__match_key_t *key_get(gs__match_index_t *x, int peer, uint64_t tag)
{
    gs__match_key_t *k = key_find(x, peer, tag);

    if (k != NULL) {
        return k;
    }
    k = calloc(1, sizeof(*k));
    if (k == NULL) {
        return NULL;
    }
    k->tag = tag;
    k->peer = peer;
    if (gs__htab_insert(&x->keys, &k->node, key_hash(x, peer, tag)) != GS_OK) {
        free(k);
        return NULL;
    }
    return k;
}

static void key_put(gs__match_index_t *x, gs__match_key_t *k)
{
    if (k->head == NULL) {
        gs__htab_remove(&x->keys, &k->node);
        free(k);
    }
}

gs_status_t gs__match_add(gs__match_index_t *x, gs__match_entry_t *e, int peer, uint64_t tag)
{
    gs__match_key_t *pk = key_get(x, peer, tag);
    gs__match_key_t *tk = (pk != NULL) ? key_get(x, MATCH_ANY, tag) : NULL;

    if (tk == NULL) {
        if (pk != NULL) {
            key_put(x, pk);
        }
        return GS_ERR_NO_MEMORY;
    }
    e->pkey = pk;
    e->pnext = NULL;
    e->pprev = pk->tail;
    if (pk->tail != NULL) {
        pk->tail->pnext = e;
    } else {
        pk->head = e;
    }
    pk->tail = e;
    e->tkey = tk;
    e->tnext = NULL;
    e->tprev = tk->tail;
    if (tk->tail != NULL) {
        tk->tail->tnext = e;
    } else {
        tk->head = e;
    }
    tk->tail = e;
    e->anext = NULL;
    e->aprev = x->tail;
    if (x->tail != NULL) {
        x->tail->anext = e;
    } else {
        x->head = e;
    }
    x->tail = e;
    x->n++;
    e->held = true;
    return GS_OK;
}

void gs__match_remove(gs__match_index_t *x, gs__match_entry_t *e)
{
    gs__match_key_t *pk = e->pkey;
    gs__match_key_t *tk = e->tkey;

    if (!e->held) {
        return;
    }
    if (e->pprev != NULL) {
        e->pprev->pnext = e->pnext;
    } else {
        pk->head = e->pnext;
    }
    if (e->pnext != NULL) {
        e->pnext->pprev = e->pprev;
    } else {
        pk->tail = e->pprev;
    }
    if (e->tprev != NULL) {
        e->tprev->tnext = e->tnext;
    } else {
        tk->head = e->tnext;
    }
    if (e->tnext != NULL) {
        e->tnext->tprev = e->tprev;
    } else {
        tk->tail = e->tprev;
    }
    if (e->aprev != NULL) {
        e->aprev->anext = e->anext;
    } else {
        x->head = e->anext;
    }
    if (e->anext != NULL) {
        e->anext->aprev = e->aprev;
    } else {
        x->tail = e->aprev;
    }
    key_put(x, pk);
    key_put(x, tk);
    e->anext = e->aprev = e->pnext = e->pprev = e->tnext = e->tprev = NULL;
    e->pkey = e->tkey = NULL;
    e->held = false;
    x->n--;
}

gs__match_entry_t *gs__match_find(gs__match_index_t *x, int peer, bool any, uint64_t tag)
{
    const gs__match_key_t *k = key_find(x, any ? MATCH_ANY : peer, tag);

    return (k != NULL) ? k->head : NULL;
}

void gs__match_free(gs__match_index_t *x)
{
    while (x->head != NULL) {
        gs__match_remove(x, x->head);
    }
    gs__htab_free(&x->keys);
}
