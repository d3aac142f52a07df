/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which host this process runs on, as a 64-bit id that two ranks compare
 * to learn that they share a machine (shared memory, host-aware ring
 * order, hierarchical all-reduce).
 */
#ifndef GS_CORE_HOST_H
#define GS_CORE_HOST_H

#include <stdint.h>

/*
 * The host id of this process. With a non-empty @p override (GS_HOST_ID)
 * it is a hash of that string, so tests can pretend ranks on one machine
 * run on different hosts. Otherwise a hash of the hostname, the kernel's
 * boot id and the network and IPC namespaces: processes in different
 * network namespaces (the tests/net lab) count as different hosts, since
 * traffic between them must cross their (shaped) links. Never 0.
 */
uint64_t gs__host_id(const char *override);

#endif /* GS_CORE_HOST_H */
