/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal structures of the parameter server, shared by its files:
 * ps_api.c (create, destroy, info, the sticky error), ps_opts.c (options),
 * ps_register.c (keys), ps_client.c (push, pull, clock), ps_request.c
 * (wait, test), ps_rx.c (the thread that receives control messages),
 * ps_queue.c (the server's queue and staging buffers) and ps_server.c (the
 * thread that owns the shards); the pure parts are ps_wire.c, ps_shard.c,
 * ps_rule.c, ps_consistency.c and ps_limits.c. Built on the public API and
 * core only.
 *
 * Threads of one rank (with more than one rank):
 * - rx: keeps one any-source receive of control messages posted on the
 *   private communicator, validates each message, posts the receive of a
 *   push's payload at once (and, for a large one, answers with a CTS), and
 *   queues an op for the server thread; on a worker it also hands servers'
 *   answers (ACK, REPLY) to the waiting requests and sends the payload of a
 *   large push when the server's CTS arrives;
 * - server: the only thread that reads or writes shard state. It runs the
 *   queued ops in order (remote ones from rx, local ones from this rank's
 *   worker), parks pulls that must wait, sends ACKs, replies and
 *   heartbeats, and expires parked pulls; it posts the receive (and sends
 *   the CTS) of a push that rx did not stage because its worker had as
 *   much staged as allowed (ps_limits.h);
 * - the callers' threads: push, pull and clock post their messages
 *   themselves; gs_ps_wait() waits on done_cv for the answer of every
 *   shard, then on the payload's send or the values' receive.
 */
#ifndef GS_PS_IMPL_H
#define GS_PS_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "gradsync/compress.h"
#include "gradsync/gradsync.h"
#include "gradsync/ps.h"
#include "ps/ps_consistency.h"
#include "ps/ps_limits.h"
#include "ps/ps_rule.h"
#include "ps/ps_shard.h"
#include "ps/ps_wire.h"

/* Buckets of the table of answers due (a power of two). */
#define GS_PS_PEND_BUCKETS 256

/* Tag kind of the initial values sent by rank 0 at registration. */
#define GS_PS_TAG_KIND_INIT 4u

/* A staging buffer for a push payload (pooled per shard); cap is
 * gs__ps_stage_cap() of what the push announced. */
typedef struct gs__ps_buf {
    struct gs__ps_buf *next;
    size_t cap;
    void *data;
} gs__ps_buf_t;

/* A send in flight: a control message (the buffer lives here) or a data
 * message from shard memory. Reaped with gs_test(), or waited for. */
typedef struct gs__ps_send {
    struct gs__ps_send *next;
    gs_request_t req;
    uint8_t msg[GS_PS_MSG_BYTES];
} gs__ps_send_t;

/* Completion of an op this rank's worker queued for its own server. */
typedef struct gs__ps_local {
    int done; /* under ps->done_mu */
    gs_status_t status;
    char errmsg[GS_ERROR_MSG_MAX];
} gs__ps_local_t;

struct gs__ps_key;

/* Server state of one shard this rank serves (server thread only, but
 * the pool, which rx takes from under pool_mu). */
typedef struct gs__ps_shard {
    struct gs__ps_key *key;
    uint32_t index;
    size_t offset;
    size_t count;
    size_t bytes;       /* count x element size */
    size_t max_encoded; /* codec bound, 0 without a codec */
    size_t wire_cap;    /* the largest payload: max(bytes, max_encoded) */
    void *w;            /* the parameters */
    gs__ps_opt_state_t opt;
    /* BSP */
    int64_t round;
    void *acc; /* sum of the round (accumulator type) */
    int acc_has;
    uint8_t *pushed;                 /* per worker, in this round */
    struct gs__ps_op *deferred_head; /* pushes of later rounds, as received */
    struct gs__ps_op *deferred_tail;
    uint8_t *kept; /* per worker: its pushes in the deferred list (<= GS_PS_BSP_MAX_AHEAD) */
    gs_status_t err_status; /* the callback refused round err_round */
    int64_t err_round;
    char err_text[GS_PS_MSG_TEXT_MAX];
    /* SSP, ASP */
    int64_t *pushed_clock; /* per worker; -1 before the first push */
    /* data sends reading w: complete before w changes */
    gs__ps_send_t *wsends;
    gs__ps_buf_t *pool; /* under pool_mu, like the two counts */
    size_t pool_bytes;
    unsigned pool_n;
} gs__ps_shard_t;

