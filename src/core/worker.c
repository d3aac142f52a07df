/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Worker thread: pops tasks in FIFO order and runs them one at a time. A
 * task may stay in flight (run() returns GS_INPROGRESS); the worker tests
 * in-flight tasks after every run and, when the queue is empty, drives the
 * transport through hooks.idle() until they finish. It does not know what a
 * task does; deadlines are enforced inside the tasks.
 */
#include "core/worker.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "gradsync/gradsync.h"

/* Idle polling period: long when a submit can wake the poller, short when
 * it cannot (then a new task waits at most this long). */
#define WORKER_IDLE_WAKEABLE_NS 50000000ull
#define WORKER_IDLE_POLL_NS 200000ull

static void worker_finish(gs__worker_t *w, gs__task_t *task, gs_status_t status)
{
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
    pthread_mutex_unlock(&w->mu);
}

/* Test every in-flight task once (worker thread only). */
static void worker_test_inflight(gs__worker_t *w)
{
    gs__task_t **pp = &w->inflight;

    while (*pp != NULL) {
        gs__task_t *task = *pp;
        gs_status_t status;

        gs__error_clear();
        status = task->test(task, w->ctx);
        if (status == GS_INPROGRESS) {
            pp = &task->next;
            continue;
        }
        *pp = task->next;
        task->next = NULL;
        worker_finish(w, task, status);
    }
}

static void worker_run(gs__worker_t *w, gs__task_t *task)
{
    gs_status_t status;

    gs__error_clear();
    status = task->run(task, w->ctx);
    if ((status == GS_INPROGRESS) && (task->test != NULL)) {
        /* Append, so that in-flight tasks finish in submission order when
         * they complete together. */
        gs__task_t **pp = &w->inflight;
        while (*pp != NULL) {
            pp = &(*pp)->next;
        }
        task->next = NULL;
        *pp = task;
    } else {
        if (status == GS_INPROGRESS) {
            status = gs__error_set(GS_ERR_INTERNAL, "a task stayed in flight without a test");
        }
        worker_finish(w, task, status);
    }
    if (w->inflight != NULL) {
        worker_test_inflight(w);
    }
}

static int worker_count_inflight(const gs__worker_t *w)
{
    int n = 0;
    for (const gs__task_t *t = w->inflight; t != NULL; t = t->next) {
        n++;
    }
    return n;
}

/* Wait on cv_work (mu held): at most one tick when a tick is set.
 * Returns ETIMEDOUT when the tick came first. */
static int worker_sleep(gs__worker_t *w)
{
    struct timespec until;

    if ((w->hooks.tick == NULL) || (w->hooks.tick_ns == 0)) {
        return pthread_cond_wait(&w->cv_work, &w->mu);
    }
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)(w->hooks.tick_ns / 1000000000ull);
    until.tv_nsec += (long)(w->hooks.tick_ns % 1000000000ull);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    return pthread_cond_timedwait(&w->cv_work, &w->mu, &until);
}

