/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tag matching, shared by the transports (TCP and MPI): which posted
 * receive accepts a message (gs__match_accepts), whether it may fill it
 * (gs__match_bind: the full-tag and length rules of transport.h), the
 * budget on what peers can make a rank hold (gs__match_budget_t), and the
 * index of held unexpected messages (messages that arrived before any
 * receive matched them): arrival order, and the first message for a
 * (peer, tag) or an (any source, tag) receive, each found in O(1) whatever
 * is held.
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
#include <stddef.h>
#include <stdint.h>

#include "core/htab.h"
#include "gradsync/status.h"
#include "transport/transport.h"

/* Room for any sentence of gs__match_bind and gs__match_budget_charge. */
#define GS_MATCH_WHY_MAX 200

/* Whether a receive posted for @p want_peer (or GS_ANY_SOURCE) with tag
 * @p want_tag accepts a message from @p peer with tag @p tag: the same
 * peer, and equal tags under GS_TP_TAG_MATCH_MASK. */
static inline bool gs__match_accepts(int want_peer, uint64_t want_tag, int peer, uint64_t tag)
{
    return ((want_peer == peer) || (want_peer == GS_ANY_SOURCE)) &&
           ((want_tag & GS_TP_TAG_MATCH_MASK) == (tag & GS_TP_TAG_MATCH_MASK));
}

/* Whether a message of @p len bytes from @p peer with full tag @p tag, which
 * a receive for @p want_tag of @p cap bytes accepts, may fill it. Returns
 * GS_OK; GS_ERR_MISMATCH when the full tags differ (the ranks run different
 * operations); GS_ERR_TRUNCATED when it is longer than cap. On an error,
 * writes the sentence naming the peer, tags and sizes into @p why. */
gs_status_t gs__match_bind(uint64_t want_tag, size_t cap, int peer, uint64_t tag, uint64_t len,
                           char *why, size_t whylen);

/* The bounds on what peers can make a rank hold, all peers together: bytes
 * charged (each message's own cost, and its payload while the transport
 * holds it) and messages, against max_bytes and max_msgs. */
typedef struct gs__match_budget {
    uint64_t bytes;
    uint64_t msgs;
    uint64_t max_bytes;
    uint64_t max_msgs;
} gs__match_budget_t;

static inline void gs__match_budget_init(gs__match_budget_t *b, uint64_t max_bytes,
                                         uint64_t max_msgs)
{
    b->bytes = 0;
    b->msgs = 0;
    b->max_bytes = max_bytes;
    b->max_msgs = max_msgs;
}

/* Whether one more message of @p len bytes fits, costing @p overhead bytes
 * plus @p held bytes of payload the caller would hold for it (0 when it
 * goes straight to a receive's buffer). When it does not, writes the
 * refusal into @p why: "sent a message of LEN bytes while ... all peers
 * together" (the caller names the sender before it). Nothing wraps, even
 * with a bound lowered below what is charged. */
bool gs__match_budget_fits(const gs__match_budget_t *b, uint64_t overhead, uint64_t held,
                           uint64_t len, char *why, size_t whylen);

/* Count one message that fits, charged @p bytes (its overhead + held). */
static inline void gs__match_budget_charge(gs__match_budget_t *b, uint64_t bytes)
{
    b->bytes += bytes;
    b->msgs++;
}

/* Give back @p bytes of what was charged, and @p msgs messages. */
static inline void gs__match_budget_release(gs__match_budget_t *b, uint64_t bytes, uint64_t msgs)
{
    b->bytes -= bytes;
    b->msgs -= msgs;
}

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
