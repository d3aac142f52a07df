/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The watchdog behind gs_config_t.abort_flag (comm_watch.c), used by
 * gs_comm_init*: started before the init's first step, armed once the
 * transport instance exists (from then on a set flag aborts it), disarmed
 * before the instance is freed on an error path, asked between steps, and
 * stopped (joined) when the init returns. All calls are no-ops when the
 * caller gave no flag. Only the init's thread calls them.
 */
#ifndef GS_API_COMM_WATCH_H
#define GS_API_COMM_WATCH_H

#include <pthread.h>

#include "gradsync/gradsync.h"

typedef struct gs__init_watch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    volatile int *flag;
    gs_comm_t comm; /* its tr.tp once the transport exists, else NULL */
    int done;
    int tripped;
    pthread_t thread;
    int started;
} gs__init_watch_t;

/* Start watching cfg->abort_flag (when cfg has one, within cfg->size). */
void gs__init_watch_start(gs__init_watch_t *w, const gs_config_t *cfg);
/* The transport of comm exists: a set flag aborts it from now on. */
void gs__init_watch_arm(gs__init_watch_t *w, gs_comm_t comm);
/* The transport is about to be freed: the watchdog must not touch it. */
void gs__init_watch_disarm(gs__init_watch_t *w);
/* 1 when the flag was seen set (the transport, if armed, is aborted). */
int gs__init_watch_tripped(gs__init_watch_t *w);
/* Stop and join; returns whether the flag was seen set. */
int gs__init_watch_stop(gs__init_watch_t *w);
/* Sets this thread's last error and returns GS_ERR_ABORTED. */
gs_status_t gs__init_watch_aborted(void);

#endif /* GS_API_COMM_WATCH_H */