/* A registered key (immutable after registration but for the client fields). */
typedef struct gs__ps_key {
    uint64_t key;
    size_t count;
    gs_dtype_t dtype;
    size_t esize;
    uint32_t nshards;
    gs__ps_range_t *ranges;  /* [nshards] */
    int *server_rank;        /* [nshards] */
    gs__ps_shard_t **served; /* [nshards]: non-NULL where this rank serves */
    /* client side, under mu */
    pthread_mutex_t mu;
    int64_t last_push; /* clock of the last push, -1 */
    gs_ef_t *ef;       /* [nshards] with a lossy codec, else NULL */
} gs__ps_key_t;

typedef enum gs__ps_op_type {
    GS_PS_OP_PUSH = 0,
    GS_PS_OP_PULL = 1,
    GS_PS_OP_CLOCK = 2,
    GS_PS_OP_BYE = 3,   /* rank src destroyed its handle */
    GS_PS_OP_LEAVE = 4, /* this rank is destroying its handle */
    GS_PS_OP_WAKE = 5   /* look at the sticky error */
} gs__ps_op_type_t;

/* One unit of server work. Owned by the server thread once queued. */
typedef struct gs__ps_op {
    struct gs__ps_op *next;
    gs__ps_op_type_t type;
    int src;    /* rank */
    int worker; /* worker index of src */
    uint32_t seq;
    gs__ps_shard_t *shard;
    int64_t clock;
    int64_t clock_to; /* clock: the last of the merged consecutive clocks */
    int pushed;       /* pull: the worker pushed the key in its clock */
    int compressed;   /* push: data is a codec payload */
    int rndv;         /* remote push: the payload waits for a CTS */
    int counted;      /* remote push or pull: counted in held.reqs until answered */
    size_t charge;    /* remote push staged by rx: bytes counted in held.staged_bytes */
    const void *data; /* push payload (local: the caller's memory) */
    size_t nbytes;
    gs__ps_buf_t *buf;     /* remote or deferred payload (NULL: not staged yet) */
    gs_request_t data_req; /* remote push: the payload's receive */
    void *out;             /* local pull: where the values go */
    uint64_t deadline_ns;  /* parked pull */
    gs__ps_local_t *local; /* local op: completion, NULL once completed */
} gs__ps_op_t;

/* Options after defaults, environment and validation (equal on every rank). */
typedef struct gs__ps_cfg {
    gs_ps_consistency_t consistency;
    int staleness;
    int servers;
    gs__ps_rule_cfg_t rule;
    int has_codec;
    gs_codec_config_t codec;
    uint64_t split_bytes;
    int timeout_ms;
    uint64_t timeout_ns;
    uint64_t heartbeat_ns;
} gs__ps_cfg_t;

/* Keys, hashed by id (reg_lock: rx and callers read, register writes). */
typedef struct gs__ps_registry {
    pthread_rwlock_t lock;
    gs__ps_key_t **slots; /* open addressing, power of two */
    size_t cap;
    size_t nkeys;
    gs__ps_shard_t **served; /* every shard this rank serves */
    size_t nserved;
    size_t served_cap;
    size_t served_bytes;
    size_t served_wire; /* sum of the served shards' wire_cap */
    gs__ps_placer_t placer;
} gs__ps_registry_t;

/* Worker side. */
typedef struct gs__ps_client {
    atomic_llong clock;
    atomic_uint seq;
    pthread_mutex_t mu;         /* reqs and sends */
    struct gs_ps_request *reqs; /* outstanding requests */
    gs__ps_send_t *sends;       /* clock messages in flight */
    pthread_mutex_t rndv_mu;    /* rndv, and each sub's data_send until posted */
    struct gs__ps_sub *rndv;    /* large pushes waiting for their CTS */
    /* Remote subs waiting for their ACK or REPLY, by request number: the
     * answers arrive on the control tag (rx), so that no receive per
     * request stays posted (every posted request costs the communicator's
     * worker a test per event). */
    pthread_mutex_t pend_mu;
    struct gs__ps_sub *pend[GS_PS_PEND_BUCKETS];
    /* Per rank: this worker's subs in pend for that server (a sub takes
     * its slot before anything is sent and gives it back when it leaves
     * pend), at most GS_PS_MAX_INFLIGHT. */
    atomic_uint *inflight;
} gs__ps_client_t;

/* What this server holds for each worker (ps_limits.h has the bounds).
 * rx adds, the server thread takes away; atomics, per worker index. */
