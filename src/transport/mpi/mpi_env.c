/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Process-wide MPI ownership: who initialised MPI, with which thread level,
 * and how many gradsync objects use it. gradsync initialises MPI only when
 * nobody has, and then finalizes it when its last user goes; an MPI the
 * application initialised is never finalized here. This file does not send
 * anything.
 */
#include "transport/mpi/mpi_transport.h"

#include <pthread.h>
#include <stdio.h>

#include "core/error.h"
#include "core/log.h"

static pthread_mutex_t env_mu = PTHREAD_MUTEX_INITIALIZER;
static int env_users;
static int env_owned; /* gradsync called MPI_Init_thread */

static const char *thread_level_name(int level)
{
    switch (level) {
    case MPI_THREAD_SINGLE:
        return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
        return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
        return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
        return "MPI_THREAD_MULTIPLE";
    default:
        return "an unknown thread level";
    }
}

const char *gs__mpi_errstr(int code)
{
    static _Thread_local char buf[MPI_MAX_ERROR_STRING + 1];
    int len = 0;

    if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) {
        (void)snprintf(buf, sizeof(buf), "MPI error %d", code);
    }
    return buf;
}

static gs_status_t env_check_level(void)
{
    int provided = MPI_THREAD_SINGLE;

    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        return gs__error_set(GS_ERR_UNSUPPORTED,
                             "mpi: MPI was initialised with %s, gradsync needs "
                             "MPI_THREAD_MULTIPLE (its worker thread calls MPI while the "
                             "application may): call MPI_Init_thread(..., MPI_THREAD_MULTIPLE, "
                             "...) and check that the MPI library provides it",
                             thread_level_name(provided));
    }
    return GS_OK;
}

gs_status_t gs__mpi_env_acquire(void)
{
    gs_status_t status = GS_OK;
    int inited = 0;
    int finalized = 0;

    pthread_mutex_lock(&env_mu);
    MPI_Finalized(&finalized);
    if (finalized) {
        status = gs__error_set(GS_ERR_UNSUPPORTED,
                               "mpi: MPI is already finalized in this process (it cannot be "
                               "initialised twice)");
        goto out;
    }
    MPI_Initialized(&inited);
    if (!inited) {
        int provided = MPI_THREAD_SINGLE;
        int ret = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);

        if (ret != MPI_SUCCESS) {
            status = gs__error_set(GS_ERR_SYSTEM, "mpi: MPI_Init_thread failed: %s",
                                   gs__mpi_errstr(ret));
            goto out;
        }
        env_owned = 1;
        GS_INFO(INIT, "mpi: gradsync initialised MPI (%s provided)", thread_level_name(provided));
    }
    status = env_check_level();
    if ((status != GS_OK) && env_owned && (env_users == 0)) {
        MPI_Finalize();
        env_owned = 0;
    }
    if (status == GS_OK) {
        env_users++;
    }
out:
    pthread_mutex_unlock(&env_mu);
    return status;
}

void gs__mpi_env_release(void)
{
    pthread_mutex_lock(&env_mu);
    if (env_users > 0) {
        env_users--;
    }
    if ((env_users == 0) && env_owned) {
        int finalized = 0;

        MPI_Finalized(&finalized);
        if (!finalized) {
            GS_INFO(INIT, "mpi: finalizing the MPI gradsync initialised");
            MPI_Finalize();
        }
        env_owned = 0;
    }
    pthread_mutex_unlock(&env_mu);
}
