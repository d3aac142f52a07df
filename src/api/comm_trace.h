/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The communicator's side of the flight recorder (core/trace.h): creating
 * it with the configuration's size, registering it for GS_DUMP_SIGNAL, and
 * freeing it. gs_comm_dump, the public call, lives in comm_trace.c too.
 */
#ifndef GS_API_COMM_TRACE_H
#define GS_API_COMM_TRACE_H

#include "gradsync/gradsync.h"

/* Create comm->actx.trace (GS_TRACE_SIZE operations) and, when
 * GS_DUMP_SIGNAL is set, install its handler. Worker not yet started.
 * Returns GS_OK, GS_ERR_NO_MEMORY, GS_ERR_INVALID_ARG (bad signal),
 * GS_ERR_SYSTEM. */
gs_status_t gs__comm_trace_setup(gs_comm_t comm);

/* Free what gs__comm_trace_setup made (safe when it never ran). */
void gs__comm_trace_free(gs_comm_t comm);

#endif /* GS_API_COMM_TRACE_H */
