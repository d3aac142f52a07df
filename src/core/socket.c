/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Socket helpers (contracts in socket.h): address parsing and formatting,
 * choosing the local address to listen on, listen/connect/accept, and
 * exact-length reads and writes with a deadline on non-blocking sockets.
 * Every failing call records the syscall, the address and strerror(errno)
 * through gs__error_set. This file knows nothing of frames or handshakes.
 */
#include "core/socket.h"

#include "core/clock.h"
#include "core/error.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Pause between connection attempts to an address that refused us. */
#define CONNECT_RETRY_MIN_MS 5
#define CONNECT_RETRY_MAX_MS 200

static int family_of(const char *family, int *af_out)
{
    if ((family == NULL) || (family[0] == '\0') || (strcmp(family, "any") == 0)) {
        *af_out = AF_UNSPEC;
    } else if (strcmp(family, "ipv4") == 0) {
        *af_out = AF_INET;
    } else if (strcmp(family, "ipv6") == 0) {
        *af_out = AF_INET6;
    } else {
        return -1;
    }
    return 0;
}

/* This thread's abort flag for the blocking helpers (gs__sock_watch_abort). */
static _Thread_local const volatile int *tl_abort;
/* While a flag is watched, the blocking helpers wake this often to look at it. */
#define SOCK_ABORT_SLICE_MS 20

void gs__sock_watch_abort(const volatile int *flag)
{
    tl_abort = flag;
}

static int sock_aborted(void)
{
    return (tl_abort != NULL) && (__atomic_load_n(tl_abort, __ATOMIC_RELAXED) != 0);
}

/* Milliseconds until deadline_ns, rounded up, clamped to [0, INT_MAX]; at
 * most one abort slice while an abort flag is watched. */
static int ms_until(uint64_t deadline_ns)
{
    const int ms = gs__ms_until(deadline_ns, gs__now_ns());

    return ((tl_abort != NULL) && (ms > SOCK_ABORT_SLICE_MS)) ? SOCK_ABORT_SLICE_MS : ms;
}

/* Best-effort text of a socket's peer address, for messages. */
static void peer_text(int fd, char *buf, size_t len)
{
    gs__sockaddr_t addr;

    addr.len = sizeof(addr.ss);
    if ((getpeername(fd, (struct sockaddr *)&addr.ss, &addr.len) != 0) ||
        (gs__sock_format(&addr, buf, len) != GS_OK)) {
        snprintf(buf, len, "fd %d", fd);
    }
}

gs_status_t gs__sock_resolve(const char *host, int port, const char *family, gs__sockaddr_t *out)
{
    struct addrinfo hints;
    struct addrinfo *res = NULL;
    char service[16];
    char bare[GS_SOCK_ADDR_MAX];
    size_t hlen;
    int af;
    int ret;

    if ((host == NULL) || (host[0] == '\0') || (out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "socket: empty host name");
    }
    if ((port < 0) || (port > 65535)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "socket: port %d of host %s is out of range", port,
                             host);
    }
    if (family_of(family, &af) != 0) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "socket: address family \"%s\" is not any, ipv4 or ipv6", family);
    }
    /* Accept "[v6]" as a host too. */
    hlen = strlen(host);
    if ((host[0] == '[') && (hlen >= 2) && (host[hlen - 1] == ']') && (hlen - 2 < sizeof(bare))) {
        memcpy(bare, host + 1, hlen - 2);
        bare[hlen - 2] = '\0';
        host = bare;
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = af;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    snprintf(service, sizeof(service), "%d", port);
    ret = getaddrinfo(host, service, &hints, &res);
    if ((ret != 0) || (res == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "socket: cannot resolve %s (family %s): %s", host,
                             (family != NULL) ? family : "any", gai_strerror(ret));
    }
    if (res->ai_addrlen > sizeof(out->ss)) {
        freeaddrinfo(res);
        return gs__error_set(GS_ERR_INVALID_ARG, "socket: address of %s is too long", host);
    }
    memset(out, 0, sizeof(*out));
    memcpy(&out->ss, res->ai_addr, res->ai_addrlen);
    out->len = (socklen_t)res->ai_addrlen;
    freeaddrinfo(res);
    return GS_OK;
}

