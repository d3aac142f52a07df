/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rails: the interfaces a rank's TCP traffic may take, and how a pair of
 * ranks pairs theirs (docs/design.md, "Several rails per peer"). Pure
 * except gs__tcp_rails_local (getifaddrs). No logging: failures and the
 * pairing's left-outs come back in caller buffers, and the transport
 * decides what to log.
 *
 * The address text a rank publishes through the bootstrap:
 *   one rail:      "ip:port" or "[ip6]:port"      (exactly as gs__sock_format)
 *   several rails: "ip:port/prefix,ip:port/prefix" (rail order, at most
 *                  GS_TCP_MAX_RAILS entries, every entry the same port)
 */
#ifndef GS_TRANSPORT_TCP_TCP_RAIL_H
#define GS_TRANSPORT_TCP_TCP_RAIL_H

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/socket.h"
#include "gradsync/status.h"

/* Most rails a rank uses (interfaces selected beyond it are left out, said). */
#define GS_TCP_MAX_RAILS 4

typedef struct gs__tcp_rail {
    gs__sockaddr_t addr;      /* local: the interface's address, port 0; a peer's: with its port */
    int prefix;               /* subnet prefix length; -1 when unknown (a one-rail address text) */
    char ifname[IF_NAMESIZE]; /* local rails: the interface; a peer's: "" */
} gs__tcp_rail_t;

/*
 * The local rails that GS_SOCKET_IFNAME @p spec selects, NCCL's syntax: a
 * comma-separated list of interface-name prefixes ("eth0,eth1", "eth"), an
 * entry starting with '=' matching the exact name only, and a leading '^'
 * making the whole list exclusions ("^docker,lo"). Selected: interfaces
 * that are up and have an address of @p family ("any", "ipv4", "ipv6"; IPv4
 * preferred under "any", one address per interface, link-local IPv6 only
 * when the interface has nothing else, and such an interface only where an
 * entry names it exactly); loopback only when an inclusion entry names it
 * (never through '^' lists). Order: the list's order (within a prefix entry
 * the interface of exactly that name first), then the interface order of
 * getifaddrs. core/socket.c's gs__sock_pick_ifaces does the selection
 * (its messages). At most @p max; *n_out the count;
 * *extra_out (may be NULL) how many more were selected and left out.
 * An empty or NULL spec is not for this call (GS_ERR_INVALID_ARG).
 * Returns GS_OK; GS_ERR_INVALID_ARG (a malformed spec: empty entries,
 * '^' not first, '=' alone, an entry longer than IF_NAMESIZE - 1; or
 * nothing selected: the message lists the interfaces here and what the
 * spec means); GS_ERR_SYSTEM (getifaddrs).
 */
gs_status_t gs__tcp_rails_local(const char *spec, const char *family, gs__tcp_rail_t *out, int max,
                                int *n_out, int *extra_out);

/*
 * Write the address text of @p n rails (n >= 1) listening on @p port into
 * buf[len]: n == 1 gives "ip:port" with no prefix. Returns GS_OK or
 * GS_ERR_INVALID_ARG (n out of 1..GS_TCP_MAX_RAILS, port out of 0..65535,
 * a rail of a list without a valid prefix, buffer too small); sets no last
 * error.
 */
gs_status_t gs__tcp_rails_format(const gs__tcp_rail_t *rails, int n, int port, char *buf,
                                 size_t len);

/*
 * Parse an address text (either form above) into out[GS_TCP_MAX_RAILS]:
 * *n_out rails, prefix -1 for the one-rail form (a lone entry with a
 * "/prefix" keeps it). Checks: every entry parses as a numeric address with
 * a port 0..65535 (inet_pton, no name resolution; IPv6 in brackets, its
 * "%scope" a number or an interface of this host), prefixes 0..32 (IPv4) or
 * 0..128 (IPv6), every entry of a list has a prefix, no empty entry, at
 * most GS_TCP_MAX_RAILS entries, no two entries with the same address.
 * Returns GS_OK or GS_ERR_INVALID_ARG with a reason in why[whylen] (*n_out
 * 0); sets no last error.
 */
gs_status_t gs__tcp_rails_parse(const char *text, gs__tcp_rail_t *out, int *n_out, char *why,
                                size_t whylen);

/*
 * Pair the rails of the lower rank @p lo (nlo of them) with those of the
 * higher rank @p hi: for each rail of lo in order, the first unused rail
 * of hi in the same subnet (both prefixes known and equal, and the
 * addresses equal under that prefix; same family). Writes *np pairs
 * pair_lo[k], pair_hi[k] (k < *np, in lo's order; arrays of
 * GS_TCP_MAX_RAILS). With no pair at all (or either side with prefix -1,
 * the one-rail form) it writes one pair (0, 0) and returns false: "no
 * subnet match, one rail". Both ranks of a pair call it with the same
 * arguments in the same roles, so they agree.
 */
bool gs__tcp_rails_pair(const gs__tcp_rail_t *lo, int nlo, const gs__tcp_rail_t *hi, int nhi,
                        int *pair_lo, int *pair_hi, int *np);

#endif /* GS_TRANSPORT_TCP_TCP_RAIL_H */
