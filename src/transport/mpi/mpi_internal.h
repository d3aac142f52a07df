/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private types and calls of the MPI transport, shared by its files and
 * included by nothing outside src/transport/mpi/:
 *
 *   mpi_transport.c  the ops table: init, address, connect, abort, wake,
 *                    finalize (instance lifetime and communicator)
 *   mpi_request.c    isend, irecv, probe, test and req_release (request calls)
 *   mpi_match.c      request sets, completion, orphans, matching of
 *                    headers against posted receives, the unexpected queue
 *   mpi_progress.c   polling of headers, payloads and orphans; progress and
 *                    gs__mpi_tp_wait (the only loops, bounded by deadlines)
 *   mpi_wire.c       the 32-byte message header: encode and validate (pure)
 *
 * Everything here runs on the worker thread of the communicator that owns
 * the instance, except abort and wake (atomics). The public side of the
 * transport (ops table, adopt_comm, native collectives) is mpi_transport.h.
 */
#ifndef GS_TRANSPORT_MPI_MPI_INTERNAL_H
#define GS_TRANSPORT_MPI_MPI_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/match.h"
#include "transport/mpi/mpi_transport.h"

#define GS_MPI_TAG_HDR 1
#define GS_MPI_TAG_DATA 2
#define MPI_HDR_BYTES 32
#define MPI_HDR_MAGIC 0x504d5347u /* "GSMP" */
#define MPI_HDR_VERSION 1
#define MPI_FLAG_INLINE 1u
#define MPI_INLINE_MAX 8192
#define MPI_CHUNK_MAX ((size_t)1 << 30)
#define MPI_WHY_MAX 200
#define MPI_INLINE_REQS 4
/*
 * What a peer can make this rank hold as unexpected messages (headers that
 * arrived before any matching receive), all peers together, as in the TCP
 * transport (tcp_conn.h): each costs MPI_MSG_COST bytes (its mpi_msg_t and
 * allocator overhead, rounded up) plus its payload against a budget of
 * MPI_UNEXP_MAX bytes, and at most MPI_UNEXP_MAX_MSGS of them are held. A
 * probe or an irecv finds the oldest match through the match index
 * (transport/match.h) and progress tests only the held messages whose
 * payload is still arriving, so no work grows with what is held. Past
 * either bound the sender is
 * failed with GS_ERR_PROTOCOL. The charge is released when the message is
 * freed (gs__mpi_msg_free: delivered, refused, or at finalize); a payload
 * still arriving for a receive that was refused or released lives on as an
 * orphan until its chunks land, bounded by the receives the application
 * posted, not by the peer.
 */
#define MPI_UNEXP_MAX (8ull << 30)
#define MPI_UNEXP_MAX_MSGS (1ull << 20)
#define MPI_MSG_COST 512u

typedef struct mpi_hdr {
    uint64_t tag;
    uint64_t len;
    uint32_t seq;
    uint32_t nchunks;
    uint16_t flags;
} mpi_hdr_t;

/* A set of MPI requests that completes as a whole. */
typedef struct mpi_reqset {
    MPI_Request *mr;
    int n;
    MPI_Request inline_mr[MPI_INLINE_REQS];
} mpi_reqset_t;

/* A message whose header arrived before any matching receive. */
typedef struct mpi_msg {
    gs__match_entry_t ue;  /* first: held in tp->unexp (transport/match.h) */
    struct mpi_msg *fnext; /* tp->filling: held, payload still arriving */
    struct mpi_msg *fprev;
    int filling;
    int src;
    mpi_hdr_t h;
    unsigned char *data; /* heap copy of the payload */
    mpi_reqset_t rs;     /* chunk receives into data (n == 0: data complete) */
    int orphan;          /* consumed by a failed receive: free when rs completes */
    uint64_t charged;    /* bytes of tp->held it holds (released by gs__mpi_msg_free) */
} mpi_msg_t;