gs_status_t gs__sock_parse(const char *text, const char *family, gs__sockaddr_t *out)
{
    char host[GS_SOCK_ADDR_MAX];
    const char *colon;
    const char *port_text;
    char *end = NULL;
    size_t hlen;
    long port;

    if ((text == NULL) || (out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "socket: NULL address text");
    }
    if (text[0] == '[') {
        const char *close = strchr(text, ']');

        if ((close == NULL) || (close[1] != ':')) {
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "socket: address \"%s\" is not \"[v6addr]:port\"", text);
        }
        hlen = (size_t)(close - text - 1);
        colon = close + 1;
        text++;
    } else {
        colon = strrchr(text, ':');
        if ((colon == NULL) || (memchr(text, ':', (size_t)(colon - text)) != NULL)) {
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "socket: address \"%s\" is not \"host:port\" or \"[v6]:port\"",
                                 text);
        }
        hlen = (size_t)(colon - text);
    }
    if ((hlen == 0) || (hlen >= sizeof(host))) {
        return gs__error_set(GS_ERR_INVALID_ARG, "socket: bad host part in address \"%s\"", text);
    }
    memcpy(host, text, hlen);
    host[hlen] = '\0';
    port_text = colon + 1;
    errno = 0;
    port = strtol(port_text, &end, 10);
    if ((port_text[0] < '0') || (port_text[0] > '9') || (end == NULL) || (*end != '\0') ||
        (errno != 0) || (port < 0) || (port > 65535)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "socket: bad port \"%s\" in address of %s",
                             port_text, host);
    }
    return gs__sock_resolve(host, (int)port, family, out);
}

gs_status_t gs__sock_format(const gs__sockaddr_t *addr, char *buf, size_t len)
{
    char host[NI_MAXHOST];
    char serv[NI_MAXSERV];
    int ret;
    int n;

    if ((addr == NULL) || (buf == NULL) || (len == 0)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "socket: NULL address or buffer to format");
    }
    ret = getnameinfo((const struct sockaddr *)&addr->ss, addr->len, host, sizeof(host), serv,
                      sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV);
    if (ret != 0) {
        return gs__error_set(GS_ERR_INVALID_ARG, "socket: cannot format address: %s",
                             gai_strerror(ret));
    }
    if (addr->ss.ss_family == AF_INET6) {
        n = snprintf(buf, len, "[%s]:%s", host, serv);
    } else {
        n = snprintf(buf, len, "%s:%s", host, serv);
    }
    if ((n < 0) || ((size_t)n >= len)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "socket: address %s needs %d bytes, buffer has %zu", host, n + 1, len);
    }
    return GS_OK;
}

static bool is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;

        return (ntohl(sin->sin_addr.s_addr) >> 24) == 127;
    }
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;

        return IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr) != 0;
    }
    return false;
}

static void set_port(gs__sockaddr_t *addr, int port)
{
    if (addr->ss.ss_family == AF_INET) {
        ((struct sockaddr_in *)&addr->ss)->sin_port = htons((uint16_t)port);
    } else if (addr->ss.ss_family == AF_INET6) {
        ((struct sockaddr_in6 *)&addr->ss)->sin6_port = htons((uint16_t)port);
    }
}

static void copy_ifaddr(const struct sockaddr *sa, gs__sockaddr_t *out)
{
    memset(out, 0, sizeof(*out));
    if (sa->sa_family == AF_INET) {
        memcpy(&out->ss, sa, sizeof(struct sockaddr_in));
        out->len = sizeof(struct sockaddr_in);
    } else {
        memcpy(&out->ss, sa, sizeof(struct sockaddr_in6));
        out->len = sizeof(struct sockaddr_in6);
    }
    set_port(out, 0);
}

/* The names of the interfaces with an address of family @p af (AF_UNSPEC:
 * IPv4 or IPv6), each once, comma-separated: "lo, eth0" or "none". */
static void list_ifaddrs(const struct ifaddrs *ifs, int af, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (const struct ifaddrs *it = ifs; (it != NULL) && (used + 1 < len); it = it->ifa_next) {
        const char *seen = buf;
        const size_t nlen = strlen(it->ifa_name);
        int dup = 0;
        int fam;
        int ret;

        if (it->ifa_addr == NULL) {
            continue;
        }
        fam = it->ifa_addr->sa_family;
        if (((fam != AF_INET) && (fam != AF_INET6)) || ((af != AF_UNSPEC) && (fam != af))) {
            continue;
        }
        while ((seen = strstr(seen, it->ifa_name)) != NULL) {
            if (((seen == buf) || (seen[-1] == ' ')) &&
                ((seen[nlen] == ',') || (seen[nlen] == '\0'))) {
                dup = 1;
                break;
            }
            seen += nlen;
        }
        if (dup) {
            continue;
        }
        ret = snprintf(buf + used, len - used, "%s%s", (used > 0) ? ", " : "", it->ifa_name);
        if ((ret < 0) || ((size_t)ret >= len - used)) {
            break;
        }
        used += (size_t)ret;
    }
    if (buf[0] == '\0') {
        snprintf(buf, len, "none");
    }
}

