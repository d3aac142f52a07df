/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Socket helpers shared by the bootstrap (core) and the TCP transport:
 * address text <-> sockaddr, choosing the interface to listen on, listening,
 * connecting and blocking-with-deadline reads/writes. IPv4 and IPv6.
 * Address text is "a.b.c.d:port" or "[v6addr]:port". Every failure sets the
 * last error (gs__error_set) with the syscall, the address and strerror.
 */
#ifndef GS_CORE_SOCKET_H
#define GS_CORE_SOCKET_H

#include <net/if.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "core/le.h" /* the wire formats that include this use it */
#include "gradsync/status.h"

#define GS_SOCK_ADDR_MAX 128

typedef struct gs__sockaddr {
    struct sockaddr_storage ss;
    socklen_t len;
} gs__sockaddr_t;

/* Parse "host:port" / "[v6]:port" (host may be a name; resolved with
 * getaddrinfo, preferring @p family "any"/"ipv4"/"ipv6").
 * Returns GS_OK or GS_ERR_INVALID_ARG. */
gs_status_t gs__sock_parse(const char *text, const char *family, gs__sockaddr_t *out);
/* Resolve host and port separately. Same returns. */
gs_status_t gs__sock_resolve(const char *host, int port, const char *family, gs__sockaddr_t *out);
/* Format as "ip:port" / "[ip6]:port". Returns GS_OK or GS_ERR_INVALID_ARG. */
gs_status_t gs__sock_format(const gs__sockaddr_t *addr, char *buf, size_t len);

/*
 * GS_SOCKET_IFNAME's syntax (NCCL's NCCL_SOCKET_IFNAME): a comma-separated
 * list of entries, each an interface-name prefix ("eth" selects eth0 and
 * eth1) or, after '=', an exact name ("=eth0"); a leading '^' makes the
 * whole list exclusions ("^docker,lo": every interface but loopback and
 * those). No spaces, no empty entries, '^' only first, names of at most
 * IF_NAMESIZE - 1 characters, at most GS_SOCK_IFSPEC_MAX entries. A plain
 * "eth0" is the prefix eth0 (the interface eth0 itself comes first).
 */
#define GS_SOCK_IFSPEC_MAX 32
/* The syntax in words, for messages ("...; it takes " GS_SOCK_IFSPEC_SYNTAX). */
#define GS_SOCK_IFSPEC_SYNTAX                                                                      \
    "a comma-separated list of interface-name prefixes (eth0,eth1 or eth), '=' before a "          \
    "name to match it exactly (=eth0), and a leading '^' to exclude the list instead "             \
    "(^docker,lo)"

/* One interface a GS_SOCKET_IFNAME spec selects (gs__sock_pick_ifaces). */
typedef struct gs__sock_iface {
    gs__sockaddr_t addr;      /* its address (one per interface), port 0 */
    int prefix;               /* that address's subnet prefix length (its netmask) */
    char ifname[IF_NAMESIZE]; /* the interface's name */
} gs__sock_iface_t;

/* Whether @p spec is well-formed GS_SOCKET_IFNAME syntax (above); no
 * interface is looked at. Returns GS_OK, or GS_ERR_INVALID_ARG with the
 * reason in why[whylen] ("has an empty entry"); sets no last error. */
gs_status_t gs__sock_ifspec_check(const char *spec, char *why, size_t whylen);

/*
 * The interfaces that @p spec (the syntax above; not empty) selects.
 * Selected: interfaces that are up and have an address of @p family ("any",
 * "ipv4", "ipv6"), one address each (IPv4 preferred under "any", link-local
 * IPv6 only when the interface has nothing else, and such an interface only
 * where an entry names it exactly: never through a prefix or a '^' list);
 * loopback only when an inclusion entry matches it. Order: the list's
 * order (within a prefix entry the interface of exactly that name first,
 * then the others), then getifaddrs' order; an interface once. Writes the
 * first @p max (out may be NULL when max is 0) and *n_out their count;
 * *extra_out (may be NULL) counts those selected beyond max. Returns GS_OK
 * (at least one selected, max aside); GS_ERR_INVALID_ARG (a malformed spec,
 * saying why and the syntax; or nothing selected: the message names the
 * spec, what it means and the interfaces here); GS_ERR_SYSTEM (getifaddrs).
 */
