/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The index of held unexpected messages (messages that arrived before any
 * receive matched them), shared by the transports: arrival order, and the
 * first message for a (peer, tag) or an (any source, tag) receive, each
 * found in O(1) whatever is held.
 *
 * A receive or probe from peer p with tag t takes the earliest held message
 * from p whose matching tag is t; from GS_ANY_SOURCE the earliest from any
 * peer. The index keeps one arrival-ordered list per (tag, peer) and one per
 * (tag, any source), each found by hash (core/htab.h), so neither a probe
 * nor a receive walks the messages a peer made this rank hold. Before it
 * every probe walked them all: 2^20 held empty messages made each
 * diagnosis poll (64 probes) cost tens of milliseconds on this machine's
 * memory and seconds on slower ones (issue 17, hostile flood_zero).
 *
 * The caller embeds a gs__match_entry_t in its message (first member, so a
 * cast gives the message back) and passes tags already masked to their
 * matching bits. Not thread-safe: one owner (the worker thread).
 */
#ifndef GS_TRANSPORT_MATCH_H
#define GS_TRANSPORT_MATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "core/htab.h"
#include "gradsync/status.h"

struct gs__match_key;

typedef struct gs__match_entry {
    struct gs__match_entry *anext; /* every held entry, arrival order */
    struct gs__match_entry *aprev;
    struct gs__match_entry *pnext; /* its (tag, peer) list */
    struct gs__match_entry *pprev;
    struct gs__match_entry *tnext; /* its (tag, any source) list */
    struct gs__match_entry *tprev;
    struct gs__match_key *pkey;
    struct gs__match_key *tkey;
    bool held; /* in an index */
} gs__match_entry_t;

typedef struct gs__match_index {
    gs__htab_t keys;
    gs__match_entry_t *head; /* the oldest */
    gs__match_entry_t *tail;
    uint64_t n;
    uint64_t steps; /* keys looked at by lookups (gs__match_find and gs__match_add), for
                       the tests that prove a lookup does not grow with what is held */
} gs__match_index_t;

/* Heap bytes one held entry can cost the index at most, besides the entry
 * itself: two keys (with allocator overhead) and their share of the slot
 * array, which holds at most two slots per key. For charging (tcp_conn.h). */
#define GS_MATCH_ENTRY_OVERHEAD 176u

void gs__match_init(gs__match_index_t *x);
/* Frees the keys and slots still held; the entries belong to the caller and
 * must have been removed (or be dropped with the index). */
void gs__match_free(gs__match_index_t *x);
/* Hold @p e, a message from @p peer (>= 0) with matching tag @p tag, as the
 * newest. @return GS_OK; GS_ERR_NO_MEMORY (nothing changed). */
gs_status_t gs__match_add(gs__match_index_t *x, gs__match_entry_t *e, int peer, uint64_t tag);
/* Take @p e out (no-op when it is not held). */
void gs__match_remove(gs__match_index_t *x, gs__match_entry_t *e);
/* The earliest held entry from @p peer (or from any when @p any) with
 * matching tag @p tag, or NULL. */
gs__match_entry_t *gs__match_find(gs__match_index_t *x, int peer, bool any, uint64_t tag);

#endif /* GS_TRANSPORT_MATCH_H */