static bool is_linklocal6(const struct sockaddr *sa)
{
    return (sa->sa_family == AF_INET6) &&
           IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/*
 * The best address of family @p af among the interfaces: those of the
 * interface @p name, or (name NULL) of any interface that is up and not
 * loopback. IPv4 is preferred over IPv6 for AF_UNSPEC, and a link-local IPv6
 * address is taken only when there is nothing else. NULL when none.
 */
static const struct ifaddrs *best_ifaddr(const struct ifaddrs *ifs, const char *name, int af)
{
    const struct ifaddrs *best = NULL;

    for (const struct ifaddrs *it = ifs; it != NULL; it = it->ifa_next) {
        int fam;

        if (it->ifa_addr == NULL) {
            continue;
        }
        fam = it->ifa_addr->sa_family;
        if (((fam != AF_INET) && (fam != AF_INET6)) || ((af != AF_UNSPEC) && (fam != af))) {
            continue;
        }
        if (name != NULL) {
            if (strcmp(it->ifa_name, name) != 0) {
                continue;
            }
        } else if (((it->ifa_flags & IFF_UP) == 0) || ((it->ifa_flags & IFF_LOOPBACK) != 0)) {
            continue;
        }
        if (is_linklocal6(it->ifa_addr) && (best != NULL)) {
            continue;
        }
        if ((best == NULL) || ((best->ifa_addr->sa_family == AF_INET6) && (fam == AF_INET)) ||
            is_linklocal6(best->ifa_addr)) {
            best = it;
        }
    }
    return best;
}

/* The first non-loopback interface that is up (no GS_SOCKET_IFNAME, no route
 * hint); GS_ERR_NO_RESOURCE when there is none (the caller takes loopback). */
static gs_status_t pick_from_ifaddrs(int af, gs__sockaddr_t *out)
{
    struct ifaddrs *ifs = NULL;
    const struct ifaddrs *best;

    if (getifaddrs(&ifs) != 0) {
        return gs__error_set(GS_ERR_SYSTEM, "socket: getifaddrs failed: %s", strerror(errno));
    }
    best = best_ifaddr(ifs, NULL, af);
    if (best != NULL) {
        copy_ifaddr(best->ifa_addr, out);
        freeifaddrs(ifs);
        return GS_OK;
    }
    freeifaddrs(ifs);
    return GS_ERR_NO_RESOURCE;
}

/* A GS_SOCKET_IFNAME spec, parsed (gs__sock_ifspec_check has the syntax). */
typedef struct ifspec {
    bool exclude; /* a leading '^' */
    int n;
    struct {
        char name[IF_NAMESIZE];
        bool exact; /* '=' */
    } e[GS_SOCK_IFSPEC_MAX];
} ifspec_t;

static gs_status_t ifspec_parse(const char *spec, ifspec_t *out, char *why, size_t whylen)
{
    const char *p = spec;

    memset(out, 0, sizeof(*out));
    if ((spec == NULL) || (spec[0] == '\0')) {
        return gs__error_explain(GS_ERR_INVALID_ARG, why, whylen, "is empty");
    }
    for (const char *c = spec; *c != '\0'; c++) {
        if ((isspace((unsigned char)*c) != 0) || (iscntrl((unsigned char)*c) != 0)) {
            return gs__error_explain(GS_ERR_INVALID_ARG, why, whylen,
                                     "has a space or control character at offset %d",
                                     (int)(c - spec));
        }
        if ((*c == '^') && (c != spec)) {
            return gs__error_explain(GS_ERR_INVALID_ARG, why, whylen,
                                     "has a '^' that is not its first character (a leading '^' "
                                     "makes the whole list exclusions)");
        }
    }
    if (strcmp(spec, "^") == 0) {
        return gs__error_explain(GS_ERR_INVALID_ARG, why, whylen, "is '^' with nothing to exclude");
    }
    if (*p == '^') {
        out->exclude = true;
        p++;
    }
    for (;;) {
        const char *comma = strchr(p, ',');
        const size_t len = (comma != NULL) ? (size_t)(comma - p) : strlen(p);
        const bool exact = (len > 0) && (p[0] == '=');
        const size_t nlen = len - (exact ? 1U : 0U);

        if (len == 0) {
            return gs__error_explain(GS_ERR_INVALID_ARG, why, whylen, "has an empty entry");
        }
        if (nlen == 0) {
            return gs__error_explain(GS_ERR_INVALID_ARG, why, whylen,
                                     "has an '=' with no interface name after it");
        }
        if (nlen >= IF_NAMESIZE) {
            return gs__error_explain(GS_ERR_INVALID_ARG, why, whylen,
                                     "has the entry \"%.*s\", longer than an interface name "
                                     "(at most %d characters)",
                                     (int)len, p, IF_NAMESIZE - 1);
        }
        if (out->n == GS_SOCK_IFSPEC_MAX) {
            return gs__error_explain(GS_ERR_INVALID_ARG, why, whylen, "has more than %d entries",
                                     GS_SOCK_IFSPEC_MAX);
        }
        memcpy(out->e[out->n].name, p + (exact ? 1 : 0), nlen);
        out->e[out->n].name[nlen] = '\0';
        out->e[out->n].exact = exact;
        out->n++;
        if (comma == NULL) {
            return GS_OK;
        }
        p = comma + 1;
    }
}

gs_status_t gs__sock_ifspec_check(const char *spec, char *why, size_t whylen)
{
    ifspec_t parsed;

    return ifspec_parse(spec, &parsed, why, whylen);
}

static bool ifspec_match(const ifspec_t *s, int i, const char *name)
{
    if (s->e[i].exact) {
        return strcmp(name, s->e[i].name) == 0;
    }
    return strncmp(name, s->e[i].name, strlen(s->e[i].name)) == 0;
}

/* What @p s selects, in words: "interfaces named eth*, or exactly ib0". */
static void ifspec_meaning(const ifspec_t *s, char *buf, size_t len)
{
    size_t used = 0;
    int ret;

    ret = snprintf(buf, len, "%s",
                   s->exclude ? "every interface but loopback and those named "
                              : "the interfaces named ");
    for (int i = 0; (i < s->n) && (ret >= 0) && ((size_t)ret < len - used); i++) {
        used += (size_t)ret;
        ret = snprintf(buf + used, len - used, "%s%s%s%s", (i == 0) ? "" : ", ",
                       s->e[i].exact ? "exactly " : "", s->e[i].name, s->e[i].exact ? "" : "*");
    }
}

/* Whether @p it is the first entry of its interface in the list @p ifs. */
static bool first_of_name(const struct ifaddrs *ifs, const struct ifaddrs *it)
{
    for (const struct ifaddrs *o = ifs; o != it; o = o->ifa_next) {
        if (strcmp(o->ifa_name, it->ifa_name) == 0) {
            return false;
        }
    }
    return true;
}

static int prefix_of(const struct sockaddr *mask, int fam)
{
    const unsigned char *b;
    const size_t nb = (fam == AF_INET) ? 4 : 16;
    int bits = 0;

    if (mask == NULL) {
        return (int)nb * 8;
    }
    b = (fam == AF_INET) ? (const unsigned char *)&((const struct sockaddr_in *)mask)->sin_addr
                         : (const unsigned char *)&((const struct sockaddr_in6 *)mask)->sin6_addr;
    for (size_t i = 0; i < nb; i++) {
        for (int bit = 7; bit >= 0; bit--) {
            if ((b[i] & (1U << bit)) == 0) {
                return bits;
            }
            bits++;
        }
    }
    return bits;
}

/*
 * The address interface @p name gives (best_ifaddr), or NULL when it is not
 * selectable: down, no address of @p af, loopback where @p no_loopback, or
 * only a link-local IPv6 address where not @p named exactly (such an address
 * is in fe80::/64 on every link: no subnet to pair by, no address to publish).
 */
static const struct ifaddrs *usable_ifaddr(const struct ifaddrs *ifs, const char *name, int af,
                                           bool no_loopback, bool named)
{
    const struct ifaddrs *best = best_ifaddr(ifs, name, af);

    if ((best == NULL) || ((best->ifa_flags & IFF_UP) == 0) ||
        (no_loopback && ((best->ifa_flags & IFF_LOOPBACK) != 0)) ||
        (!named && is_linklocal6(best->ifa_addr))) {
        return NULL;
    }
    return best;
}

/* Into out[*n] while *n < max, else counted in *extra. */
static void take_iface(const struct ifaddrs *best, gs__sock_iface_t *out, int max, int *n,
                       int *extra)
{
    if (*n >= max) {
        (*extra)++;
        return;
    }
    copy_ifaddr(best->ifa_addr, &out[*n].addr);
    out[*n].prefix = prefix_of(best->ifa_netmask, best->ifa_addr->sa_family);
    snprintf(out[*n].ifname, sizeof(out[*n].ifname), "%s", best->ifa_name);
    (*n)++;
}

gs_status_t gs__sock_pick_ifaces(const char *spec, const char *family, gs__sock_iface_t *out,
                                 int max, int *n_out, int *extra_out)
{
    struct ifaddrs *ifs = NULL;
    const struct ifaddrs *best;
    ifspec_t s;
    char why[160];
    int af;
    int n = 0;
    int extra = 0;

    if ((n_out == NULL) || (max < 0) || ((out == NULL) && (max > 0))) {
        return gs__error_set(GS_ERR_INVALID_ARG, "socket: bad arguments to pick interfaces");
    }
    *n_out = 0;
    if (extra_out != NULL) {
        *extra_out = 0;
    }
    if (family_of(family, &af) != 0) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "socket: address family \"%s\" is not any, ipv4 or ipv6", family);
    }
    if (ifspec_parse(spec, &s, why, sizeof(why)) != GS_OK) {
        return gs__error_set(GS_ERR_INVALID_ARG, "socket: GS_SOCKET_IFNAME \"%s\" %s; it takes %s",
                             (spec != NULL) ? spec : "(null)", why, GS_SOCK_IFSPEC_SYNTAX);
    }
    if (getifaddrs(&ifs) != 0) {
        return gs__error_set(GS_ERR_SYSTEM, "socket: getifaddrs failed: %s", strerror(errno));
    }
    if (s.exclude) {
        for (const struct ifaddrs *it = ifs; it != NULL; it = it->ifa_next) {
            bool excluded = false;

            if (!first_of_name(ifs, it)) {
                continue;
            }
            for (int i = 0; (i < s.n) && !excluded; i++) {
                excluded = ifspec_match(&s, i, it->ifa_name);
            }
            best = excluded ? NULL : usable_ifaddr(ifs, it->ifa_name, af, true, false);
            if (best != NULL) {
                take_iface(best, out, max, &n, &extra);
            }
        }
    } else {
        /* Entry by entry; within a prefix entry the interface of exactly that name first. */
        for (int i = 0; i < s.n; i++) {
            for (int pass = 0; pass < (s.e[i].exact ? 1 : 2); pass++) {
                for (const struct ifaddrs *it = ifs; it != NULL; it = it->ifa_next) {
                    const char *name = it->ifa_name;
                    bool earlier = false;

                    if (!first_of_name(ifs, it) || !ifspec_match(&s, i, name) ||
                        ((strcmp(name, s.e[i].name) == 0) != (pass == 0))) {
                        continue;
                    }
                    for (int j = 0; (j < i) && !earlier; j++) {
                        earlier = ifspec_match(&s, j, name) &&
                                  (usable_ifaddr(ifs, name, af, false,
                                                 strcmp(name, s.e[j].name) == 0) != NULL);
                    }
                    best = earlier ? NULL : usable_ifaddr(ifs, name, af, false, pass == 0);
                    if (best != NULL) {
                        take_iface(best, out, max, &n, &extra);
                    }
                }
            }
        }
    }
    if (n + extra == 0) {
        char names[256];
        char meaning[160];

        list_ifaddrs(ifs, af, names, sizeof(names));
        freeifaddrs(ifs);
        ifspec_meaning(&s, meaning, sizeof(meaning));
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "socket: GS_SOCKET_IFNAME=%s selects no interface that is up and has "
                             "an %s address (it means %s; an interface with only a link-local "
                             "IPv6 address counts where named exactly); interfaces here: %s "
                             "(GS_SOCKET_IFNAME "
                             "takes %s; or leave it empty to pick the one that routes to the "
                             "master)",
                             spec, (af == AF_INET) ? "IPv4" : ((af == AF_INET6) ? "IPv6" : "IP"),
                             meaning, names, GS_SOCK_IFSPEC_SYNTAX);
    }
    freeifaddrs(ifs);
    *n_out = n;
    if (extra_out != NULL) {
        *extra_out = extra;
    }
    return GS_OK;
}

