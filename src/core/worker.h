/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The per-communicator worker: one thread and a FIFO of tasks, run one at a
 * time in submission order (which is what keeps the bytes that arrive from
 * a peer belonging to the operation in flight). A task is the first member
 * of a larger request struct owned by the layer above; the worker knows only
 * how to run it and how to tell waiters that it finished.
 */
#ifndef GS_CORE_WORKER_H
#define GS_CORE_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/error.h"
#include "gradsync/status.h"

typedef struct gs__task gs__task_t;

/* Runs on the worker thread. Returns the task's status; on error the last
 * error text of the worker thread is copied into the task. run() may return
 * GS_INPROGRESS to leave the task in flight (point-to-point operations do,
 * so that a receive posted before a send cannot block the queue); the
 * worker then calls test() after every later task and while idle, until it
 * returns anything else. */
typedef gs_status_t (*gs__task_fn_t)(gs__task_t *task, void *ctx);

struct gs__task {
    gs__task_t *next;
    gs__task_fn_t run;
    gs__task_fn_t test; /* required when run() can return GS_INPROGRESS */
    atomic_int done;    /* 0 queued or running, 1 finished */
    gs_status_t status;
    char errmsg[GS_ERROR_MSG_MAX];
};

/* What the worker does while tasks are in flight and the queue is empty:
 * idle() drives the transport for at most wait_ns; wake() (thread-safe, may
 * be NULL) makes a sleeping idle() return when a task is submitted.
 * tick() (may be NULL) is the heartbeat: while the worker has nothing at
 * all to do (no task queued or in flight, no caller running one inline) it
 * calls tick() every tick_ns, so that the transport's liveness clock runs
 * while the application computes between calls. A tick must be short and
 * must not block. */
typedef struct gs__worker_hooks {
    void (*idle)(void *ctx, uint64_t wait_ns);
    void (*wake)(void *ctx);
    void (*tick)(void *ctx);
    uint64_t tick_ns;
} gs__worker_hooks_t;

typedef struct gs__worker {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv_work; /* signalled on submit and stop */
    pthread_cond_t cv_done; /* broadcast when any task finishes */
    gs__task_t *head;
    gs__task_t *tail;
    gs__task_t *inflight; /* worker thread only */
    void *ctx;            /* handed to every task's run() and test() */
    gs__worker_hooks_t hooks;
    int idle_polling;  /* under mu: the worker is inside hooks.idle() */
    int busy;          /* under mu: the worker is running or testing tasks */
    int inline_active; /* under mu: a caller runs a task on its own thread */
    int ninflight;     /* under mu: tasks in flight */
    int poke;          /* under mu: gs__worker_poke asked for one pass now */
    int stop;
    int started;
} gs__worker_t;

/* Initialise and start the thread. hooks may be NULL when no task ever
 * stays in flight. Returns GS_OK or GS_ERR_SYSTEM. */
gs_status_t gs__worker_start(gs__worker_t *w, void *ctx, const gs__worker_hooks_t *hooks);

/* Queue a task (its run field set by the caller). Thread-safe.
 * Returns GS_OK, or GS_ERR_INVALID_USAGE once the worker is stopping. */
gs_status_t gs__worker_submit(gs__worker_t *w, gs__task_t *task);

/* Run @p task on the calling thread if the worker is idle (empty queue,
 * nothing in flight), which saves two thread hand-offs per blocking call;
 * otherwise queue it and wait. The task must not stay in flight (its run()
 * must not return GS_INPROGRESS). Returns the task's status with this
 * thread's last error set. Thread-safe. */
gs_status_t gs__worker_run_blocking(gs__worker_t *w, gs__task_t *task);

/* Make an idle worker drive the transport once now (tick(), or else idle()
 * with no wait), instead of at its next tick: a request made from another
 * thread (gs_comm_revoke) that only the transport's progress carries out.
 * A worker busy with tasks drives the transport anyway. Thread-safe. */
void gs__worker_poke(gs__worker_t *w);

/* Block until task finished; returns its status. Thread-safe. The worker
 * bounds every task by the communicator deadline, so this returns. */
gs_status_t gs__worker_wait(gs__worker_t *w, gs__task_t *task);

/* 1 when task finished (acquire). */
static inline int gs__task_done(const gs__task_t *task)
{
    return atomic_load_explicit(&((gs__task_t *)task)->done, memory_order_acquire);
}

/* Run every queued task, wait for every task in flight, then stop and join
 * the thread. Idempotent. */
void gs__worker_stop(gs__worker_t *w);

#endif /* GS_CORE_WORKER_H */
