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

#include "core/error.h"
#include "gradsync/status.h"

typedef struct gs__task gs__task_t;

/* Runs on the worker thread. Returns the task's status; on error the last
 * error text of the worker thread is copied into the task. */
typedef gs_status_t (*gs__task_fn_t)(gs__task_t *task, void *ctx);

struct gs__task {
    gs__task_t *next;
    gs__task_fn_t run;
    atomic_int done; /* 0 queued or running, 1 finished */
    gs_status_t status;
    char errmsg[GS_ERROR_MSG_MAX];
};

typedef struct gs__worker {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv_work; /* signalled on submit and stop */
    pthread_cond_t cv_done; /* broadcast when any task finishes */
    gs__task_t *head;
    gs__task_t *tail;
    void *ctx; /* handed to every task's run() */
    int stop;
    int started;
} gs__worker_t;

/* Initialise and start the thread. Returns GS_OK or GS_ERR_SYSTEM. */
gs_status_t gs__worker_start(gs__worker_t *w, void *ctx);

/* Queue a task (its run field set by the caller). Thread-safe.
 * Returns GS_OK, or GS_ERR_INVALID_USAGE once the worker is stopping. */
gs_status_t gs__worker_submit(gs__worker_t *w, gs__task_t *task);

/* Block until task finished; returns its status. Thread-safe. The worker
 * bounds every task by the communicator deadline, so this returns. */
gs_status_t gs__worker_wait(gs__worker_t *w, gs__task_t *task);

/* 1 when task finished (acquire). */
static inline int gs__task_done(const gs__task_t *task)
{
    return atomic_load_explicit(&((gs__task_t *)task)->done, memory_order_acquire);
}

/* Run every queued task, then stop and join the thread. Idempotent. */
void gs__worker_stop(gs__worker_t *w);

#endif /* GS_CORE_WORKER_H */