static void loopback_of(int af, gs__sockaddr_t *out)
{
    memset(out, 0, sizeof(*out));
    if (af == AF_INET6) {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&out->ss;

        sin6->sin6_family = AF_INET6;
        sin6->sin6_addr = in6addr_loopback;
        out->len = sizeof(*sin6);
    } else {
        struct sockaddr_in *sin = (struct sockaddr_in *)&out->ss;

        sin->sin_family = AF_INET;
        sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        out->len = sizeof(*sin);
    }
}

gs_status_t gs__sock_pick_local(const char *ifname, const char *family,
                                const gs__sockaddr_t *route_to, gs__sockaddr_t *out)
{
    gs__sockaddr_t dst;
    gs__sockaddr_t local;
    gs_status_t status;
    int af;
    int fd;

    if (out == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "socket: NULL output address");
    }
    if (family_of(family, &af) != 0) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "socket: address family \"%s\" is not any, ipv4 or ipv6", family);
    }
    if ((ifname != NULL) && (ifname[0] != '\0')) {
        gs__sock_iface_t first;
        int n = 0;

        status = gs__sock_pick_ifaces(ifname, family, &first, 1, &n, NULL);
        if (status == GS_OK) {
            *out = first.addr;
        }
        return status;
    }
    if (route_to == NULL) {
        status = pick_from_ifaddrs(af, out);
        if (status == GS_ERR_NO_RESOURCE) {
            loopback_of(af, out);
            return GS_OK;
        }
        return status;
    }
    if (is_loopback(&route_to->ss)) {
        loopback_of(route_to->ss.ss_family, out);
        return GS_OK;
    }
    /* A UDP connect makes the kernel choose the source address; no packet is sent. */
    dst = *route_to;
    if (((dst.ss.ss_family == AF_INET) && (((struct sockaddr_in *)&dst.ss)->sin_port == 0)) ||
        ((dst.ss.ss_family == AF_INET6) && (((struct sockaddr_in6 *)&dst.ss)->sin6_port == 0))) {
        set_port(&dst, 9);
    }
    fd = socket(dst.ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return gs__error_set(GS_ERR_SYSTEM, "socket: socket() for a route probe failed: %s",
                             strerror(errno));
    }
    if (connect(fd, (const struct sockaddr *)&dst.ss, dst.len) != 0) {
        char text[GS_SOCK_ADDR_MAX];
        int err = errno;

        close(fd);
        if (gs__sock_format(route_to, text, sizeof(text)) != GS_OK) {
            snprintf(text, sizeof(text), "(unprintable)");
        }
        return gs__error_set(GS_ERR_SYSTEM, "socket: no route to %s: %s", text, strerror(err));
    }
    memset(&local, 0, sizeof(local));
    local.len = sizeof(local.ss);
    if (getsockname(fd, (struct sockaddr *)&local.ss, &local.len) != 0) {
        int err = errno;

        close(fd);
        return gs__error_set(GS_ERR_SYSTEM, "socket: getsockname on a route probe failed: %s",
                             strerror(err));
    }
    close(fd);
    set_port(&local, 0);
    *out = local;
    return GS_OK;
}

