/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The communicator's side of the flight recorder (core/recorder.h): creating
 * it with the configuration's size, registering it for GS_DUMP_SIGNAL, and
 * freeing it. gs_comm_dump, the public call, lives in comm_recorder.c too.
 */
#ifndef GS_API_COMM_RECORDER_H
#define GS_API_COMM_RECORDER_H

#include "gradsync/gradsync.h"

/* Create comm->actx.recorder (GS_TRACE_SIZE operations) and, when
 * GS_DUMP_SIGNAL is set, install its handler. Worker not yet started.
 * Returns GS_OK, GS_ERR_NO_MEMORY, GS_ERR_INVALID_ARG (bad signal),
 * GS_ERR_SYSTEM. */
gs_status_t gs__comm_recorder_setup(gs_comm_t comm);

/* Free what gs__comm_recorder_setup made (safe when it never ran). */
void gs__comm_recorder_free(gs_comm_t comm);

#endif /* GS_API_COMM_RECORDER_H */