typedef struct gs__ps_held {
    atomic_uint *reqs;           /* remote pushes and pulls not yet answered */
    atomic_size_t *staged_bytes; /* capacity of the buffers rx staged */
    atomic_uint *staged_ops;     /* pushes rx staged */
    struct gs__ps_op **q_clock;  /* under q_mu: the worker's CLOCK op that is last in
                                    the queue among its ops, or NULL */
} gs__ps_held_t;

/* Server thread state (that thread only, after start). */
typedef struct gs__ps_srv {
    int64_t *wclock;      /* per worker */
    gs__ps_op_t *parked;  /* pulls waiting for their round */
    gs__ps_send_t *sends; /* acks, replies, heartbeats, byes */
    void *dec;            /* decoded push (largest shard) */
    size_t dec_cap;
    void *scratch; /* codec scratch */
    size_t scratch_cap;
    void *gbuf; /* half pushes widened to f32 */
    size_t gbuf_cap;
    int leaving;
    int nbye;
    uint8_t hb_msg[GS_PS_MSG_BYTES];
    uint8_t bye_msg[GS_PS_MSG_BYTES];
} gs__ps_srv_t;

struct gs_ps {
    gs_comm_t comm;  /* private duplicate: the threads' point-to-point traffic */
    gs_comm_t ccomm; /* private duplicate: collectives of create, register, destroy */
    int rank;
    int nranks;
    gs__ps_roles_t roles;
    int worker; /* this rank's worker index or -1 */
    int server; /* this rank's server index or -1 */
    gs__ps_cfg_t cfg;
    gs__ps_registry_t reg;
    gs__ps_client_t cl;
    gs__ps_srv_t srv;
    gs__ps_held_t held;
    /* sticky error */
    pthread_mutex_t err_mu;
    atomic_int error;
    char errmsg[GS_ERROR_MSG_MAX];
    /* server queue */
    pthread_mutex_t q_mu;
    pthread_cond_t q_cv;
    gs__ps_op_t *q_head;
    gs__ps_op_t *q_tail;
    /* local completions */
    pthread_mutex_t done_mu;
    pthread_cond_t done_cv;
    pthread_mutex_t pool_mu;
    gs__ps_op_t *leave_op; /* allocated at create, queued by destroy */
    atomic_int leaving;    /* destroy began: this rank sends no more requests */
    pthread_t rx_thread;
    pthread_t srv_thread;
    int rx_started;
    int srv_started;
};

/* A sub-request: one shard of a push or pull. */
typedef struct gs__ps_sub {
    struct gs__ps_sub *rnext; /* in cl.rndv while waiting for the CTS */
    int local;
    int server_rank;
    int counted; /* holds a slot of cl.inflight[server_rank] (under pend_mu once posted) */
    uint32_t shard;
    uint32_t seq;
    gs__ps_local_t lc;
    struct gs__ps_sub *pnext; /* in cl.pend while its answer is due */
    gs_request_t hdr_req;
    gs_request_t data_req;  /* pull: the values */
    gs_request_t data_send; /* push: the payload (a large one: posted by rx on the CTS) */
    int rndv;               /* a large push: in cl.rndv until its CTS */
    const void *payload;
    size_t payload_len;
    void *enc;    /* encoded push payload */
    int answered; /* the answer was taken into account */
    int finished;
    gs_status_t status;
    char errmsg[GS_ERROR_MSG_MAX];
    uint8_t hdr[GS_PS_MSG_BYTES];
    uint8_t rep[GS_PS_MSG_BYTES];
} gs__ps_sub_t;

struct gs_ps_request {
    struct gs_ps_request *next;
    struct gs_ps_request *prev;
    gs_ps_t ps; /* NULL once destroy finished it */
    int is_pull;
    int64_t clock;     /* the worker's clock when it was posted */
    int64_t prev_push; /* push: the key's last_push before this one */
    gs__ps_key_t *key;
    uint32_t nsubs;
    gs__ps_sub_t *subs;
    int finished;
    gs_status_t status;
    char errmsg[GS_ERROR_MSG_MAX];
};

/* ---- ps_api.c ---- */

/* Record the first error as sticky (with its sentence), wake the server
 * thread and every local waiter. With @p abort_comm, also abort the private
 * communicator so that every pending receive and send ends now. */
void gs__ps_fail(gs_ps_t ps, gs_status_t status, const char *msg, int abort_comm);

/* The sticky error (GS_OK while healthy); copies its sentence to this
 * thread's last error when set. */