gs_status_t gs__sock_tune(int fd)
{
    int one = 1;
    int flags;

    /* NODELAY fails on non-TCP sockets (socketpair in tests); that is harmless. */
    if ((setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) &&
        (errno != EOPNOTSUPP) && (errno != ENOPROTOOPT)) {
        return gs__error_set(GS_ERR_SYSTEM, "socket: setsockopt(TCP_NODELAY) on fd %d failed: %s",
                             fd, strerror(errno));
    }
    flags = fcntl(fd, F_GETFL);
    if ((flags < 0) || (fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)) {
        return gs__error_set(GS_ERR_SYSTEM, "socket: fcntl(O_NONBLOCK) on fd %d failed: %s", fd,
                             strerror(errno));
    }
    flags = fcntl(fd, F_GETFD);
    if ((flags < 0) || (fcntl(fd, F_SETFD, flags | FD_CLOEXEC) != 0)) {
        return gs__error_set(GS_ERR_SYSTEM, "socket: fcntl(FD_CLOEXEC) on fd %d failed: %s", fd,
                             strerror(errno));
    }
    return GS_OK;
}

gs_status_t gs__sock_listen(const gs__sockaddr_t *addr, int backlog, int *fd_out,
                            gs__sockaddr_t *bound_out)
{
    char text[GS_SOCK_ADDR_MAX];
    gs__sockaddr_t bound;
    int one = 1;
    int fd;
    int err;

    if ((addr == NULL) || (fd_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "socket: NULL listen address");
    }
    if (gs__sock_format(addr, text, sizeof(text)) != GS_OK) {
        return GS_ERR_INVALID_ARG;
    }
    fd = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return gs__error_set(GS_ERR_SYSTEM, "socket: socket() to listen on %s failed: %s", text,
                             strerror(errno));
    }
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
        err = errno;
        close(fd);
        return gs__error_set(GS_ERR_SYSTEM, "socket: setsockopt(SO_REUSEADDR) on %s failed: %s",
                             text, strerror(err));
    }
    if (bind(fd, (const struct sockaddr *)&addr->ss, addr->len) != 0) {
        err = errno;
        close(fd);
        return gs__error_set(GS_ERR_SYSTEM, "socket: bind to %s failed: %s", text, strerror(err));
    }
    if (listen(fd, (backlog > 0) ? backlog : SOMAXCONN) != 0) {
        err = errno;
        close(fd);
        return gs__error_set(GS_ERR_SYSTEM, "socket: listen on %s failed: %s", text, strerror(err));
    }
    memset(&bound, 0, sizeof(bound));
    bound.len = sizeof(bound.ss);
    if (getsockname(fd, (struct sockaddr *)&bound.ss, &bound.len) != 0) {
        err = errno;
        close(fd);
        return gs__error_set(GS_ERR_SYSTEM, "socket: getsockname on %s failed: %s", text,
                             strerror(err));
    }
    if (bound_out != NULL) {
        *bound_out = bound;
    }
    *fd_out = fd;
    return GS_OK;
}

