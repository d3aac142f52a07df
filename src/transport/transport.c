/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transport registry: a const table of the transports compiled into the
 * library, looked up by name (GS_TRANSPORT or the config). Registration is
 * explicit: no constructor attributes, no dlopen. A table whose ABI size is
 * wrong or that lacks a required slot is a bug in gradsync and is refused
 * with GS_ERR_INTERNAL.
 */
#include "transport/transport.h"

#include "core/build_info.h"
#include "core/error.h"
#include "transport/tcp/tcp_transport.h"
#ifdef GS_WITH_MPI
#include "transport/mpi/mpi_transport.h"
#endif

#include <stdio.h>
#include <string.h>

static const gs__transport_ops_t *const builtin_transports[] = {
    &gs__tcp_ops,
#ifdef GS_WITH_MPI
    &gs__mpi_ops,
#endif
};

#define BUILTIN_COUNT (sizeof(builtin_transports) / sizeof(builtin_transports[0]))

/* The transports of this build and those left out, from the one list of parts
 * (core/build_info.h): "tcp, mpi" or "tcp; not built: mpi (install ...)". */
static void transports_named(char *out, size_t cap)
{
    size_t n = 0;
    size_t len = 0;
    const gs__build_part_t *parts = gs__build_parts(&n);
    const char *sep = "";

    out[0] = '\0';
    for (int on = 1; on >= 0; on--) {
        for (size_t i = 0; (i < n) && (len < cap); i++) {
            int w;

            if (!parts[i].transport || (parts[i].on != on)) {
                continue;
            }
            if (on) {
                w = snprintf(out + len, cap - len, "%s%s", sep, parts[i].name);
            } else {
                w = snprintf(out + len, cap - len, "%s%s (%s)", sep, parts[i].name,
                             parts[i].rebuild);
            }
            if (w < 0) {
                return;
            }
            len += (size_t)w;
            sep = ", ";
        }
        sep = "; not built: ";
    }
}

/* Every slot a transport must fill (all of them, for now). */
static const char *missing_slot(const gs__transport_ops_t *ops)
{
    if (ops->init == NULL) {
        return "init";
    }
    if (ops->get_address == NULL) {
        return "get_address";
    }
    if (ops->connect == NULL) {
        return "connect";
    }
    if (ops->isend == NULL) {
        return "isend";
    }
    if (ops->irecv == NULL) {
        return "irecv";
    }
    if (ops->test == NULL) {
        return "test";
    }
    if (ops->progress == NULL) {
        return "progress";
    }
    if (ops->req_release == NULL) {
        return "req_release";
    }
    if (ops->abort == NULL) {
        return "abort";
    }
    if (ops->finalize == NULL) {
        return "finalize";
    }
    return NULL;
}

gs_status_t gs__transport_lookup(const char *name, const gs__transport_ops_t **ops_out)
{
    char named[512];

    if ((name == NULL) || (ops_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "transport: lookup needs a name and an output");
    }
    for (size_t i = 0; i < BUILTIN_COUNT; i++) {
        const gs__transport_ops_t *ops = builtin_transports[i];
        const char *slot;

        if ((ops->name == NULL) || (strcmp(ops->name, name) != 0)) {
            continue;
        }
        if (ops->abi_size != sizeof(gs__transport_ops_t)) {
            return gs__error_set(GS_ERR_INTERNAL,
                                 "transport: %s was built against an ops table of %zu bytes, "
                                 "this library has %zu",
                                 name, ops->abi_size, sizeof(gs__transport_ops_t));
        }
        slot = missing_slot(ops);
        if (slot != NULL) {
            return gs__error_set(GS_ERR_INTERNAL, "transport: %s lacks the required slot %s", name,
                                 slot);
        }
        *ops_out = ops;
        return GS_OK;
    }
    transports_named(named, sizeof(named));
    return gs__error_set(GS_ERR_INVALID_ARG, "transport: unknown transport \"%s\" (built in: %s)",
                         name, named);
}
