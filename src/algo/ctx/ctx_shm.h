/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host segment of the ranks of a communicator that share one host
 * (docs/design.md, "Collectives in a host segment"): shared memory that
 * every member maps, with a control line per member and two slots per
 * member, in which the shm collectives (algo/prim/algo_shm.c) run: all of
 * them when the communicator is on one host, the hierarchical all-reduce's
 * phases inside each host when it spans several. Member m is rank
 * ranks[m] of the communicator (its host's ranks in host order).
 *
 * Layout: a header page (gs__shm_hdr_t), then n control lines of 256
 * bytes (gs__shm_line_t: the phase counter on a cache line of its own, the
 * member's pid and probe word, the buffer addresses it publishes for a
 * single-copy call), then, page-aligned, n x 2 slots of slot_bytes (member
 * m's slot b at slots + (2m + b) x slot_bytes).
 *
 * The creator (member 0) makes it with memfd_create + ftruncate + fallocate
 * and seals it against shrinking and growing, so a full memory is an error
 * here and never a SIGBUS later, and no process can truncate it under a
 * mapper; the others open /proc/<pid>/fd/<fd>, check the seals, the size
 * and the header, and map it. It has no name: nothing is left behind when
 * the processes end. Which member does what, and the agreement that every
 * member uses it or none does, is selection's (algo_probe.c,
 * gs__algo_shm_setup); this file has the memory, the phases and the waits.
 *
 * Phases: member m finishes phase p by a release store of p + 1 into its
 * counter (gs__shm_arrive); gs__shm_wait waits, with acquire loads, until
 * a member's counter reaches a value. Waits spin, then yield the core, poll
 * the transport (a dead member's EOF, heartbeats, abort) and keep the
 * communicator's no-progress deadline; a peer whose phase carries another
 * call's signature is a mismatch. Worker thread only.
 */
#ifndef GS_ALGO_CTX_CTX_SHM_H
#define GS_ALGO_CTX_CTX_SHM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "algo/ctx/ctx.h"

#define GS_SHM_HDR_MAGIC 0x67736873686d3031ull /* "gshshm01" */
#define GS_SHM_HDR_VERSION 1u
#define GS_SHM_LINE_BYTES 256u
#define GS_SHM_PAGE 4096u

/* The header page's fields (every mapper checks them). */
typedef struct gs__shm_hdr {
    uint64_t magic;
    uint32_t version;
    uint32_t nmemb;
    uint64_t job_id;
    uint64_t comm_id;
    uint64_t nonce; /* random, chosen by the creator, sent to the members */
    uint64_t slot_bytes;
    uint64_t total_bytes;
} gs__shm_hdr_t;

/* One member's control line (in the segment). */
typedef struct gs__shm_line {
    _Alignas(64) _Atomic uint64_t phase; /* phases this member finished */
    _Alignas(64) uint64_t pid;           /* written once at setup */
    uint64_t probe_addr;                 /* where its probe word lives (single-copy probe) */
    uint64_t probe_value;
    _Alignas(64) uint64_t sbuf; /* a single-copy call's buffers, published before a phase */
    uint64_t rbuf;
    uint64_t sig[2]; /* the signature of the call phase p belongs to, in sig[p & 1] */
    _Alignas(64) _Atomic uint64_t op; /* the operation this member is in, any algorithm:
                                       * gs__shm_op_word(seq, fingerprint), 0 between */
} gs__shm_line_t;

_Static_assert(sizeof(gs__shm_line_t) <= GS_SHM_LINE_BYTES, "control line too large");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "host segments need lock-free 64-bit atomics");

/* This process's view of a host segment. */
typedef struct gs__host_seg {
    uint8_t *base; /* NULL: none */
    size_t len;
    int n;            /* members */
    int me;           /* this member */
    const int *ranks; /* member -> rank of the communicator (n entries; NULL: the
                       * identity, a communicator on one host) */
    size_t slot_bytes;
    uint8_t *slots;
    uint64_t phase;   /* phases this member finished (its counter's value) */
    uint64_t calls;   /* collectives run in the segment (selects the slot of a call) */
    uint64_t sig;     /* the call in flight's gs__shm_op_word, published with every
                   * phase and checked against every peer's */
    int cma;          /* 1: every pair can process_vm_readv the other (agreed) */
    unsigned spins;   /* pauses before a wait yields: 0 when the members outnumber the cores */
    uint64_t pass_ns; /* when a wait last made a transport pass (gs__shm_wait) */
    uint64_t probe;   /* this member's probe word */
    int fd;           /* the creator's memfd until setup ends; -1 otherwise */
} gs__host_seg_t;

/* The communicator rank of member @p m. */
static inline int gs__shm_rank(const gs__host_seg_t *s, int m)
{
    return (s->ranks != NULL) ? s->ranks[m] : m;
}

/* 1 when ctx has a host segment of exactly the @p m ranks of this rank's
 * host (the hierarchical schedules' phases inside a host run there; every
 * rank of the host answers the same, as the segment is agreed by all). */
static inline int gs__shm_serves_host(const gs__algo_ctx_t *ctx, int m)
{
    return (ctx->shm != NULL) && (ctx->shm->n == m) && (m > 1);
}

/* Bytes of a segment of @p n members with slots of @p slot_bytes. */
size_t gs__shm_seg_len(int n, size_t slot_bytes);

/* Member 0: create, size, reserve, seal and map a segment (header and
 * lines written, this member's line filled). Returns GS_OK (with *fd_out
 * the memfd to name to the others, kept open until gs__host_seg_setup_done)
 * or GS_ERR_NO_RESOURCE / GS_ERR_SYSTEM with @p why saying what failed;
 * nothing is left mapped on failure. */
gs_status_t gs__host_seg_create(gs__host_seg_t *s, int n, size_t slot_bytes, uint64_t job_id,
                                uint64_t comm_id, char *why, size_t whylen);

/* Member @p me: open the creator's memfd (pid, fd), check the seals, the
 * size and the header against @p expect, and map it; fills this member's
 * line. Returns GS_OK or GS_ERR_SYSTEM / GS_ERR_PROTOCOL with @p why. */
gs_status_t gs__host_seg_attach(gs__host_seg_t *s, int me, uint64_t pid, int fd,
                                const gs__shm_hdr_t *expect, char *why, size_t whylen);

/* The header a member checks (the creator's, as sent). */
const gs__shm_hdr_t *gs__host_seg_hdr(const gs__host_seg_t *s);

/* After every member mapped: close the creator's fd (the mappings keep it). */
void gs__host_seg_setup_done(gs__host_seg_t *s);

/* Can this process read every other member's memory with process_vm_readv
 * (their probe words)? 1 yes, 0 no (@p why says which member and errno);
 * @p deny (GS_SHM_TEST_CMA_DENY) answers no as EPERM would. */
int gs__host_seg_cma_probe(const gs__host_seg_t *s, int deny, char *why, size_t whylen);

/* Unmap (idempotent). */
void gs__host_seg_close(gs__host_seg_t *s);

/* Member @p m's slot @p b (0 or 1). */
static inline uint8_t *gs__shm_slot(const gs__host_seg_t *s, int m, int b)
{
    return s->slots + ((size_t)(2 * m + b)) * s->slot_bytes;
}

/* Member @p m's control line. */
static inline gs__shm_line_t *gs__shm_line(const gs__host_seg_t *s, int m)
{
    return (gs__shm_line_t *)(void *)(s->base + GS_SHM_PAGE + (size_t)m * GS_SHM_LINE_BYTES);
}

/* The word that names operation @p seq with fingerprint @p fp (never 0). */
static inline uint64_t gs__shm_op_word(uint32_t seq, uint16_t fp)
{
    return ((uint64_t)seq << 17) | ((uint64_t)fp << 1) | 1u;
}

/* Diagnosis (algo/diag): publish the operation this member is now in (or
 * 0: none) so that a member waiting on it in shared memory, or it on one,
 * can tell a mismatch from a slow peer. */
void gs__shm_publish_op(gs__host_seg_t *s, uint64_t word);

/* The operation member @p m published (acquire). */
uint64_t gs__shm_peer_op(const gs__host_seg_t *s, int m);

/* Finish this member's next phase (release), published with s->sig.
 * Returns the new count. */
uint64_t gs__shm_arrive(gs__host_seg_t *s);

/*
 * The error for rank @p m (of the communicator, not a member index) found gone @p doing ("waiting in
 * shared memory for"): GS_ERR_PEER_FAILED naming it, the operation @p what and
 * @p phase, with the transport's reason where it has one (EOF, no heartbeat,
 * reported by another rank). Worker thread only.
 */
gs_status_t gs__shm_peer_gone(gs__algo_ctx_t *ctx, int m, const char *doing, const char *what,
                              uint64_t phase);

/*
 * Wait until member @p m's counter reaches @p target (acquire): spin, then
 * yield, and every so often a non-blocking transport pass and a look at
 * whether member m's rank (gs__shm_rank) failed; errors name that rank.
 * Returns GS_OK, GS_ERR_MISMATCH (rank m's
 * phase belongs to another operation or call: diagnosis's round names them),
 * GS_ERR_PEER_FAILED naming the rank, GS_ERR_ABORTED, or GS_ERR_TIMEOUT
 * after ctx->timeout_ns without the counter moving (naming the rank and the
 * phase). @p what names the wait.
 */
gs_status_t gs__shm_wait(gs__algo_ctx_t *ctx, gs__host_seg_t *s, int m, uint64_t target,
                         const char *what);

/* gs__shm_wait for every member but this one. */
gs_status_t gs__shm_wait_all(gs__algo_ctx_t *ctx, gs__host_seg_t *s, uint64_t target,
                             const char *what);

#endif /* GS_ALGO_CTX_CTX_SHM_H */