/* Errors after which connecting again later may succeed (peer not listening yet). */
static bool connect_retryable(int err)
{
    return (err == ECONNREFUSED) || (err == ETIMEDOUT) || (err == ECONNRESET) || (err == EAGAIN) ||
           (err == ENETUNREACH) || (err == EHOSTUNREACH);
}

gs_status_t gs__sock_connect(const gs__sockaddr_t *addr, uint64_t deadline_ns, int *fd_out)
{
    char text[GS_SOCK_ADDR_MAX];
    int backoff_ms = CONNECT_RETRY_MIN_MS;
    int last_err = ETIMEDOUT;

    if ((addr == NULL) || (fd_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "socket: NULL connect address");
    }
    if (gs__sock_format(addr, text, sizeof(text)) != GS_OK) {
        return GS_ERR_INVALID_ARG;
    }
    for (;;) {
        struct pollfd pfd;
        socklen_t elen = sizeof(int);
        int err = 0;
        int ret;
        int fd = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

        if (fd < 0) {
            return gs__error_set(GS_ERR_SYSTEM, "socket: socket() to connect to %s failed: %s",
                                 text, strerror(errno));
        }
        ret = connect(fd, (const struct sockaddr *)&addr->ss, addr->len);
        if ((ret != 0) && (errno != EINPROGRESS) && (errno != EINTR)) {
            err = errno;
        } else if (ret != 0) {
            pfd.fd = fd;
            pfd.events = POLLOUT;
            do {
                pfd.revents = 0;
                ret = poll(&pfd, 1, ms_until(deadline_ns));
                if (sock_aborted()) {
                    close(fd);
                    return gs__error_set(GS_ERR_ABORTED, "socket: connect to %s aborted", text);
                }
            } while (((ret < 0) && (errno == EINTR)) ||
                     ((ret == 0) && (gs__now_ns() < deadline_ns)));
            if (ret < 0) {
                err = errno;
                close(fd);
                return gs__error_set(GS_ERR_SYSTEM, "socket: poll while connecting to %s: %s", text,
                                     strerror(err));
            }
            if (ret == 0) {
                err = ETIMEDOUT;
            } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0) {
                err = errno;
            }
        }
        if (err == 0) {
            gs_status_t status = gs__sock_tune(fd);

            if (status != GS_OK) {
                close(fd);
                return status;
            }
            *fd_out = fd;
            return GS_OK;
        }
        close(fd);
        if (!connect_retryable(err)) {
            return gs__error_set(GS_ERR_SYSTEM, "socket: connect to %s failed: %s", text,
                                 strerror(err));
        }
        last_err = err;
        if (sock_aborted()) {
            return gs__error_set(GS_ERR_ABORTED, "socket: connect to %s aborted", text);
        }
        if (gs__now_ns() >= deadline_ns) {
            break;
        }
        /* Wait a little before the next attempt, never past the deadline. */
        ret = ms_until(deadline_ns);
        poll(NULL, 0, (ret < backoff_ms) ? ret : backoff_ms);
        backoff_ms =
            (backoff_ms * 2 > CONNECT_RETRY_MAX_MS) ? CONNECT_RETRY_MAX_MS : backoff_ms * 2;
    }
    return gs__error_set(GS_ERR_TIMEOUT, "socket: connect to %s timed out (last error: %s)", text,
                         strerror(last_err));
}