gs_status_t gs__ps_sticky(gs_ps_t ps);

/* ---- ps_opts.c ---- */

/* Resolve and validate this rank's options (defaults < environment <
 * fields). GS_OK or GS_ERR_INVALID_ARG naming the field or variable. */
gs_status_t gs__ps_cfg_resolve(const gs_ps_opts_t *o, int nranks, gs__ps_cfg_t *c);

/* Collective over ps->ccomm: every rank's options (@p valid: this rank's
 * resolved; else @p own_error says why not) must be equal. */
gs_status_t gs__ps_cfg_agree(gs_ps_t ps, int valid, const char *own_error);

/* ---- ps_register.c ---- */

/* Find a key (takes the registry lock for reading). NULL when unknown. */
gs__ps_key_t *gs__ps_key_find(gs_ps_t ps, uint64_t key);

/* Free every key and shard (destroy, after the threads ended). */
void gs__ps_registry_free(gs_ps_t ps);

/* ---- ps_queue.c ---- */

/* Queue an op for the server thread. A CLOCK op that continues the
 * worker's CLOCK op still last in the queue among its ops is merged into
 * it (and freed). */
void gs__ps_enqueue(gs_ps_t ps, gs__ps_op_t *op);
/* Take the first queued op (q_mu held); NULL when the queue is empty. */
gs__ps_op_t *gs__ps_dequeue_locked(gs_ps_t ps);
/* After both threads are joined (gs_ps_destroy): free what the receive
 * thread queued after the service thread had left (a late CLOCK, a push
 * whose payload receive is then waited for), so that nothing leaks. */
void gs__ps_queue_discard(gs_ps_t ps);

/* Take a staging buffer of @p shard for a payload of @p need bytes (at
 * most shard->wire_cap): capacity gs__ps_stage_cap(), from the pool or
 * new; NULL when out of memory. */
gs__ps_buf_t *gs__ps_buf_get(gs_ps_t ps, gs__ps_shard_t *shard, size_t need);

/* Return a staging buffer to its shard's pool (freed when the pool holds
 * as many as the shard has workers, or that many full buffers' bytes). */
void gs__ps_buf_put(gs_ps_t ps, gs__ps_shard_t *shard, gs__ps_buf_t *buf);

/* ---- ps_server.c ---- */

/* The server thread. */
void *gs__ps_server_main(void *arg);

/* Wait for (and free) every send of a list; returns the first error. */
gs_status_t gs__ps_sends_wait(gs__ps_send_t **list);

/* ---- ps_rx.c ---- */

/* The receive thread. */
void *gs__ps_rx_main(void *arg);

/* ---- ps_client.c ---- */

/* Record the first failure of a sub-request. */
void gs__ps_sub_error(gs__ps_sub_t *sub, gs_status_t status, const char *msg);

/* Take @p req out of its handle's list of outstanding requests. */
void gs__ps_req_unlink(struct gs_ps_request *req);

/* Remove a large push from the list of those waiting for a CTS (rndv_mu held). */
void gs__ps_rndv_unlink_locked(gs_ps_t ps, gs__ps_sub_t *sub);

/* Remove @p sub from the answers due (pend_mu held); 1 when it was there.
 * A sub that leaves gives back its in-flight slot. */
int gs__ps_pend_unlink_locked(gs_ps_t ps, gs__ps_sub_t *sub);

/* Give back the in-flight slot of @p sub, if it holds one (pend_mu held
 * once the sub was posted). */
void gs__ps_slot_release(gs_ps_t ps, gs__ps_sub_t *sub);

/* ---- ps_request.c ---- */

/* Drive a request to completion without releasing it (destroy). */
void gs__ps_request_finish(struct gs_ps_request *req);

/* A server's ACK or REPLY @p m (raw bytes @p raw) for this worker (rx
 * thread): hand it to its sub. GS_ERR_PROTOCOL (reason in @p why) when no
 * request waits for it. */
gs_status_t gs__ps_client_answer(gs_ps_t ps, const uint8_t *raw, const gs__ps_msg_t *m, char *why,
                                 size_t whylen);

/* A server's CTS for this worker's large push @p m (rx thread): send the
 * payload. GS_ERR_PROTOCOL (reason in @p why) when no push waits for it. */
gs_status_t gs__ps_client_cts(gs_ps_t ps, const gs__ps_msg_t *m, char *why, size_t whylen);

#endif /* GS_PS_IMPL_H */