typedef enum mpi_req_state {
    REQ_POSTED, /* receive waiting for a header */
    REQ_ACTIVE, /* MPI requests in flight (send, or chunk receive) */
    REQ_MSG,    /* receive bound to an unexpected message still arriving */
    REQ_DONE
} mpi_req_state_t;

struct gs__tp_req {
    struct gs__tp_req *next; /* posted list or active list */
    int is_send;
    int peer;
    uint64_t tag;
    void *buf;
    size_t len;
    mpi_req_state_t state;
    mpi_reqset_t rs;
    unsigned char *sbuf; /* send: header (+ inline payload) */
    mpi_msg_t *msg;      /* REQ_MSG */
    gs__tp_completion_t comp;
    char why[MPI_WHY_MAX];
};

/* A received header on its way in. */
typedef struct mpi_hdrq {
    struct mpi_hdrq *next;
    MPI_Request mr;
    int src;
    int count;
    unsigned char buf[];
} mpi_hdrq_t;

/* MPI requests nobody waits for any more (drains, released requests). */
typedef struct mpi_orphan {
    struct mpi_orphan *next;
    mpi_reqset_t rs;
    void *to_free;
} mpi_orphan_t;

struct gs__tp {
    int rank;
    int size;
    uint64_t comm_id;
    MPI_Comm comm;
    int connected;
    gs__counters_t *counters;
    atomic_int aborted;
    atomic_int woken;
    uint32_t *send_seq;      /* next chunk seq to each peer */
    uint32_t *recv_seq;      /* next chunk seq from each peer */
    gs_status_t *peer_err;   /* GS_OK, or why every request with that peer fails */
    gs__tp_req_t *posted;    /* receives waiting for a header, in post order */
    gs__tp_req_t *active;    /* requests with MPI requests in flight */
    gs__match_index_t unexp; /* unexpected messages, by arrival and by match key */
    mpi_msg_t *filling;      /* the held ones whose chunks are still arriving */
    mpi_hdrq_t *hdrq;        /* header receives, in probe order */
    mpi_orphan_t *orphans;
    int completions;         /* bumped by every completion (progress returns) */
    uint64_t max_msg;        /* GS_MAX_MESSAGE_BYTES: a peer announcing more is failed */
    gs__match_budget_t held; /* unexpected messages held (MPI_MSG_COST each + payload), and
                              * the bounds MPI_UNEXP_MAX and MPI_UNEXP_MAX_MSGS */
};

/* ---------------------------------------------------------------------- */
/* Wire (mpi_wire.c)                                                      */
/* ---------------------------------------------------------------------- */

/* Number of MPI_CHUNK_MAX chunks a non-inline payload of len bytes takes. */
static inline size_t gs__mpi_chunk_count(size_t len)
{
    return (len + MPI_CHUNK_MAX - 1) / MPI_CHUNK_MAX;
}

/* Write the MPI_HDR_BYTES header for h at p (little endian). Pure. */
void gs__mpi_hdr_encode(unsigned char *p, const mpi_hdr_t *h);

/* Decode and validate @p count bytes from a peer. Returns GS_OK or
 * GS_ERR_PROTOCOL with @p why filled. Pure. */
gs_status_t gs__mpi_hdr_decode(const unsigned char *p, int count, uint32_t expect_seq, mpi_hdr_t *h,
                               char *why, size_t whylen);

/* ---------------------------------------------------------------------- */
/* Request sets, completion, matching (mpi_match.c)                       */
/* ---------------------------------------------------------------------- */

/* Make rs hold n MPI_REQUEST_NULLs (heap beyond MPI_INLINE_REQS).
 * Returns 0, or -1 when out of memory. */
int gs__mpi_reqset_alloc(mpi_reqset_t *rs, size_t n);

/* Free rs's heap array (the MPI requests must be done or freed). */
void gs__mpi_reqset_free(mpi_reqset_t *rs);