gs_status_t gs__sock_accept(int listen_fd, uint64_t deadline_ns, int *fd_out)
{
    if (fd_out == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "socket: NULL accept output");
    }
    for (;;) {
        struct pollfd pfd = {.fd = listen_fd, .events = POLLIN, .revents = 0};
        int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        int ret;

        if (fd >= 0) {
            gs_status_t status = gs__sock_tune(fd);

            if (status != GS_OK) {
                close(fd);
                return status;
            }
            *fd_out = fd;
            return GS_OK;
        }
        if ((errno != EAGAIN) && (errno != EWOULDBLOCK) && (errno != EINTR) &&
            (errno != ECONNABORTED) && (errno != EPROTO)) {
            return gs__error_set(GS_ERR_SYSTEM, "socket: accept on fd %d failed: %s", listen_fd,
                                 strerror(errno));
        }
        if (sock_aborted()) {
            *fd_out = -1;
            return gs__error_set(GS_ERR_ABORTED, "socket: accept aborted (gs_config_t.abort_flag)");
        }
        if (gs__now_ns() >= deadline_ns) {
            *fd_out = -1;
            return GS_OK;
        }
        ret = poll(&pfd, 1, ms_until(deadline_ns));
        if ((ret < 0) && (errno != EINTR)) {
            return gs__error_set(GS_ERR_SYSTEM, "socket: poll on listening fd %d failed: %s",
                                 listen_fd, strerror(errno));
        }
    }
}

