/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An intrusive chained hash table for lookups that must not grow with what
 * is held: the node lives inside the caller's struct, the table holds only
 * the slot array, and the caller compares its own keys while walking the
 * chain of one hash value.
 *
 * Hostile keys: hashes are keyed with a per-table random seed
 * (gs__htab_hash), so a peer that chooses tags or sequence numbers cannot
 * aim them at one chain without learning the seed. The slot array doubles
 * when the table holds as many nodes as it has slots, so chains stay short
 * on average.
 *
 * Not thread-safe: one owner (the transport's worker thread).
 */
#ifndef GS_CORE_HTAB_H
#define GS_CORE_HTAB_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/status.h"

/* splitmix64's finaliser: every input bit moves every output bit. The one
 * 64-bit mixer of the C code (hash keys, segment names, call fingerprints);
 * src/math/codec_math.h has its own for the device. */
static inline uint64_t gs__mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

typedef struct gs__hnode {
    struct gs__hnode *next; /* the chain of its slot */
    uint64_t hash;
} gs__hnode_t;

typedef struct gs__htab {
    gs__hnode_t **slots; /* NULL until the first insert */
    size_t nslots;       /* a power of two, or 0 */
    size_t n;            /* nodes held */
    uint64_t seed;
} gs__htab_t;

/* An empty table with a fresh random seed (no allocation). */
void gs__htab_init(gs__htab_t *t);
/* Free the slot array (the nodes belong to the caller); the table is empty
 * and can be used again. */
void gs__htab_free(gs__htab_t *t);
/* The keyed hash of a two-word key. */
uint64_t gs__htab_hash(const gs__htab_t *t, uint64_t a, uint64_t b);
/* Insert @p node under @p hash (duplicates allowed; the caller's keys tell
 * them apart). Grows the slot array when it is full; when growing fails the
 * table stays correct with longer chains.
 * @return GS_OK; GS_ERR_NO_MEMORY when the first slot array cannot be
 *         allocated (nothing was inserted). */
gs_status_t gs__htab_insert(gs__htab_t *t, gs__hnode_t *node, uint64_t hash);
/* Remove @p node, which must be in @p t. */
void gs__htab_remove(gs__htab_t *t, gs__hnode_t *node);
/* The first node with @p hash, or NULL; gs__htab_next gives the next one
 * with the same hash. Walk with them and compare the caller's key. */
gs__hnode_t *gs__htab_first(const gs__htab_t *t, uint64_t hash);
gs__hnode_t *gs__htab_next(const gs__hnode_t *node);
/* The whole chain of @p hash's slot (nodes of other hashes too, linked by
 * next), or NULL: for a caller that counts what a lookup looks at. */
gs__hnode_t *gs__htab_chain(const gs__htab_t *t, uint64_t hash);

#endif /* GS_CORE_HTAB_H */