/* Test every request of rs. Returns 1 when all are done; *err_out gets the
 * first MPI error (MPI_ERR_TRUNCATE is ignored when @p drain). */
int gs__mpi_reqset_test(mpi_reqset_t *rs, int drain, int *err_out);

/* Unlink r from the singly linked list at *head (no-op when absent). */
void gs__mpi_list_remove(gs__tp_req_t **head, gs__tp_req_t *r);

/* Append r to the list at *head. */
void gs__mpi_list_append(gs__tp_req_t **head, gs__tp_req_t *r);

/* Mark r done with status (why formatted from fmt when status != GS_OK),
 * count it in the counters on success, and bump tp->completions. */
void gs__mpi_req_complete(gs__tp_t *tp, gs__tp_req_t *r, gs_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Hand rs (moved out; rs is left empty) to the orphan list, to be tested
 * until done and then freed with to_free. */
void gs__mpi_orphan_add(gs__tp_t *tp, mpi_reqset_t *rs, void *to_free);

/* Apply the mismatch and truncation rules to receive r and a message with
 * header h from src. Returns 1 when r was completed with an error. */
int gs__mpi_refuse(gs__tp_t *tp, gs__tp_req_t *r, int src, const mpi_hdr_t *h);

/* A valid header from src arrived (payload inline at data, or chunks to
 * follow): match it with the oldest posted receive, or queue it as
 * unexpected. */
void gs__mpi_deliver_header(gs__tp_t *tp, int src, const mpi_hdr_t *h, const unsigned char *data);

/* Take a held message whose chunks all landed off tp->filling (no-op when
 * it is not on it). */
void gs__mpi_msg_filled(gs__tp_t *tp, mpi_msg_t *m);

/* Take an unexpected message out of the index and off tp->filling (a
 * receive takes it, or it is freed); no-op for what it is not on. */
void gs__mpi_msg_unhold(gs__tp_t *tp, mpi_msg_t *m);

/* Free an unexpected message (its MPI requests must be done or handed on),
 * taking it out of what holds it, and release what it was charged. */
void gs__mpi_msg_free(gs__tp_t *tp, mpi_msg_t *m);

/* Fail a peer: every posted or later request involving it fails. */
void gs__mpi_peer_fail(gs__tp_t *tp, int src, gs_status_t status, const char *why);

/* ---------------------------------------------------------------------- */
/* Progress (mpi_progress.c)                                              */
/* ---------------------------------------------------------------------- */

/* One pass over headers, active requests, unexpected payloads and orphans. */
void gs__mpi_poll_once(gs__tp_t *tp);

/* Unexpected payloads, receives bound to them, and orphans only. */
void gs__mpi_poll_messages(gs__tp_t *tp);

/* Back off after idle_ns of polling without progress: yield, then sleep
 * 20 us, then 200 us. */
void gs__mpi_nap(uint64_t idle_ns);

/* Ops slots of mpi_request.c and mpi_progress.c (contracts: transport.h). */
gs_status_t gs__mpi_tp_progress(gs__tp_t *tp, uint64_t deadline_ns);
gs_status_t gs__mpi_tp_isend(gs__tp_t *tp, int peer, uint64_t tag, const void *buf, size_t len,
                             gs__tp_req_t **req_out);
gs_status_t gs__mpi_tp_irecv(gs__tp_t *tp, int peer, uint64_t tag, void *buf, size_t len,
                             gs__tp_req_t **req_out);
gs_status_t gs__mpi_tp_probe(gs__tp_t *tp, int peer, uint64_t tag, int *found_out,
                             gs__tp_completion_t *comp_out);
gs_status_t gs__mpi_tp_test(gs__tp_t *tp, gs__tp_req_t *req, int *done_out,
                            gs__tp_completion_t *comp_out);
gs_status_t gs__mpi_tp_req_release(gs__tp_t *tp, gs__tp_req_t *req);

#endif /* GS_TRANSPORT_MPI_MPI_INTERNAL_H */
