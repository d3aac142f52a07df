/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The flight recorder of a communicator: the last GS_TRACE_SIZE operations
 * (sequence number, fingerprint fields, bytes, algorithm, start and end,
 * status, the peers still waited on when it failed), the per-peer count of
 * requests in flight, the dump of all that as text, and the process-wide
 * GS_DUMP_SIGNAL handler that dumps every live recorder from a helper
 * thread. It stores numbers only: the layer above names collectives,
 * dtypes and algorithms through the callbacks given at creation. It does
 * not decide anything and never blocks on the network.
 */
#ifndef GS_CORE_RECORDER_H
#define GS_CORE_RECORDER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "gradsync/status.h"

/* Peers kept per finished operation in its "still waited on" list. */
#define GS_TRACE_WAIT_MAX 8

/* One recorded operation. The fingerprint fields are the layer above's
 * numbers (collective kind, dtype, op, root, codec); algo is -1 until known. */
typedef struct gs__recorder_op {
    uint64_t seq; /* the collective's sequence number */
    int kind;     /* collective kind */
    int dtype;
    int op;
    int root;
    int codec;   /* codec kind; 0: none */
    int algo;    /* algorithm id, -1: not chosen */
    uint16_t fp; /* the fingerprint hash carried in the tags' check bits */
    size_t count;
    size_t bytes; /* this rank's payload */
    uint64_t t_start_ns;
    uint64_t t_end_ns;  /* 0 while running */
    gs_status_t status; /* GS_INPROGRESS while running */
    int nwait;          /* failed: how many peers were still waited on (list capped) */
    int wait_peer[GS_TRACE_WAIT_MAX];
    uint8_t wait_send[GS_TRACE_WAIT_MAX]; /* 1: a send to it, 0: a receive from it */
} gs__recorder_op_t;

/* Describe an operation in words ("allreduce(count=1000, f32, sum)") and
 * name an algorithm; set by the owner at creation. */
typedef void (*gs__recorder_describe_fn_t)(const gs__recorder_op_t *op, char *buf, size_t len);
typedef const char *(*gs__recorder_algo_name_fn_t)(int algo);

typedef struct gs__recorder {
    pthread_mutex_t mu; /* guards ops and next against a dump from another thread */
    int rank;
    int size;
    uint32_t cap;           /* entries in ops */
    uint64_t next;          /* operations recorded so far */
    gs__recorder_op_t *ops; /* ring of cap entries: operation i is ops[i % cap] */
    atomic_int *pend_recv;  /* per peer: receives in flight (size entries) */
    atomic_int *pend_send;  /* per peer: sends in flight */
    uint64_t t0_ns;         /* creation, the origin of the dump's times */
    gs__recorder_describe_fn_t describe;
    gs__recorder_algo_name_fn_t algo_name;
    struct gs__recorder *reg_next; /* the signal dump's list of live recorders */
} gs__recorder_t;

/* A recorder of @p cap operations for rank @p rank of @p size. Returns
 * GS_OK or GS_ERR_NO_MEMORY. */
gs_status_t gs__recorder_create(uint32_t cap, int rank, int size,
                                gs__recorder_describe_fn_t describe,
                                gs__recorder_algo_name_fn_t algo_name, gs__recorder_t **out);

/* Unregister (see gs__recorder_signal_setup) and free; NULL is fine. */
void gs__recorder_free(gs__recorder_t *t);

/* Record the start of *op (status set to GS_INPROGRESS, end to 0). */
void gs__recorder_begin(gs__recorder_t *t, const gs__recorder_op_t *op);

/* Record the end of the operation begun last: its algorithm, status, end
 * time and, when it failed, the peers still waited on (from the counters). */
void gs__recorder_end(gs__recorder_t *t, int algo, gs_status_t status, uint64_t t_end_ns);

/* Copy the recorded operation with sequence number @p seq into *out.
 * Returns 1 when found, else 0. */
int gs__recorder_find(gs__recorder_t *t, uint64_t seq, gs__recorder_op_t *out);

/* One request to or from @p peer posted (+1) or finished (-1). Worker only. */
static inline void gs__recorder_pend(gs__recorder_t *t, int peer, int is_send, int delta)
{
    if ((t != NULL) && (peer >= 0) && (peer < t->size)) {
        /* One writer (the thread running the communicator's operations): a
         * plain load and store, no locked instruction; readers may be stale. */
        atomic_int *c = is_send ? &t->pend_send[peer] : &t->pend_recv[peer];
        atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + delta,
                              memory_order_relaxed);
    }
}

/* The peers with requests in flight, in words: "receive from ranks 1, 2;
 * send to rank 2", or "nothing" (at most @p len bytes). Returns how many
 * peers it names. */
int gs__recorder_waiting(gs__recorder_t *t, char *buf, size_t len);

/* Print the recorder, one line per call of @p emit (without newline). */
void gs__recorder_dump(gs__recorder_t *t, void (*emit)(void *arg, const char *line), void *arg);

/*
 * GS_DUMP_SIGNAL: "" (off), a signal name ("USR1", "SIGUSR2") or number.
 * The first call with a signal installs a handler that only writes a byte
 * to a pipe (async-signal-safe), and starts a thread that dumps every
 * registered recorder to the log at WARN when the byte arrives. @p t is
 * registered (gs__recorder_free unregisters it). Returns GS_OK, or
 * GS_ERR_INVALID_ARG naming a bad value, GS_ERR_SYSTEM.
 */
gs_status_t gs__recorder_signal_setup(const char *signame, gs__recorder_t *t);

#endif /* GS_CORE_RECORDER_H */
