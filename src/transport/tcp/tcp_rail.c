/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rails (contracts in tcp_rail.h): the local interfaces GS_SOCKET_IFNAME
 * selects (core/socket.c does the selection), the address text a rank
 * publishes for them, its strict parser, and the subnet pairing of two
 * ranks' rails. No logging, and no last error set except by
 * gs__tcp_rails_local (core/socket.c's messages).
 */
#include "transport/tcp/tcp_rail.h"

#include "core/error.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gs_status_t gs__tcp_rails_local(const char *spec, const char *family, gs__tcp_rail_t *out, int max,
                                int *n_out, int *extra_out)
{
    gs__sock_iface_t stack[GS_TCP_MAX_RAILS];
    gs__sock_iface_t *heap = NULL; /* when max is above GS_TCP_MAX_RAILS */
    gs__sock_iface_t *ifs = stack;
    gs_status_t status;
    int n = 0;

    if ((spec == NULL) || (spec[0] == '\0') || (n_out == NULL) || (max < 0) ||
        ((out == NULL) && (max > 0))) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "tcp: rails need a GS_SOCKET_IFNAME value and an output array");
    }
    if (max > GS_TCP_MAX_RAILS) {
        heap = calloc((size_t)max, sizeof(*heap));
        if (heap == NULL) {
            return gs__error_set(GS_ERR_NO_MEMORY, "tcp: no memory for %d rails", max);
        }
        ifs = heap;
    }
    status = gs__sock_pick_ifaces(spec, family, ifs, max, &n, extra_out);
    for (int i = 0; (status == GS_OK) && (out != NULL) && (i < n); i++) {
        memset(&out[i], 0, sizeof(out[i]));
        out[i].addr = ifs[i].addr;
        out[i].prefix = ifs[i].prefix;
        memcpy(out[i].ifname, ifs[i].ifname, sizeof(out[i].ifname));
    }
    *n_out = (status == GS_OK) ? n : 0;
    free(heap);
    return status;
}

static int family_bits(int fam)
{
    return (fam == AF_INET) ? 32 : ((fam == AF_INET6) ? 128 : -1);
}

/* "ip:port" / "[ip6]:port" of @p addr with @p port, as gs__sock_format
 * writes it, but setting no error. 0 or -1 (unprintable, or buf too small). */
static int addr_text(const gs__sockaddr_t *addr, int port, char *buf, size_t len)
{
    gs__sockaddr_t a = *addr;
    char host[NI_MAXHOST];
    int ret;

    if (a.ss.ss_family == AF_INET) {
        ((struct sockaddr_in *)&a.ss)->sin_port = htons((uint16_t)port);
    } else if (a.ss.ss_family == AF_INET6) {
        ((struct sockaddr_in6 *)&a.ss)->sin6_port = htons((uint16_t)port);
    } else {
        return -1;
    }
    if (getnameinfo((const struct sockaddr *)&a.ss, a.len, host, sizeof(host), NULL, 0,
                    NI_NUMERICHOST) != 0) {
        return -1;
    }
    ret = snprintf(buf, len, (a.ss.ss_family == AF_INET6) ? "[%s]:%d" : "%s:%d", host, port);
    return ((ret < 0) || ((size_t)ret >= len)) ? -1 : 0;
}

gs_status_t gs__tcp_rails_format(const gs__tcp_rail_t *rails, int n, int port, char *buf,
                                 size_t len)
{
    size_t used = 0;

    if ((rails == NULL) || (buf == NULL) || (len == 0) || (n < 1) || (n > GS_TCP_MAX_RAILS) ||
        (port < 0) || (port > 65535)) {
        return GS_ERR_INVALID_ARG;
    }
    buf[0] = '\0';
    if (n == 1) {
        return (addr_text(&rails[0].addr, port, buf, len) == 0) ? GS_OK : GS_ERR_INVALID_ARG;
    }
    for (int i = 0; i < n; i++) {
        char one[GS_SOCK_ADDR_MAX];
        const int bits = family_bits(rails[i].addr.ss.ss_family);
        int ret;

        if ((rails[i].prefix < 0) || (rails[i].prefix > bits) ||
            (addr_text(&rails[i].addr, port, one, sizeof(one)) != 0)) {
            buf[0] = '\0';
            return GS_ERR_INVALID_ARG;
        }
        ret = snprintf(buf + used, len - used, "%s%s/%d", (i > 0) ? "," : "", one, rails[i].prefix);
        if ((ret < 0) || ((size_t)ret >= len - used)) {
            buf[0] = '\0';
            return GS_ERR_INVALID_ARG;
        }
        used += (size_t)ret;
    }
    return GS_OK;
}