static void *worker_main(void *arg)
{
    gs__worker_t *w = (gs__worker_t *)arg;

    pthread_mutex_lock(&w->mu);
    for (;;) {
        if (w->inline_active) {
            /* A caller owns the transport; it signals cv_work when done
             * only when there is work, so with a tick wake up on time. */
            (void)worker_sleep(w);
            continue;
        }
        if (w->head != NULL) {
            gs__task_t *task = w->head;
            w->head = task->next;
            if (w->head == NULL) {
                w->tail = NULL;
            }
            w->busy = 1;
            pthread_mutex_unlock(&w->mu);
            worker_run(w, task);
            pthread_mutex_lock(&w->mu);
            w->ninflight = worker_count_inflight(w);
            w->busy = 0;
            continue;
        }
        if (w->inflight != NULL) {
            const uint64_t wait =
                (w->hooks.wake != NULL) ? WORKER_IDLE_WAKEABLE_NS : WORKER_IDLE_POLL_NS;
            w->idle_polling = 1;
            w->busy = 1;
            pthread_mutex_unlock(&w->mu);
            if (w->hooks.idle != NULL) {
                w->hooks.idle(w->ctx, wait);
            }
            worker_test_inflight(w);
            pthread_mutex_lock(&w->mu);
            w->ninflight = worker_count_inflight(w);
            w->idle_polling = 0;
            w->busy = 0;
            continue;
        }
        if (w->poke) {
            w->poke = 0;
            w->busy = 1;
            pthread_mutex_unlock(&w->mu);
            if (w->hooks.tick != NULL) {
                w->hooks.tick(w->ctx);
            } else if (w->hooks.idle != NULL) {
                w->hooks.idle(w->ctx, 0);
            }
            pthread_mutex_lock(&w->mu);
            w->busy = 0;
            continue;
        }
        if (w->stop) {
            break; /* stop requested, queue drained, nothing in flight */
        }
        if ((w->hooks.tick != NULL) && (w->hooks.tick_ns > 0)) {
            if ((worker_sleep(w) == ETIMEDOUT) && (w->head == NULL) && (w->inflight == NULL) &&
                !w->inline_active && !w->stop) {
                /* Nothing to do for a tick: beat (busy keeps callers off the
                 * transport meanwhile; they queue, and we run their task next). */
                w->busy = 1;
                pthread_mutex_unlock(&w->mu);
                w->hooks.tick(w->ctx);
                pthread_mutex_lock(&w->mu);
                w->busy = 0;
            }
            continue;
        }
        pthread_cond_wait(&w->cv_work, &w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

gs_status_t gs__worker_start(gs__worker_t *w, void *ctx, const gs__worker_hooks_t *hooks)
{
    int ret;

    memset(w, 0, sizeof(*w));
    w->ctx = ctx;
    if (hooks != NULL) {
        w->hooks = *hooks;
    }
    pthread_mutex_init(&w->mu, NULL);
    {
        /* cv_work's timed wait (the tick) runs on the monotonic clock. */
        pthread_condattr_t attr;

        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&w->cv_work, &attr);
        pthread_condattr_destroy(&attr);
    }
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

void gs__worker_poke(gs__worker_t *w)
{
    pthread_mutex_lock(&w->mu);
    if (w->started) {
        w->poke = 1;
        pthread_cond_signal(&w->cv_work);
    }
    pthread_mutex_unlock(&w->mu);
}

gs_status_t gs__worker_submit(gs__worker_t *w, gs__task_t *task)
{
    int wake;

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
    wake = w->idle_polling;
    pthread_mutex_unlock(&w->mu);
    if (wake && (w->hooks.wake != NULL)) {
        w->hooks.wake(w->ctx);
    }
    return GS_OK;
}

gs_status_t gs__worker_run_blocking(gs__worker_t *w, gs__task_t *task)
{
    char saved[GS_ERROR_MSG_MAX];
    gs_status_t status;

    pthread_mutex_lock(&w->mu);
    if (w->stop || w->busy || w->inline_active || (w->head != NULL) || (w->ninflight > 0)) {
        pthread_mutex_unlock(&w->mu);
        status = gs__worker_submit(w, task);
        if (status != GS_OK) {
            return status;
        }
        status = gs__worker_wait(w, task);
        if (status != GS_OK) {
            gs__error_copy_in(task->errmsg);
        }
        return status;
    }
    /* The worker sleeps in cv_work with nothing to do: run here, in order,
     * since the queue is empty. Tasks submitted meanwhile wait for us. */
    w->inline_active = 1;
    pthread_mutex_unlock(&w->mu);

    task->next = NULL;
    task->errmsg[0] = '\0';
    /* The task runs on the caller's thread: its own probes (a declined
     * native path, a codec the planner tried) write this thread's last
     * error, and the caller's sentence must survive a success
     * (gs_last_error: valid until the thread's next failing call). */
    snprintf(saved, sizeof(saved), "%s", gs__error_get());
    gs__error_clear();
    status = task->run(task, w->ctx);
    if (status == GS_INPROGRESS) {
        status = gs__error_set(GS_ERR_INTERNAL, "a blocking task stayed in flight");
    }
    if (status == GS_OK) {
        gs__error_copy_in(saved);
    }
    task->status = status;
    atomic_store_explicit(&task->done, 1, memory_order_release);

    pthread_mutex_lock(&w->mu);
    w->inline_active = 0;
    if ((w->head != NULL) || w->stop) {
        /* Only then has the worker something to do: waking it for nothing
         * would cost every blocking call a thread switch (on a busy host,
         * a preemption of another rank). */
        pthread_cond_signal(&w->cv_work);
    }
    pthread_mutex_unlock(&w->mu);
    return status;
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
    int wake;

    if (!w->started) {
        return;
    }
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->cv_work);
    wake = w->idle_polling;
    pthread_mutex_unlock(&w->mu);
    if (wake && (w->hooks.wake != NULL)) {
        w->hooks.wake(w->ctx);
    }
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cv_done);
    pthread_cond_destroy(&w->cv_work);
    pthread_mutex_destroy(&w->mu);
    w->started = 0;
}
