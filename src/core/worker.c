/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Worker thread: pops tasks in FIFO order and runs them one at a time. It
 * does not know what a task does; deadlines are enforced inside the tasks.
 */
#include "core/worker.h"

#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "gradsync/gradsync.h"

static void *worker_main(void *arg)
{
    gs__worker_t *w = (gs__worker_t *)arg;

    pthread_mutex_lock(&w->mu);
    for (;;) {
        while ((w->head == NULL) && !w->stop) {
            pthread_cond_wait(&w->cv_work, &w->mu);
        }
        if (w->head == NULL) {
            break; /* stop requested and queue drained */
        }
        gs__task_t *task = w->head;
        w->head = task->next;
        if (w->head == NULL) {
            w->tail = NULL;
        }
        pthread_mutex_unlock(&w->mu);

        gs__error_clear();
        gs_status_t status = task->run(task, w->ctx);
        task->status = status;
        if (status != GS_OK) {
            const char *msg = gs__error_get();
            if (msg[0] == '\0') {
                msg = gs_strerror(status);
            }
            snprintf(task->errmsg, sizeof(task->errmsg), "%s", msg);
        }

        pthread_mutex_lock(&w->mu);
        atomic_store_explicit(&task->done, 1, memory_order_release);
        pthread_cond_broadcast(&w->cv_done);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

gs_status_t gs__worker_start(gs__worker_t *w, void *ctx)
{
    int ret;

    memset(w, 0, sizeof(*w));
    w->ctx = ctx;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv_work, NULL);
    pthread_cond_init(&w->cv_done, NULL);
    ret = pthread_create(&w->thread, NULL, worker_main, w);
    if (ret != 0) {
        pthread_cond_destroy(&w->cv_done);
        pthread_cond_destroy(&w->cv_work);
        pthread_mutex_destroy(&w->mu);
        return gs__error_set(GS_ERR_SYSTEM, "cannot start the worker thread: %s", strerror(ret));
    }
    w->started = 1;
    return GS_OK;
}

gs_status_t gs__worker_submit(gs__worker_t *w, gs__task_t *task)
{
    task->next = NULL;
    atomic_store_explicit(&task->done, 0, memory_order_relaxed);
    task->status = GS_INPROGRESS;
    task->errmsg[0] = '\0';

    pthread_mutex_lock(&w->mu);
    if (w->stop) {
        pthread_mutex_unlock(&w->mu);
        return gs__error_set(GS_ERR_INVALID_USAGE, "the communicator is being destroyed");
    }
    if (w->tail != NULL) {
        w->tail->next = task;
    } else {
        w->head = task;
    }
    w->tail = task;
    pthread_cond_signal(&w->cv_work);
    pthread_mutex_unlock(&w->mu);
    return GS_OK;
}

gs_status_t gs__worker_wait(gs__worker_t *w, gs__task_t *task)
{
    if (!gs__task_done(task)) {
        pthread_mutex_lock(&w->mu);
        while (!gs__task_done(task)) {
            pthread_cond_wait(&w->cv_done, &w->mu);
        }
        pthread_mutex_unlock(&w->mu);
    }
    return task->status;
}

void gs__worker_stop(gs__worker_t *w)
{
    if (!w->started) {
        return;
    }
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->cv_work);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cv_done);
    pthread_cond_destroy(&w->cv_work);
    pthread_mutex_destroy(&w->mu);
    w->started = 0;
}