/* Wait until fd is readable/writable or the deadline passes. */
static gs_status_t wait_fd(int fd, short events, uint64_t deadline_ns, const char *what,
                           size_t done, size_t len)
{
    struct pollfd pfd = {.fd = fd, .events = events, .revents = 0};
    char text[GS_SOCK_ADDR_MAX];
    int ret;

    if (sock_aborted()) {
        peer_text(fd, text, sizeof(text));
        return gs__error_set(GS_ERR_ABORTED, "socket: %s %s aborted after %zu of %zu bytes", what,
                             text, done, len);
    }
    if (gs__now_ns() >= deadline_ns) {
        peer_text(fd, text, sizeof(text));
        return gs__error_set(GS_ERR_TIMEOUT, "socket: %s %s timed out after %zu of %zu bytes", what,
                             text, done, len);
    }
    ret = poll(&pfd, 1, ms_until(deadline_ns));
    if ((ret < 0) && (errno != EINTR)) {
        peer_text(fd, text, sizeof(text));
        return gs__error_set(GS_ERR_SYSTEM, "socket: poll while %s %s failed: %s", what, text,
                             strerror(errno));
    }
    return GS_OK;
}

static gs_status_t io_error(int fd, int err, const char *what)
{
    char text[GS_SOCK_ADDR_MAX];

    peer_text(fd, text, sizeof(text));
    if ((err == ECONNRESET) || (err == EPIPE) || (err == ENOTCONN) || (err == ETIMEDOUT)) {
        return gs__error_set(GS_ERR_PEER_FAILED, "socket: %s %s failed: connection reset (%s)",
                             what, text, strerror(err));
    }
    return gs__error_set(GS_ERR_SYSTEM, "socket: %s %s failed: %s", what, text, strerror(err));
}

gs_status_t gs__sock_read_full(int fd, void *buf, size_t len, uint64_t deadline_ns)
{
    uint8_t *p = (uint8_t *)buf;
    size_t done = 0;

    while (done < len) {
        ssize_t n = recv(fd, p + done, len - done, MSG_DONTWAIT);

        if (n > 0) {
            done += (size_t)n;
        } else if (n == 0) {
            char text[GS_SOCK_ADDR_MAX];

            peer_text(fd, text, sizeof(text));
            return gs__error_set(GS_ERR_PEER_FAILED,
                                 "socket: %s closed the connection after %zu of %zu bytes", text,
                                 done, len);
        } else if ((errno == EAGAIN) || (errno == EWOULDBLOCK)) {
            gs_status_t status = wait_fd(fd, POLLIN, deadline_ns, "reading from", done, len);

            if (status != GS_OK) {
                return status;
            }
        } else if (errno != EINTR) {
            return io_error(fd, errno, "reading from");
        }
    }
    return GS_OK;
}

gs_status_t gs__sock_write_full(int fd, const void *buf, size_t len, uint64_t deadline_ns)
{
    const uint8_t *p = (const uint8_t *)buf;
    size_t done = 0;

    while (done < len) {
        ssize_t n = send(fd, p + done, len - done, MSG_DONTWAIT | MSG_NOSIGNAL);

        if (n >= 0) {
            done += (size_t)n;
        } else if ((errno == EAGAIN) || (errno == EWOULDBLOCK)) {
            gs_status_t status = wait_fd(fd, POLLOUT, deadline_ns, "writing to", done, len);

            if (status != GS_OK) {
                return status;
            }
        } else if (errno != EINTR) {
            return io_error(fd, errno, "writing to");
        }
    }
    return GS_OK;
}

int gs__sock_same_ip(const gs__sockaddr_t *a, const gs__sockaddr_t *b)
{
    if (a->ss.ss_family != b->ss.ss_family) {
        return 0;
    }
    if (a->ss.ss_family == AF_INET6) {
        return memcmp(&((const struct sockaddr_in6 *)&a->ss)->sin6_addr,
                      &((const struct sockaddr_in6 *)&b->ss)->sin6_addr,
                      sizeof(struct in6_addr)) == 0;
    }
    return ((const struct sockaddr_in *)&a->ss)->sin_addr.s_addr ==
           ((const struct sockaddr_in *)&b->ss)->sin_addr.s_addr;
}
