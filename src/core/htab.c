/* SPDX-License-Identifier: Apache-2.0 */
/* The intrusive hash table of htab.h. */
#include "core/htab.h"

#include "core/clock.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>

#define HTAB_FIRST_SLOTS 64u

void gs__htab_init(gs__htab_t *t)
{
    uint64_t seed = 0;

    t->slots = NULL;
    t->nslots = 0;
    t->n = 0;
    if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed)) {
        /* No entropy yet (early boot): the clock and the table's address. */
        seed = gs__now_ns() ^ (uint64_t)(uintptr_t)t;
    }
    t->seed = gs__mix64(seed);
}

void gs__htab_free(gs__htab_t *t)
{
    free(t->slots);
    t->slots = NULL;
    t->nslots = 0;
    t->n = 0;
}

uint64_t gs__htab_hash(const gs__htab_t *t, uint64_t a, uint64_t b)
{
    return gs__mix64(gs__mix64(a ^ t->seed) ^ b);
}

/* Rehash into @p nslots slots (a power of two); on failure keep the old ones. */
static void htab_resize(gs__htab_t *t, size_t nslots)
{
    gs__hnode_t **slots = calloc(nslots, sizeof(*slots));

    if (slots == NULL) {
        return; /* longer (or sparser) chains, still correct */
    }
    for (size_t i = 0; i < t->nslots; i++) {
        gs__hnode_t *node = t->slots[i];

        while (node != NULL) {
            gs__hnode_t *next = node->next;
            const size_t s = (size_t)node->hash & (nslots - 1u);

            node->next = slots[s];
            slots[s] = node;
            node = next;
        }
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = nslots;
}

gs_status_t gs__htab_insert(gs__htab_t *t, gs__hnode_t *node, uint64_t hash)
{
    size_t s;

    if ((t->n >= t->nslots) && (t->nslots <= SIZE_MAX / 2u / sizeof(gs__hnode_t *))) {
        htab_resize(t, (t->nslots == 0) ? HTAB_FIRST_SLOTS : t->nslots * 2u);
        if (t->nslots == 0) {
            return GS_ERR_NO_MEMORY;
        }
    }
    s = (size_t)hash & (t->nslots - 1u);
    node->hash = hash;
    node->next = t->slots[s];
    t->slots[s] = node;
    t->n++;
    return GS_OK;
}

void gs__htab_remove(gs__htab_t *t, gs__hnode_t *node)
{
    gs__hnode_t **pp = &t->slots[(size_t)node->hash & (t->nslots - 1u)];

    while (*pp != NULL) {
        if (*pp == node) {
            *pp = node->next;
            node->next = NULL;
            t->n--;
            /* Give back what a flood made it grow to, once it is mostly gone. */
            if ((t->nslots > HTAB_FIRST_SLOTS) && (t->n < t->nslots / 8u)) {
                htab_resize(t, (t->nslots / 4u > HTAB_FIRST_SLOTS) ? t->nslots / 4u
                                                                   : HTAB_FIRST_SLOTS);
            }
            return;
        }
        pp = &(*pp)->next;
    }
}

gs__hnode_t *gs__htab_chain(const gs__htab_t *t, uint64_t hash)
{
    return (t->nslots == 0) ? NULL : t->slots[(size_t)hash & (t->nslots - 1u)];
}

gs__hnode_t *gs__htab_first(const gs__htab_t *t, uint64_t hash)
{
    gs__hnode_t *node = gs__htab_chain(t, hash);

    while ((node != NULL) && (node->hash != hash)) {
        node = node->next;
    }
    return node;
}

gs__hnode_t *gs__htab_next(const gs__hnode_t *node)
{
    gs__hnode_t *next = node->next;

    while ((next != NULL) && (next->hash != node->hash)) {
        next = next->next;
    }
    return next;
}
