/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pure placement arithmetic of the parameter server: which ranks are
 * workers and servers, and how a key is cut into shards and placed. Every
 * rank runs the same functions over the same registration order, so all
 * agree without talking. No I/O, no allocation; the unit tests check it
 * exhaustively over small worlds.
 *
 * Roles: with nservers_opt == 0 every rank is worker w = rank and server
 * s = rank (colocated); with 1 <= S < n, ranks 0 .. n-S-1 are the workers
 * and ranks n-S .. n-1 the servers (server s is rank n - S + s).
 *
 * Placement: a key of at least split_bytes (and more than one element, with
 * more than one server) is cut into min(S, count) contiguous ranges whose
 * sizes differ by at most one element, the first count % k ranges one
 * element larger; range i goes to server (i + rot) % S, where rot is the
 * number of split keys placed before, so that the larger first ranges
 * rotate over the servers. A smaller key goes whole to the server with the
 * fewest bytes so far (the lowest index on a tie). The placement updates
 * the per-server byte loads.
 */
#ifndef GS_PS_SHARD_H
#define GS_PS_SHARD_H

#include <stddef.h>
#include <stdint.h>

typedef struct gs__ps_roles {
    int nranks;
    int nworkers;
    int nservers;
    int colocated; /* every rank is both */
} gs__ps_roles_t;

/* Fill *r for @p nranks ranks and @p servers (0: colocated). Returns 0, or
 * -1 when servers is not 0 and not in 1 .. nranks - 1. */
int gs__ps_roles_init(gs__ps_roles_t *r, int nranks, int servers);

/* Worker index of @p rank, or -1 when it is not a worker. */
int gs__ps_worker_of(const gs__ps_roles_t *r, int rank);
/* Server index of @p rank, or -1 when it is not a server. */
int gs__ps_server_of(const gs__ps_roles_t *r, int rank);
/* Rank of server @p s. */
int gs__ps_server_rank(const gs__ps_roles_t *r, int s);
/* Rank of worker @p w. */
int gs__ps_worker_rank(const gs__ps_roles_t *r, int w);

/* One shard of a key. */
typedef struct gs__ps_range {
    size_t offset; /* first element */
    size_t count;  /* elements (>= 1) */
    int server;    /* server index */
} gs__ps_range_t;

/* The placement state that carries from key to key. */
typedef struct gs__ps_placer {
    int nservers;
    uint64_t *load;  /* bytes per server (nservers entries, caller-owned) */
    uint64_t nsplit; /* split keys placed so far */
    uint64_t split_bytes;
} gs__ps_placer_t;

/* Number of shards a key of @p count elements of @p esize bytes gets. */
size_t gs__ps_nshards(const gs__ps_placer_t *p, size_t count, size_t esize);

/*
 * Place a key of @p count (>= 1) elements of @p esize bytes: write
 * gs__ps_nshards() ranges into @p out (room for at least that many) and
 * update the loads. Returns the number of ranges.
 */
size_t gs__ps_place(gs__ps_placer_t *p, size_t count, size_t esize, gs__ps_range_t *out);

#endif /* GS_PS_SHARD_H */
