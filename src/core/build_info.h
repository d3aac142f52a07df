/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What this build of the library has: one row per transport and optional part
 * (the CMake GS_WITH_* options that decided it), for gs_info and for messages
 * that must say what to rebuild. The one list of them.
 */
#ifndef GS_CORE_BUILD_INFO_H
#define GS_CORE_BUILD_INFO_H

#include <stddef.h>

typedef struct gs__build_part {
    const char *name;    /* "mpi" */
    int transport;       /* 1: a transport GS_TRANSPORT can name */
    int on;              /* 1: built in */
    const char *what;    /* what it is */
    const char *rebuild; /* how to get it when it is off ("" when it is always on) */
} gs__build_part_t;

/* The rows, in a fixed order; *count_out gets how many. Never NULL. */
const gs__build_part_t *gs__build_parts(size_t *count_out);

#endif /* GS_CORE_BUILD_INFO_H */