/* Decimal digits only, at most @p maxdig of them, value at most @p maxval. -1 when not. */
static long parse_uint(const char *p, size_t len, size_t maxdig, long maxval)
{
    long v = 0;

    if ((len == 0) || (len > maxdig)) {
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        if ((p[i] < '0') || (p[i] > '9')) {
            return -1;
        }
        v = v * 10 + (p[i] - '0');
    }
    return (v <= maxval) ? v : -1;
}

/* One entry "ip:port[/prefix]" or "[ip6]:port[/prefix]" of length @p len. */
static gs_status_t parse_entry(const char *e, size_t len, gs__tcp_rail_t *out, char *why,
                               size_t whylen)
{
    char host[INET6_ADDRSTRLEN + IF_NAMESIZE + 2];
    const char *end = e + len;
    const char *hp;
    const char *colon;
    const char *slash = memchr(e, '/', len);
    const char *port_end = (slash != NULL) ? slash : end;
    size_t hlen;
    long port;
    int fam;

    memset(out, 0, sizeof(*out));
    out->prefix = -1;
    if (e[0] == '[') {
        const char *close = memchr(e, ']', len);

        if ((close == NULL) || (close + 1 >= port_end) || (close[1] != ':')) {
            return gs__error_explain(GS_ERR_INVALID_ARG, why, whylen,
                                     "\"%.*s\" is not \"[ip6]:port\"", (int)len, e);
        }
        hp = e + 1;
        hlen = (size_t)(close - hp);
        colon = close + 1;
        fam = AF_INET6;
    } else {
        colon = memchr(e, ':', (size_t)(port_end - e));
        if ((colon == NULL) || (memchr(colon + 1, ':', (size_t)(port_end - colon - 1)) != NULL)) {
            return gs__error_explain(GS_ERR_INVALID_ARG, why, whylen,
                                     "\"%.*s\" is not \"ip:port\" or \"[ip6]:port\"", (int)len, e);
        }
        hp = e;
        hlen = (size_t)(colon - e);
        fam = AF_INET;
    }
    if ((hlen == 0) || (hlen >= sizeof(host))) {
        return gs__error_explain(GS_ERR_INVALID_ARG, why, whylen, "\"%.*s\" has no usable address",
                                 (int)len, e);
    }
    memcpy(host, hp, hlen);
    host[hlen] = '\0';
    port = parse_uint(colon + 1, (size_t)(port_end - colon - 1), 5, 65535);
    if (port < 0) {
        return gs__error_explain(GS_ERR_INVALID_ARG, why, whylen,
                                 "\"%.*s\" has no port 0..65535 after its address", (int)len, e);
    }
    if (fam == AF_INET) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&out->addr.ss;

        if (inet_pton(AF_INET, host, &sin->sin_addr) != 1) {
            return gs__error_explain(GS_ERR_INVALID_ARG, why, whylen,
                                     "\"%s\" is not a numeric IPv4 address (\"[ip6]\" for IPv6)",
                                     host);
        }
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t)port);
        out->addr.len = sizeof(*sin);
    } else {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&out->addr.ss;
        char *pct = strchr(host, '%');

        if (pct != NULL) {
            const long id = parse_uint(pct + 1, strlen(pct + 1), 10, 0xffffffffL);

            sin6->sin6_scope_id = (id >= 0) ? (uint32_t)id : if_nametoindex(pct + 1);
            if (sin6->sin6_scope_id == 0) {
                return gs__error_explain(GS_ERR_INVALID_ARG, why, whylen,
                                         "\"%s\" has a scope that is no interface here", host);
            }
            *pct = '\0';
        }
        if (inet_pton(AF_INET6, host, &sin6->sin6_addr) != 1) {
            return gs__error_explain(GS_ERR_INVALID_ARG, why, whylen,
                                     "\"%s\" is not a numeric IPv6 address", host);
        }
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((uint16_t)port);
        out->addr.len = sizeof(*sin6);
    }
    if (slash != NULL) {
        const long bits = parse_uint(slash + 1, (size_t)(end - slash - 1), 3, family_bits(fam));

        if (bits < 0) {
            return gs__error_explain(GS_ERR_INVALID_ARG, why, whylen,
                                     "\"%.*s\" has a prefix that is not 0..%d", (int)len, e,
                                     family_bits(fam));
        }
        out->prefix = (int)bits;
    }
    return GS_OK;
}

