/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The flight recorder of a communicator, seen from the API: its creation
 * (GS_TRACE_SIZE, GS_DUMP_SIGNAL), its release, and gs_comm_dump. The
 * recording itself happens in the algorithm layer (algo_diag.c) around
 * each collective; the ring and the text are core/recorder.c's.
 */
#include "api/comm_recorder.h"

#include <stdio.h>

#include "api/comm_impl.h"
#include "core/error.h"
#include "core/recorder.h"

gs_status_t gs__comm_recorder_setup(gs_comm_t comm)
{
    gs__recorder_t *t = NULL;
    gs_status_t status;

    status = gs__recorder_create((uint32_t)comm->cfg.trace_size, comm->rank, comm->size,
                                 gs__algo_recorder_describe, gs__algo_recorder_algo_name, &t);
    if (status != GS_OK) {
        return status;
    }
    status = gs__recorder_signal_setup(comm->cfg.dump_signal, t);
    if (status != GS_OK) {
        gs__recorder_free(t);
        return status;
    }
    comm->actx.recorder = t;
    return GS_OK;
}

void gs__comm_recorder_free(gs_comm_t comm)
{
    gs__recorder_free(comm->actx.recorder);
    comm->actx.recorder = NULL;
}

static void comm_recorder_emit_file(void *arg, const char *line)
{
    FILE *f = (FILE *)arg;

    fputs(line, f);
    fputc('\n', f);
}

gs_status_t gs_comm_dump(gs_comm_t comm, FILE *stream)
{
    if ((comm == NULL) || (stream == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_comm_dump: %s is NULL",
                             comm == NULL ? "comm" : "stream");
    }
    if (comm->actx.recorder == NULL) {
        fprintf(stream, "gradsync flight recorder: rank %d of %d has none\n", comm->rank,
                comm->size);
    } else {
        gs__recorder_dump(comm->actx.recorder, comm_recorder_emit_file, stream);
    }
    if (fflush(stream) != 0) {
        return gs__error_set(GS_ERR_SYSTEM, "gs_comm_dump: writing the dump failed");
    }
    return GS_OK;
}
