/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the public entry points of coll.c share with the other files of the
 * API layer: the two submit paths of a validated call (p2p.c builds the
 * descriptors of gs_recv_status and gs_irecv_status and submits them the
 * way gs_recv and gs_irecv are), and the group hook coll.c's blocking path
 * calls (p2p.c keeps the group). Nothing here is public.
 */
#ifndef GS_API_COLL_IMPL_H
#define GS_API_COLL_IMPL_H

#include "api/comm_impl.h"

/* Check every argument of *d (coll_check.c): GS_OK, or the first problem
 * as GS_ERR_INVALID_ARG / GS_ERR_UNSUPPORTED with this thread's last error
 * naming @p fn and the argument; sets d->mem and d->device from the
 * buffers. Nothing is changed on failure. */
gs_status_t gs__coll_validate(const char *fn, gs_comm_t comm, gs__coll_desc_t *d);

/* Validate *d completely (as every gs_* call does) and run it: blocking
 * (with the deadline; inside a group, a point-to-point call is only
 * remembered) or returning a heap request in *req_out. Return GS_OK or the
 * first problem, with this thread's last error naming @p fn. */
gs_status_t gs__coll_blocking(const char *fn, gs_comm_t comm, const gs__coll_desc_t *d);
gs_status_t gs__coll_nonblocking(const char *fn, gs_comm_t comm, const gs__coll_desc_t *d,
                                 gs_request_t *req_out);

/* 1 while this thread is inside gs_group_start() ... gs_group_end(). */
int gs__group_active(void);

/* Inside a group: remember the validated point-to-point call *d (host
 * buffers; the caller promises they live until the group ends) to post at
 * gs_group_end(). Returns GS_OK, GS_ERR_UNSUPPORTED for device buffers
 * (named), GS_ERR_NO_MEMORY. */
gs_status_t gs__group_add(const char *fn, gs_comm_t comm, const gs__coll_desc_t *d);

/* Release a finished request: carry its error text to this thread, free it
 * and set *req to GS_REQUEST_NULL. Returns the request's status. */
gs_status_t gs__request_release(gs_request_t *req);

#endif /* GS_API_COLL_IMPL_H */
