/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TCP transport's ops table, for the registry in transport.c. The
 * contracts of every slot are in transport.h; the design (full mesh of
 * nsocks sockets per pair, striping, matching, failure) is described in
 * tcp_conn.h and docs/wire.md.
 */
#ifndef GS_TRANSPORT_TCP_TCP_TRANSPORT_H
#define GS_TRANSPORT_TCP_TCP_TRANSPORT_H

#include "transport/transport.h"

extern const gs_transport_ops_t gs__tcp_ops;

#endif /* GS_TRANSPORT_TCP_TCP_TRANSPORT_H */