gs_status_t gs__sock_pick_ifaces(const char *spec, const char *family, gs__sock_iface_t *out,
                                 int max, int *n_out, int *extra_out);

/*
 * Pick the local address to listen on: with @p ifname (a GS_SOCKET_IFNAME
 * spec, the syntax above) the address of the first interface it selects
 * (gs__sock_pick_ifaces; its errors); otherwise the local address the kernel
 * would use to reach @p route_to (a UDP connect, no packet sent); loopback
 * when route_to is a loopback address. Port 0 in the result.
 */
gs_status_t gs__sock_pick_local(const char *ifname, const char *family,
                                const gs__sockaddr_t *route_to, gs__sockaddr_t *out);

/* 1 when @p a and @p b are the same IP address (of the same family), ports aside. */
int gs__sock_same_ip(const gs__sockaddr_t *a, const gs__sockaddr_t *b);

/* Create a listening, non-blocking, close-on-exec socket bound to addr
 * (port 0 = any; SO_REUSEADDR set). *bound_out gets the real address.
 * Returns GS_OK, GS_ERR_SYSTEM. */
gs_status_t gs__sock_listen(const gs__sockaddr_t *addr, int backlog, int *fd_out,
                            gs__sockaddr_t *bound_out);

/* Watch @p flag (NULL: none) on this thread: while it is set, the blocking
 * helpers below (connect, accept, read_full, write_full) return GS_ERR_ABORTED
 * within about 20 ms instead of waiting for their deadline. The rendezvous
 * watches gs_config_t.abort_flag this way. */
void gs__sock_watch_abort(const volatile int *flag);

/* Connect with retries on ECONNREFUSED/ETIMEDOUT until deadline_ns (monotonic).
 * The returned socket is blocking=0 (non-blocking), close-on-exec, TCP_NODELAY.
 * Returns GS_OK, GS_ERR_TIMEOUT (naming the address), GS_ERR_SYSTEM. */
gs_status_t gs__sock_connect(const gs__sockaddr_t *addr, uint64_t deadline_ns, int *fd_out);

/* Accept one connection if ready before deadline_ns (poll). Sets *fd_out to -1
 * when the deadline passed with none. Socket returned non-blocking, TCP_NODELAY.
 * Returns GS_OK, GS_ERR_SYSTEM, GS_ERR_ABORTED (a watched flag). */
gs_status_t gs__sock_accept(int listen_fd, uint64_t deadline_ns, int *fd_out);

/* Read/write exactly len bytes on a non-blocking socket, polling until
 * deadline_ns. Returns GS_OK, GS_ERR_TIMEOUT, GS_ERR_PEER_FAILED (EOF or reset;
 * the message says which), GS_ERR_SYSTEM. */
gs_status_t gs__sock_read_full(int fd, void *buf, size_t len, uint64_t deadline_ns);
gs_status_t gs__sock_write_full(int fd, const void *buf, size_t len, uint64_t deadline_ns);

/* Set TCP_NODELAY, O_NONBLOCK and FD_CLOEXEC. Returns GS_OK or GS_ERR_SYSTEM. */
gs_status_t gs__sock_tune(int fd);


/* 64-bit FNV-1a hash of a string (job ids, comm ids). */
static inline uint64_t gs__hash64(const void *data, size_t len, uint64_t seed)
{
    const uint8_t *p = (const uint8_t *)data;
    uint64_t h = 1469598103934665603ull ^ seed;
    for (size_t i = 0; i < len; i++) {
        /* The analyzer cannot read one byte of a 64-bit value it does not know (host.c's ids). */
        /* NOLINTNEXTLINE(clang-analyzer-core.uninitialized.Assign) */
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

#endif /* GS_CORE_SOCKET_H */
