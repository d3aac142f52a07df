/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gs_config_t.abort_flag (comm_watch.h): a watchdog thread, alive only
 * while an init runs with a flag, looks at the flag every INIT_WATCH_MS
 * and, once it is set, aborts the transport instance (the connection setup
 * then returns GS_ERR_ABORTED within one poll slice). The init's steps in
 * between ask gs__init_watch_tripped themselves.
 */
#include "api/comm_watch.h"

#include <stddef.h>
#include <string.h>
#include <time.h>

#include "api/comm_impl.h"
#include "core/error.h"
#include "core/log.h"

#define INIT_WATCH_MS 10

static void *init_watch_main(void *arg)
{
    gs__init_watch_t *w = (gs__init_watch_t *)arg;

    pthread_mutex_lock(&w->mu);
    while (!w->done) {
        struct timespec until;

        if (__atomic_load_n(w->flag, __ATOMIC_RELAXED) != 0) {
            w->tripped = 1;
            if ((w->comm != NULL) && (w->comm->tr.tp != NULL)) {
                (void)gs__tp_abort(&w->comm->tr);
            }
            break;
        }
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += INIT_WATCH_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        (void)pthread_cond_timedwait(&w->cv, &w->mu, &until);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

void gs__init_watch_start(gs__init_watch_t *w, const gs_config_t *cfg)
{
    memset(w, 0, sizeof(*w));
    if ((cfg == NULL) ||
        (cfg->size < offsetof(gs_config_t, abort_flag) + sizeof(cfg->abort_flag)) ||
        (cfg->abort_flag == NULL)) {
        return;
    }
    w->flag = cfg->abort_flag;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->started = (pthread_create(&w->thread, NULL, init_watch_main, w) == 0);
    if (!w->started) {
        GS_WARN("gs_comm_init: cannot start the abort_flag watchdog; the init is bounded by "
                "GS_TIMEOUT_MS only");
    }
}

/* The transport of comm exists: the watchdog may abort it from now on. */
void gs__init_watch_arm(gs__init_watch_t *w, gs_comm_t comm)
{
    if (!w->started) {
        return;
    }
    pthread_mutex_lock(&w->mu);
    w->comm = comm;
    if (w->tripped) {
        (void)gs__tp_abort(&comm->tr);
    }
    pthread_mutex_unlock(&w->mu);
}

/* The transport is about to be freed: the watchdog must not touch it. */
void gs__init_watch_disarm(gs__init_watch_t *w)
{
    if (!w->started) {
        return;
    }
    pthread_mutex_lock(&w->mu);
    w->comm = NULL;
    pthread_mutex_unlock(&w->mu);
}

/* 1 when the flag was seen set (the transport, if armed, is aborted). */
int gs__init_watch_tripped(gs__init_watch_t *w)
{
    int t;

    if (!w->started) {
        return 0;
    }
    pthread_mutex_lock(&w->mu);
    t = w->tripped || (__atomic_load_n(w->flag, __ATOMIC_RELAXED) != 0);
    pthread_mutex_unlock(&w->mu);
    return t;
}

/* Stop and join; returns whether the flag was seen set. */
int gs__init_watch_stop(gs__init_watch_t *w)
{
    int t;

    if (!w->started) {
        return 0;
    }
    pthread_mutex_lock(&w->mu);
    w->done = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    t = w->tripped || (__atomic_load_n(w->flag, __ATOMIC_RELAXED) != 0);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    w->started = 0;
    return t;
}

gs_status_t gs__init_watch_aborted(void)
{
    return gs__error_set(GS_ERR_ABORTED, "gs_comm_init: aborted through gs_config_t.abort_flag");
}