gs_status_t gs__tcp_rails_parse(const char *text, gs__tcp_rail_t *out, int *n_out, char *why,
                                size_t whylen)
{
    const char *p = text;
    int n = 0;

    if (n_out != NULL) {
        *n_out = 0;
    }
    if ((text == NULL) || (out == NULL) || (n_out == NULL)) {
        return gs__error_explain(GS_ERR_INVALID_ARG, why, whylen, "no address text");
    }
    for (;;) {
        const char *comma = strchr(p, ',');
        const size_t len = (comma != NULL) ? (size_t)(comma - p) : strlen(p);
        gs_status_t status;

        if (len == 0) {
            return gs__error_explain(GS_ERR_INVALID_ARG, why, whylen,
                                     "address text \"%.80s\" has an empty entry", text);
        }
        if (n == GS_TCP_MAX_RAILS) {
            return gs__error_explain(GS_ERR_INVALID_ARG, why, whylen,
                                     "address text \"%.80s\" has more than %d rails", text,
                                     GS_TCP_MAX_RAILS);
        }
        status = parse_entry(p, len, &out[n], why, whylen);
        if (status != GS_OK) {
            return status;
        }
        for (int j = 0; j < n; j++) {
            if (gs__sock_same_ip(&out[j].addr, &out[n].addr)) {
                return gs__error_explain(GS_ERR_INVALID_ARG, why, whylen,
                                         "address text \"%.80s\" has the address of rail %d "
                                         "twice",
                                         text, j);
            }
        }
        n++;
        if (comma == NULL) {
            break;
        }
        p = comma + 1;
    }
    for (int i = 0; (n > 1) && (i < n); i++) {
        if (out[i].prefix < 0) {
            return gs__error_explain(GS_ERR_INVALID_ARG, why, whylen,
                                     "address text \"%.80s\" lists %d rails but rail %d has no "
                                     "/prefix",
                                     text, n, i);
        }
    }
    *n_out = n;
    return GS_OK;
}

/* Whether @p a and @p b (one family) agree on their first @p bits bits. */
static bool same_subnet(const gs__sockaddr_t *a, const gs__sockaddr_t *b, int bits)
{
    const unsigned char *x;
    const unsigned char *y;
    int i;

    if (a->ss.ss_family == AF_INET) {
        x = (const unsigned char *)&((const struct sockaddr_in *)&a->ss)->sin_addr;
        y = (const unsigned char *)&((const struct sockaddr_in *)&b->ss)->sin_addr;
    } else {
        x = (const unsigned char *)&((const struct sockaddr_in6 *)&a->ss)->sin6_addr;
        y = (const unsigned char *)&((const struct sockaddr_in6 *)&b->ss)->sin6_addr;
    }
    for (i = 0; bits >= 8; i++, bits -= 8) {
        if (x[i] != y[i]) {
            return false;
        }
    }
    return (bits == 0) || (((x[i] ^ y[i]) & (0xffU << (8 - bits)) & 0xffU) == 0);
}

bool gs__tcp_rails_pair(const gs__tcp_rail_t *lo, int nlo, const gs__tcp_rail_t *hi, int nhi,
                        int *pair_lo, int *pair_hi, int *np)
{
    bool used[GS_TCP_MAX_RAILS] = {false};
    int k = 0;

    nlo = (nlo < GS_TCP_MAX_RAILS) ? nlo : GS_TCP_MAX_RAILS;
    nhi = (nhi < GS_TCP_MAX_RAILS) ? nhi : GS_TCP_MAX_RAILS;
    for (int i = 0; (lo != NULL) && (hi != NULL) && (i < nlo); i++) {
        const int fam = lo[i].addr.ss.ss_family;

        if ((lo[i].prefix < 0) || (lo[i].prefix > family_bits(fam))) {
            continue;
        }
        for (int j = 0; j < nhi; j++) {
            if (!used[j] && (hi[j].addr.ss.ss_family == fam) && (hi[j].prefix == lo[i].prefix) &&
                same_subnet(&lo[i].addr, &hi[j].addr, lo[i].prefix)) {
                used[j] = true;
                pair_lo[k] = i;
                pair_hi[k] = j;
                k++;
                break;
            }
        }
    }
    if (k == 0) {
        pair_lo[0] = 0;
        pair_hi[0] = 0;
        *np = 1;
        return false;
    }
    *np = k;
    return true;
}
