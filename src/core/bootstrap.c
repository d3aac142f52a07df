/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rendezvous on rank 0 (see bootstrap.h): a small poll()-driven server that
 * collects one hello per rank and answers with the address table, and the
 * client that every other rank runs. It serves only the initial exchange of
 * the world communicator; sub-communicators exchange addresses over their
 * parent's transport instead.
 */
#include "core/bootstrap.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/host.h"
#include "core/log.h"

/* Hellos that have not completed within this long are dropped, so a
 * connection that sends nothing cannot hold the rendezvous hostage. */
#define BOOT_CONN_IDLE_MS 5000
#define BOOT_MAX_PENDING 64

void gs__boot_hello_encode(const gs__boot_hello_t *h, uint8_t *out)
{
    memset(out, 0, GS_BOOT_HELLO_BYTES);
    gs__put_le32(out + 0, GS_BOOT_MAGIC_HELLO);
    gs__put_le32(out + 4, h->version);
    gs__put_le64(out + 8, h->job_hash);
    gs__put_le32(out + 16, h->rank);
    gs__put_le32(out + 20, h->world);
    gs__put_le64(out + 24, h->host_id);
    gs__put_le32(out + 32, h->addr_len);
    gs__put_le32(out + 36, h->flags);
    memcpy(out + 40, h->nonce, sizeof(h->nonce));
}

gs_status_t gs__boot_hello_decode(const uint8_t *in, size_t len, gs__boot_hello_t *out)
{
    if (len < GS_BOOT_HELLO_BYTES) {
        return gs__error_set(GS_ERR_PROTOCOL, "rendezvous hello is %zu bytes, expected %d", len,
                             GS_BOOT_HELLO_BYTES);
    }
    if (gs__get_le32(in) != GS_BOOT_MAGIC_HELLO) {
        return gs__error_set(GS_ERR_PROTOCOL, "rendezvous hello has a bad magic 0x%08x",
                             gs__get_le32(in));
    }
    out->version = gs__get_le32(in + 4);
    if (out->version != GS_BOOT_VERSION) {
        return gs__error_set(GS_ERR_VERSION_MISMATCH,
                             "rendezvous hello has protocol version %u, this library speaks %u",
                             out->version, GS_BOOT_VERSION);
    }
    out->job_hash = gs__get_le64(in + 8);
    out->rank = gs__get_le32(in + 16);
    out->world = gs__get_le32(in + 20);
    out->host_id = gs__get_le64(in + 24);
    out->addr_len = gs__get_le32(in + 32);
    out->flags = gs__get_le32(in + 36);
    memcpy(out->nonce, in + 40, sizeof(out->nonce));
    if ((out->flags & ~GS_BOOT_F_AUTH) != 0) {
        return gs__error_set(GS_ERR_PROTOCOL, "rendezvous hello has unknown flags 0x%x",
                             out->flags);
    }
    if ((out->addr_len == 0) || (out->addr_len >= GS_SOCK_ADDR_MAX)) {
        return gs__error_set(GS_ERR_PROTOCOL, "rendezvous hello has an address length of %u",
                             out->addr_len);
    }
    if ((out->world == 0) || (out->rank >= out->world)) {
        return gs__error_set(GS_ERR_PROTOCOL, "rendezvous hello has rank %u of world size %u",
                             out->rank, out->world);
    }
    if (out->host_id == 0) {
        return gs__error_set(GS_ERR_PROTOCOL, "rendezvous hello from rank %u has host id 0",
                             out->rank);
    }
    return GS_OK;
}

void gs__boot_auth_encode(const uint8_t nonce[16], const uint8_t mac[32], uint8_t *out)
{
    memset(out, 0, GS_BOOT_AUTH_BYTES);
    gs__put_le32(out, GS_BOOT_MAGIC_AUTH);
    memcpy(out + 8, nonce, 16);
    memcpy(out + 24, mac, 32);
}

gs_status_t gs__boot_auth_decode(const uint8_t *in, size_t len, uint8_t nonce[16], uint8_t mac[32])
{
    if ((len < GS_BOOT_AUTH_BYTES) || (gs__get_le32(in) != GS_BOOT_MAGIC_AUTH) ||
        (gs__get_le32(in + 4) != 0)) {
        return gs__error_set(GS_ERR_PROTOCOL, "rendezvous: malformed authentication record");
    }
    memcpy(nonce, in + 8, 16);
    memcpy(mac, in + 24, 32);
    return GS_OK;
}

void gs__boot_proof_encode(const uint8_t mac[32], uint8_t *out)
{
    memset(out, 0, GS_BOOT_PROOF_BYTES);
    gs__put_le32(out, GS_BOOT_MAGIC_PROOF);
    memcpy(out + 8, mac, 32);
}

gs_status_t gs__boot_proof_decode(const uint8_t *in, size_t len, uint8_t mac[32])
{
    if ((len < GS_BOOT_PROOF_BYTES) || (gs__get_le32(in) != GS_BOOT_MAGIC_PROOF) ||
        (gs__get_le32(in + 4) != 0)) {
        return gs__error_set(GS_ERR_PROTOCOL, "rendezvous: malformed authentication proof");
    }
    memcpy(mac, in + 8, 32);
    return GS_OK;
}

void gs__boot_entry_encode(uint32_t addr_len, uint64_t host_id, uint8_t *out)
{
    gs__put_le32(out + 0, addr_len);
    gs__put_le64(out + 4, host_id);
}

gs_status_t gs__boot_entry_decode(const uint8_t *in, size_t len, uint32_t *addr_len_out,
                                  uint64_t *host_id_out)
{
    uint32_t alen;
    uint64_t host;

    if (len < GS_BOOT_ENTRY_BYTES) {
        return gs__error_set(GS_ERR_PROTOCOL, "rendezvous table entry is %zu bytes, expected %d",
                             len, GS_BOOT_ENTRY_BYTES);
    }
    alen = gs__get_le32(in);
    host = gs__get_le64(in + 4);
    if ((alen == 0) || (alen >= GS_SOCK_ADDR_MAX) || (host == 0)) {
        return gs__error_set(GS_ERR_PROTOCOL,
                             "rendezvous table entry has address length %u and host id %llx", alen,
                             (unsigned long long)host);
    }
    *addr_len_out = alen;
    *host_id_out = host;
    return GS_OK;
}

void gs__boot_table_hdr_encode(const gs__boot_table_hdr_t *h, uint8_t *out)
{
    memset(out, 0, GS_BOOT_TABLE_HDR_BYTES);
    gs__put_le32(out + 0, GS_BOOT_MAGIC_TABLE);
    gs__put_le32(out + 4, (uint32_t)h->status);
    gs__put_le64(out + 8, h->nonce);
    gs__put_le32(out + 16, h->world);
    gs__put_le32(out + 20, h->msg_len);
}

gs_status_t gs__boot_table_hdr_decode(const uint8_t *in, size_t len, gs__boot_table_hdr_t *out)
{
    if ((len < GS_BOOT_TABLE_HDR_BYTES) || (gs__get_le32(in) != GS_BOOT_MAGIC_TABLE)) {
        return gs__error_set(GS_ERR_PROTOCOL, "rendezvous reply is malformed");
    }
    out->status = (int32_t)gs__get_le32(in + 4);
    out->nonce = gs__get_le64(in + 8);
    out->world = gs__get_le32(in + 16);
    out->msg_len = gs__get_le32(in + 20);
    if ((out->status > 0) || (out->status < -100) || (out->msg_len >= GS_BOOT_MSG_MAX) ||
        ((out->status == GS_OK) && (out->msg_len != 0))) {
        return gs__error_set(GS_ERR_PROTOCOL,
                             "rendezvous reply has status %d and message length %u", out->status,
                             out->msg_len);
    }
    return GS_OK;
}

uint64_t gs__boot_job_hash(const gs__cfg_t *cfg)
{
    return gs__hash64(cfg->job_id, strlen(cfg->job_id), 0x67726164ull);
}

void gs__boot_hello_init(gs__boot_hello_t *h, const gs__cfg_t *cfg, size_t addr_len)
{
    memset(h, 0, sizeof(*h));
    h->version = GS_BOOT_VERSION;
    h->job_hash = gs__boot_job_hash(cfg);
    h->rank = (uint32_t)cfg->rank;
    h->world = (uint32_t)cfg->world_size;
    h->host_id = gs__host_id(cfg->host_id);
    h->addr_len = (uint32_t)addr_len;
}

uint64_t gs__boot_job_nonce(void)
{
    uint64_t nonce = 0;

    if (getrandom(&nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce)) {
        nonce = gs__now_ns() ^ ((uint64_t)getpid() << 32);
    }
    return nonce;
}

/* ---------------------------------------------------------------------- */
/* Server (rank 0)                                                        */
/* ---------------------------------------------------------------------- */

typedef struct boot_conn {
    int fd;
    uint8_t buf[GS_BOOT_HELLO_BYTES + GS_SOCK_ADDR_MAX];
    size_t got;
    int awaiting_proof; /* AUTH sent; the hello is complete in buf */
    uint8_t proof[GS_BOOT_PROOF_BYTES];
    size_t proof_got;
    uint8_t nonce_a[GS_AUTH_NONCE_BYTES];
    uint64_t since_ns;
    char peer[GS_SOCK_ADDR_MAX];
} boot_conn_t;

typedef struct boot_server {
    const gs__cfg_t *cfg;
    const gs__auth_t *auth; /* never NULL here; off: no authentication */
    int listen_fd;
    boot_conn_t pending[BOOT_MAX_PENDING];
    int npending;
    int *rank_fd;                    /* world entries; -1 until joined */
    char (*addrs)[GS_SOCK_ADDR_MAX]; /* world entries */
    uint64_t *hosts;                 /* world entries */
    int joined;
    gs_status_t fail_status;
    char fail_msg[GS_ERROR_MSG_MAX]; /* sent to the others cut to GS_BOOT_MSG_MAX - 1 */
} boot_server_t;

static void boot_reply_error(int fd, gs_status_t status, const char *msg, uint64_t deadline)
{
    uint8_t hdr[GS_BOOT_TABLE_HDR_BYTES];
    gs__boot_table_hdr_t h = {.status = status, .nonce = 0, .world = 0};
    size_t len = strnlen(msg, GS_BOOT_MSG_MAX - 1);

    h.msg_len = (uint32_t)len;
    gs__boot_table_hdr_encode(&h, hdr);
    /* Best effort: the peer may already be gone. */
    if (gs__sock_write_full(fd, hdr, sizeof(hdr), deadline) == GS_OK) {
        (void)gs__sock_write_full(fd, msg, len, deadline);
    }
}

static void boot_drop(boot_server_t *s, int i)
{
    close(s->pending[i].fd);
    s->pending[i] = s->pending[s->npending - 1];
    s->npending--;
}

/* A complete hello arrived on pending connection i: register or refuse it. */
static void boot_register(boot_server_t *s, int i, const gs__boot_hello_t *h)
{
    boot_conn_t *c = &s->pending[i];
    const gs__cfg_t *cfg = s->cfg;
    uint64_t short_deadline = gs__deadline_after_ms(1000);
    char msg[GS_BOOT_MSG_MAX];

    if (h->job_hash != gs__boot_job_hash(cfg)) {
        snprintf(msg, sizeof(msg), "rank %u from %s belongs to another job (GS_JOB_ID differs)",
                 h->rank, c->peer);
        GS_WARN("rendezvous: refused %s", msg);
        boot_reply_error(c->fd, GS_ERR_MISMATCH, msg, short_deadline);
        boot_drop(s, i);
        return;
    }
    if ((int)h->world != cfg->world_size) {
        snprintf(msg, sizeof(msg),
                 "ranks disagree on the world size: rank %u (%s) says %u, rank 0 says %d", h->rank,
                 c->peer, h->world, cfg->world_size);
    } else if ((h->rank == 0) || (s->rank_fd[h->rank] >= 0)) {
        snprintf(msg, sizeof(msg), "rank %u joined twice (second time from %s)", h->rank, c->peer);
    } else {
        s->rank_fd[h->rank] = c->fd;
        memcpy(s->addrs[h->rank], c->buf + GS_BOOT_HELLO_BYTES, h->addr_len);
        s->addrs[h->rank][h->addr_len] = '\0';
        s->hosts[h->rank] = h->host_id;
        s->joined++;
        GS_INFO(BOOT, "rendezvous: rank %u joined from %s (%d of %d)", h->rank, c->peer, s->joined,
                cfg->world_size);
        s->pending[i] = s->pending[s->npending - 1];
        s->npending--;
        return;
    }
    /* A disagreement fails the whole job: tell this rank now, the others later. */
    s->fail_status = GS_ERR_MISMATCH;
    snprintf(s->fail_msg, sizeof(s->fail_msg), "%s", msg);
    boot_reply_error(c->fd, GS_ERR_MISMATCH, msg, short_deadline);
    boot_drop(s, i);
}

/* Refuse pending connection i for authentication and drop it (the job goes on). */
static void boot_auth_refuse(boot_server_t *s, int i, const char *why, int tell)
{
    boot_conn_t *c = &s->pending[i];

    GS_WARN("rendezvous: dropped a connection from %s: %s", c->peer, why);
    if (tell) {
        boot_reply_error(c->fd, GS_ERR_AUTH, why, gs__deadline_after_ms(1000));
    }
    boot_drop(s, i);
}

/* A complete hello with the AUTH flag as this rank wants: answer with AUTH. */
static void boot_auth_start(boot_server_t *s, int i, const gs__boot_hello_t *h)
{
    boot_conn_t *c = &s->pending[i];
    uint8_t rec[GS_BOOT_AUTH_BYTES];
    uint8_t mac[GS_AUTH_MAC_BYTES];

    if (gs__auth_nonce(c->nonce_a) != GS_OK) {
        boot_auth_refuse(s, i, gs__error_get(), 0);
        return;
    }
    gs__auth_mac(s->auth, GS_AUTH_ACCEPTOR, GS_BOOT_AUTH_DOMAIN, h->nonce, c->nonce_a, mac);
    gs__boot_auth_encode(c->nonce_a, mac, rec);
    if (gs__sock_write_full(c->fd, rec, sizeof(rec), gs__deadline_after_ms(1000)) != GS_OK) {
        boot_auth_refuse(s, i, "it went away during authentication", 0);
        return;
    }
    c->awaiting_proof = 1;
}

/* Read the proof of pending connection i; register the hello once it checks out. */
static void boot_read_proof(boot_server_t *s, int i)
{
    boot_conn_t *c = &s->pending[i];
    uint8_t mac[GS_AUTH_MAC_BYTES];
    gs__boot_hello_t h;
    ssize_t n = read(c->fd, c->proof + c->proof_got, sizeof(c->proof) - c->proof_got);

    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        boot_auth_refuse(s, i, "closed before proving its GS_AUTH_TOKEN", 0);
        return;
    }
    if (n < 0) {
        return;
    }
    c->proof_got += (size_t)n;
    if (c->proof_got < sizeof(c->proof)) {
        return;
    }
    memset(&h, 0, sizeof(h));
    (void)gs__boot_hello_decode(c->buf, c->got, &h); /* decoded before: it is valid */
    if ((gs__boot_proof_decode(c->proof, sizeof(c->proof), mac) != GS_OK) ||
        !gs__auth_check(s->auth, GS_AUTH_CONNECTOR, GS_BOOT_AUTH_DOMAIN, h.nonce, c->nonce_a,
                        mac)) {
        char why[128];

        snprintf(why, sizeof(why),
                 "the peer claiming rank %u failed authentication: a wrong GS_AUTH_TOKEN or a "
                 "replayed handshake",
                 h.rank);
        boot_auth_refuse(s, i, why, 1);
        return;
    }
    boot_register(s, i, &h);
}

/* Read what is available on pending connection i. */
static void boot_read(boot_server_t *s, int i)
{
    boot_conn_t *c = &s->pending[i];
    gs__boot_hello_t h;
    size_t need = GS_BOOT_HELLO_BYTES;
    ssize_t n;

    if (c->awaiting_proof) {
        boot_read_proof(s, i);
        return;
    }
    if (c->got >= GS_BOOT_HELLO_BYTES) {
        /* Decoded before; addr_len was validated. */
        need = GS_BOOT_HELLO_BYTES + gs__get_le32(c->buf + 32);
    }
    n = read(c->fd, c->buf + c->got, need - c->got);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        GS_INFO(BOOT, "rendezvous: connection from %s closed before its hello", c->peer);
        boot_drop(s, i);
        return;
    }
    if (n < 0) {
        return;
    }
    c->got += (size_t)n;
    if (c->got < GS_BOOT_HELLO_BYTES) {
        return;
    }
    if (gs__boot_hello_decode(c->buf, c->got, &h) != GS_OK) {
        GS_WARN("rendezvous: rejected a connection from %s: %s", c->peer, gs__error_get());
        boot_drop(s, i);
        return;
    }
    if (c->got < GS_BOOT_HELLO_BYTES + h.addr_len) {
        return;
    }
    if (s->auth->on && !(h.flags & GS_BOOT_F_AUTH)) {
        char why[128];

        snprintf(why, sizeof(why), "rank 0 requires a GS_AUTH_TOKEN and rank %u has none", h.rank);
        boot_auth_refuse(s, i, why, 1);
    } else if (!s->auth->on && (h.flags & GS_BOOT_F_AUTH)) {
        char why[128];

        snprintf(why, sizeof(why), "rank %u has a GS_AUTH_TOKEN and rank 0 has none", h.rank);
        boot_auth_refuse(s, i, why, 1);
    } else if (s->auth->on) {
        boot_auth_start(s, i, &h);
    } else {
        boot_register(s, i, &h);
    }
}

static void boot_accept(boot_server_t *s)
{
    int fd = -1;

    if ((gs__sock_accept(s->listen_fd, 0, &fd) != GS_OK) || (fd < 0)) {
        return;
    }
    if (s->npending == BOOT_MAX_PENDING) {
        GS_WARN("rendezvous: %d connections have not sent a hello; dropping a new one",
                BOOT_MAX_PENDING);
        close(fd);
        return;
    }
    boot_conn_t *c = &s->pending[s->npending++];
    gs__sockaddr_t peer;
    memset(c, 0, sizeof(*c));
    c->fd = fd;
    c->since_ns = gs__now_ns();
    peer.len = sizeof(peer.ss);
    if ((getpeername(fd, (struct sockaddr *)&peer.ss, &peer.len) != 0) ||
        (gs__sock_format(&peer, c->peer, sizeof(c->peer)) != GS_OK)) {
        snprintf(c->peer, sizeof(c->peer), "an unknown address");
    }
}

static gs_status_t boot_send_table(boot_server_t *s, uint64_t nonce, uint64_t deadline)
{
    const int world = s->cfg->world_size;
    size_t cap = GS_BOOT_TABLE_HDR_BYTES + (size_t)world * (GS_BOOT_ENTRY_BYTES + GS_SOCK_ADDR_MAX);
    uint8_t *buf = malloc(cap);
    size_t len = GS_BOOT_TABLE_HDR_BYTES;
    gs__boot_table_hdr_t h = {.status = GS_OK, .nonce = nonce, .world = (uint32_t)world};
    gs_status_t status = GS_OK;

    if (buf == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "rendezvous: cannot allocate %zu bytes", cap);
    }
    gs__boot_table_hdr_encode(&h, buf);
    for (int r = 0; r < world; r++) {
        uint32_t alen = (uint32_t)strlen(s->addrs[r]);
        gs__boot_entry_encode(alen, s->hosts[r], buf + len);
        memcpy(buf + len + GS_BOOT_ENTRY_BYTES, s->addrs[r], alen);
        len += GS_BOOT_ENTRY_BYTES + alen;
    }
    for (int r = 1; r < world; r++) {
        gs_status_t st = gs__sock_write_full(s->rank_fd[r], buf, len, deadline);
        if ((st != GS_OK) && (status == GS_OK)) {
            status = gs__error_wrap(st, "rendezvous: cannot send the address table to rank %d: %s",
                                    r, gs__error_get());
        }
    }
    free(buf);
    return status;
}

/* The wildcard address of @p family (AF_INET or AF_INET6) with @p port. */
static void boot_wildcard(int family, int port, gs__sockaddr_t *out)
{
    memset(out, 0, sizeof(*out));
    if (family == AF_INET6) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&out->ss;
        a6->sin6_family = AF_INET6;
        a6->sin6_addr = in6addr_any;
        a6->sin6_port = htons((uint16_t)port);
        out->len = sizeof(*a6);
    } else {
        struct sockaddr_in *a4 = (struct sockaddr_in *)&out->ss;
        a4->sin_family = AF_INET;
        a4->sin_addr.s_addr = htonl(INADDR_ANY);
        a4->sin_port = htons((uint16_t)port);
        out->len = sizeof(*a4);
    }
}

static void boot_set_port(gs__sockaddr_t *a, int port)
{
    if (a->ss.ss_family == AF_INET6) {
        ((struct sockaddr_in6 *)&a->ss)->sin6_port = htons((uint16_t)port);
    } else {
        ((struct sockaddr_in *)&a->ss)->sin_port = htons((uint16_t)port);
    }
}

/* 1 when @p a (any port) is an address of this host: a socket can bind to it. */
static int boot_is_local(const gs__sockaddr_t *a)
{
    gs__sockaddr_t probe = *a;
    int fd = -1;

    boot_set_port(&probe, 0);
    if (gs__sock_listen(&probe, 1, &fd, NULL) != GS_OK) {
        return 0;
    }
    close(fd);
    return 1;
}

/*
 * Rank 0's rendezvous socket binds to one address, not every one, where it
 * can tell which: the address of GS_SOCKET_IFNAME when set; else the master
 * address when it is a numeric address of this host. A host name may
 * resolve here to an address others do not use (127.0.1.1 for the host's
 * own name on Debian), and a numeric master address may not be on this host
 * (a NAT or a service address): then it listens on every address, and says
 * so at INFO. With GS_SOCKET_IFNAME, a numeric master address that is
 * another address of this host fails at once: the others would connect where
 * rank 0 does not listen. @p where gets what it listens on, for messages.
 */
static gs_status_t boot_listen(const gs__cfg_t *cfg, int *fd_out, char *where, size_t cap)
{
    gs__sockaddr_t master;
    gs__sockaddr_t bind_to;
    gs_status_t status;
    struct addrinfo hints;
    struct addrinfo *res = NULL;
    char ifaddr[GS_SOCK_ADDR_MAX] = "";

    status = gs__sock_resolve(cfg->master_addr, cfg->master_port, cfg->socket_family, &master);
    if (status != GS_OK) {
        return status;
    }
    if (cfg->socket_ifname[0] != '\0') {
        status = gs__sock_pick_local(cfg->socket_ifname, cfg->socket_family, &master, &bind_to);
        if (status != GS_OK) {
            return status; /* names the interface */
        }
        boot_set_port(&bind_to, cfg->master_port);
        (void)gs__sock_format(&bind_to, ifaddr, sizeof(ifaddr));
        (void)snprintf(where, cap, "%s (GS_SOCKET_IFNAME=%s)", ifaddr, cfg->socket_ifname);
        if (!gs__sock_same_ip(&master, &bind_to)) {
            /* Only a numeric address is known to be what the others use: a host name may
             * resolve here to another address of this host (127.0.1.1 on Debian). */
            memset(&hints, 0, sizeof(hints));
            hints.ai_flags = AI_NUMERICHOST;
            int numeric = getaddrinfo(cfg->master_addr, NULL, &hints, &res) == 0;
            if (numeric) {
                freeaddrinfo(res);
                res = NULL;
            }
            if (numeric && boot_is_local(&master)) {
                return gs__error_set(
                    GS_ERR_INVALID_ARG,
                    "rank 0 would listen on %s, the address of GS_SOCKET_IFNAME=%s, "
                    "but the master address %s is another address of this host, "
                    "where the other ranks would connect: set GS_MASTER_ADDR to "
                    "the interface's address, or GS_SOCKET_IFNAME to the "
                    "interface that carries %s",
                    ifaddr, cfg->socket_ifname, cfg->master_addr, cfg->master_addr);
            }
            GS_INFO(BOOT,
                    "rendezvous: listening on %s; the other ranks connect to the master address "
                    "%s, which must lead there",
                    where, cfg->master_addr);
        }
        return gs__sock_listen(&bind_to, 128, fd_out, NULL);
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_flags = AI_NUMERICHOST;
    if (getaddrinfo(cfg->master_addr, NULL, &hints, &res) == 0) {
        freeaddrinfo(res);
        if (gs__sock_listen(&master, 128, fd_out, NULL) == GS_OK) {
            (void)gs__sock_format(&master, where, cap);
            return GS_OK;
        }
        GS_INFO(BOOT,
                "rendezvous: %s is not an address of this host (%s); listening on every "
                "address",
                cfg->master_addr, gs__error_get());
    } else {
        GS_INFO(BOOT,
                "rendezvous: the master address %s is a name; listening on every address "
                "(set GS_SOCKET_IFNAME to listen on one interface only)",
                cfg->master_addr);
    }
    boot_wildcard(master.ss.ss_family, cfg->master_port, &bind_to);
    (void)snprintf(where, cap, "every address, port %d", cfg->master_port);
    return gs__sock_listen(&bind_to, 128, fd_out, NULL);
}

static gs_status_t boot_serve(const gs__cfg_t *cfg, const gs__auth_t *auth,
                              const volatile int *abort_flag, const char *my_addr,
                              char (*addrs)[GS_SOCK_ADDR_MAX], uint64_t *hosts, uint64_t *nonce_out)
{
    const uint64_t deadline = gs__deadline_after_ms(cfg->timeout_ms);
    boot_server_t s;
    gs_status_t status;
    uint64_t nonce = 0;
    char where[GS_SOCK_ADDR_MAX + GS_CFG_STR_MAX + 32] = "";

    memset(&s, 0, sizeof(s));
    s.cfg = cfg;
    s.auth = auth;
    s.addrs = addrs;
    s.hosts = hosts;
    s.rank_fd = malloc(sizeof(int) * (size_t)cfg->world_size);
    if (s.rank_fd == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "rendezvous: out of memory for %d ranks",
                             cfg->world_size);
    }
    for (int r = 0; r < cfg->world_size; r++) {
        s.rank_fd[r] = -1;
    }
    snprintf(addrs[0], GS_SOCK_ADDR_MAX, "%s", my_addr);
    hosts[0] = gs__host_id(cfg->host_id);
    s.joined = 1;

    status = boot_listen(cfg, &s.listen_fd, where, sizeof(where));
    if (status == GS_ERR_INVALID_ARG) {
        free(s.rank_fd);
        return status; /* the configuration's fault, said in full */
    }
    if (status != GS_OK) {
        free(s.rank_fd);
        return gs__error_wrap(status, "rendezvous: rank 0 cannot listen on port %d: %s",
                              cfg->master_port, gs__error_get());
    }
    GS_INFO(BOOT, "rendezvous: rank 0 waiting for %d ranks on %s", cfg->world_size - 1, where);

    while ((s.joined < cfg->world_size) && (s.fail_status == GS_OK)) {
        struct pollfd pfd[BOOT_MAX_PENDING + 1];
        uint64_t now = gs__now_ns();
        int timeout_ms;

        if ((abort_flag != NULL) && (__atomic_load_n(abort_flag, __ATOMIC_RELAXED) != 0)) {
            s.fail_status = GS_ERR_ABORTED;
            snprintf(s.fail_msg, sizeof(s.fail_msg),
                     "rank 0 aborted the rendezvous (gs_config_t.abort_flag)");
            break;
        }
        if (now >= deadline) {
            char missing[96];
            size_t off = 0;
            int shown = 0;
            for (int r = 1; (r < cfg->world_size) && (off + 16 < sizeof(missing)); r++) {
                if (s.rank_fd[r] < 0) {
                    off += (size_t)snprintf(missing + off, sizeof(missing) - off, "%s%d",
                                            shown++ ? ", " : "", r);
                }
            }
            s.fail_status = GS_ERR_TIMEOUT;
            snprintf(s.fail_msg, sizeof(s.fail_msg),
                     "rank(s) %s did not join the rendezvous at %.64s:%d within %d ms (rank 0 "
                     "listened on %.100s)",
                     missing, cfg->master_addr, cfg->master_port, cfg->timeout_ms, where);
            break;
        }
        timeout_ms = (int)((deadline - now) / 1000000ull) + 1;
        if (timeout_ms > 100) {
            timeout_ms = 100; /* also expire idle hellos */
        }
        pfd[0].fd = s.listen_fd;
        pfd[0].events = POLLIN;
        for (int i = 0; i < s.npending; i++) {
            pfd[i + 1].fd = s.pending[i].fd;
            pfd[i + 1].events = POLLIN;
        }
        int npfd = s.npending + 1;
        int ret = poll(pfd, (nfds_t)npfd, timeout_ms);
        if ((ret < 0) && (errno != EINTR)) {
            s.fail_status =
                gs__error_set(GS_ERR_SYSTEM, "rendezvous: poll failed: %s", strerror(errno));
            snprintf(s.fail_msg, sizeof(s.fail_msg), "%s", gs__error_get());
            break;
        }
        /* Walk backwards: boot_read/boot_drop move the last entry into i. */
        for (int i = npfd - 2; i >= 0; i--) {
            if ((ret > 0) && (pfd[i + 1].revents != 0)) {
                boot_read(&s, i);
            } else if (gs__now_ns() - s.pending[i].since_ns > BOOT_CONN_IDLE_MS * 1000000ull) {
                GS_WARN("rendezvous: dropped %s: no hello within %d ms", s.pending[i].peer,
                        BOOT_CONN_IDLE_MS);
                boot_drop(&s, i);
            }
            if (s.fail_status != GS_OK) {
                break;
            }
        }
        if ((ret > 0) && (pfd[0].revents & POLLIN) && (s.fail_status == GS_OK)) {
            boot_accept(&s);
        }
    }

    if (s.fail_status == GS_OK) {
        nonce = gs__boot_job_nonce();
        status = boot_send_table(&s, nonce, deadline + 5000000000ull);
    } else {
        for (int r = 1; r < cfg->world_size; r++) {
            if (s.rank_fd[r] >= 0) {
                boot_reply_error(s.rank_fd[r], s.fail_status, s.fail_msg,
                                 gs__deadline_after_ms(1000));
            }
        }
        status = gs__error_set(s.fail_status, "%s", s.fail_msg);
    }
    for (int r = 1; r < cfg->world_size; r++) {
        if (s.rank_fd[r] >= 0) {
            close(s.rank_fd[r]);
        }
    }
    for (int i = 0; i < s.npending; i++) {
        close(s.pending[i].fd);
    }
    close(s.listen_fd);
    free(s.rank_fd);
    if (status == GS_OK) {
        *nonce_out = nonce;
    }
    return status;
}

/* ---------------------------------------------------------------------- */
/* Client (ranks 1..n-1)                                                  */
/* ---------------------------------------------------------------------- */

/*
 * With a token: after the hello, rank 0 answers AUTH (check its MAC, send
 * PROOF) or, when it refuses, a table header with the error, which is left
 * in @p hdr for the caller (*have_hdr = 1). Returns GS_OK or the failure.
 */
static gs_status_t boot_client_auth(const gs__cfg_t *cfg, const gs__auth_t *auth, int fd,
                                    const uint8_t nonce_c[GS_AUTH_NONCE_BYTES], uint64_t deadline,
                                    uint8_t hdr[GS_BOOT_TABLE_HDR_BYTES], int *have_hdr)
{
    uint8_t rec[GS_BOOT_AUTH_BYTES];
    uint8_t nonce_a[GS_AUTH_NONCE_BYTES];
    uint8_t mac[GS_AUTH_MAC_BYTES];
    uint8_t proof[GS_BOOT_PROOF_BYTES];
    gs_status_t status;

    *have_hdr = 0;
    status = gs__sock_read_full(fd, rec, 8, deadline);
    if ((status == GS_OK) && (gs__get_le32(rec) == GS_BOOT_MAGIC_TABLE)) {
        /* A refusal: the rest of the table header follows. */
        memcpy(hdr, rec, 8);
        *have_hdr = 1;
        return gs__sock_read_full(fd, hdr + 8, GS_BOOT_TABLE_HDR_BYTES - 8, deadline);
    }
    if (status == GS_OK) {
        status = gs__sock_read_full(fd, rec + 8, sizeof(rec) - 8, deadline);
    }
    if ((status == GS_OK) && (gs__boot_auth_decode(rec, sizeof(rec), nonce_a, mac) != GS_OK)) {
        status = GS_ERR_PROTOCOL;
    }
    if (status != GS_OK) {
        return gs__error_wrap(status, "rank %d: authentication with rank 0 at %s:%d failed: %s",
                              cfg->rank, cfg->master_addr, cfg->master_port, gs__error_get());
    }
    if (!gs__auth_check(auth, GS_AUTH_ACCEPTOR, GS_BOOT_AUTH_DOMAIN, nonce_c, nonce_a, mac)) {
        return gs__error_set(GS_ERR_AUTH,
                             "rank %d: the rendezvous at %s:%d failed authentication: its "
                             "GS_AUTH_TOKEN differs from this rank's",
                             cfg->rank, cfg->master_addr, cfg->master_port);
    }
    gs__auth_mac(auth, GS_AUTH_CONNECTOR, GS_BOOT_AUTH_DOMAIN, nonce_c, nonce_a, mac);
    gs__boot_proof_encode(mac, proof);
    return gs__sock_write_full(fd, proof, sizeof(proof), deadline);
}

static gs_status_t boot_client(const gs__cfg_t *cfg, const gs__auth_t *auth, const char *my_addr,
                               char (*addrs)[GS_SOCK_ADDR_MAX], uint64_t *hosts,
                               uint64_t *nonce_out)
{
    int have_hdr = 0;
    const uint64_t deadline = gs__deadline_after_ms(cfg->timeout_ms);
    uint8_t hello[GS_BOOT_HELLO_BYTES + GS_SOCK_ADDR_MAX];
    uint8_t hdr[GS_BOOT_TABLE_HDR_BYTES];
    gs__boot_hello_t h;
    gs__boot_table_hdr_t t;
    gs__sockaddr_t master;
    gs_status_t status;
    int fd = -1;
    size_t alen = strlen(my_addr);

    if ((alen == 0) || (alen >= GS_SOCK_ADDR_MAX)) {
        return gs__error_set(GS_ERR_INTERNAL, "transport address '%s' has a bad length", my_addr);
    }
    status = gs__sock_resolve(cfg->master_addr, cfg->master_port, cfg->socket_family, &master);
    if (status != GS_OK) {
        return status;
    }
    status = gs__sock_connect(&master, deadline, &fd);
    if (status != GS_OK) {
        if (status == GS_ERR_TIMEOUT) {
            char why[GS_ERROR_MSG_MAX];

            /* The socket layer's text has the last attempt's error ("Connection refused":
             * nothing listens there yet; "No route to host": the address is wrong). */
            (void)snprintf(why, sizeof(why), "%s", gs__error_get());
            return gs__error_set(status,
                                 "rank %d could not reach rank 0's rendezvous at %s:%d within %d "
                                 "ms (%s): is rank 0 running, with the same GS_MASTER_ADDR and "
                                 "GS_MASTER_PORT? (Where rank 0 sets GS_SOCKET_IFNAME, the "
                                 "master address must be that interface's: rank 0's log says "
                                 "where it listens.)",
                                 cfg->rank, cfg->master_addr, cfg->master_port, cfg->timeout_ms,
                                 why);
        }
        return status;
    }

    gs__boot_hello_init(&h, cfg, alen);
    if (auth->on) {
        h.flags = GS_BOOT_F_AUTH;
        status = gs__auth_nonce(h.nonce);
        if (status != GS_OK) {
            close(fd);
            return status;
        }
    }
    gs__boot_hello_encode(&h, hello);
    /* NOLINTNEXTLINE(bugprone-not-null-terminated-result): counted (addr_len), not a C string. */
    memcpy(hello + GS_BOOT_HELLO_BYTES, my_addr, alen);
    status = gs__sock_write_full(fd, hello, GS_BOOT_HELLO_BYTES + alen, deadline);
    if ((status == GS_OK) && auth->on) {
        status = boot_client_auth(cfg, auth, fd, h.nonce, deadline, hdr, &have_hdr);
        if ((status != GS_OK) && !have_hdr) {
            close(fd);
            return status;
        }
    }
    if ((status == GS_OK) && !have_hdr) {
        status = gs__sock_read_full(fd, hdr, sizeof(hdr), deadline + 5000000000ull);
    }
    if (status == GS_OK) {
        status = gs__boot_table_hdr_decode(hdr, sizeof(hdr), &t);
    }
    if (status != GS_OK) {
        gs_status_t st = (status == GS_ERR_PEER_FAILED) ? GS_ERR_PEER_FAILED : status;
        close(fd);
        return gs__error_wrap(st, "rank %d: rendezvous with rank 0 at %s:%d failed: %s", cfg->rank,
                              cfg->master_addr, cfg->master_port, gs__error_get());
    }
    if (t.status != GS_OK) {
        char msg[GS_BOOT_MSG_MAX] = "";
        if (gs__sock_read_full(fd, msg, t.msg_len, gs__deadline_after_ms(1000)) != GS_OK) {
            snprintf(msg, sizeof(msg), "(no reason given)");
        }
        msg[t.msg_len < GS_BOOT_MSG_MAX ? t.msg_len : GS_BOOT_MSG_MAX - 1] = '\0';
        close(fd);
        return gs__error_set((gs_status_t)t.status, "rank 0 refused rank %d: %s", cfg->rank, msg);
    }
    if ((int)t.world != cfg->world_size) {
        close(fd);
        return gs__error_set(GS_ERR_PROTOCOL, "rendezvous table has %u ranks, expected %d", t.world,
                             cfg->world_size);
    }
    for (int r = 0; (r < cfg->world_size) && (status == GS_OK); r++) {
        uint8_t entry[GS_BOOT_ENTRY_BYTES];
        uint32_t len;
        status = gs__sock_read_full(fd, entry, sizeof(entry), deadline + 5000000000ull);
        if (status != GS_OK) {
            break;
        }
        status = gs__boot_entry_decode(entry, sizeof(entry), &len, &hosts[r]);
        if (status != GS_OK) {
            status = gs__error_wrap(status, "rendezvous table, rank %d: %s", r, gs__error_get());
            break;
        }
        status = gs__sock_read_full(fd, addrs[r], len, deadline + 5000000000ull);
        addrs[r][len] = '\0';
    }
    close(fd);
    if (status == GS_OK) {
        *nonce_out = t.nonce;
    }
    return status;
}

gs_status_t gs__bootstrap_exchange(const gs__cfg_t *cfg, const gs__auth_t *auth,
                                   const volatile int *abort_flag, const char *my_addr,
                                   char (*addrs_out)[GS_SOCK_ADDR_MAX], uint64_t *hosts_out,
                                   uint64_t *nonce_out)
{
    static const gs__auth_t no_auth;
    gs_status_t status;

    if (auth == NULL) {
        auth = &no_auth;
    }
    if (cfg->world_size == 1) {
        snprintf(addrs_out[0], GS_SOCK_ADDR_MAX, "%s", my_addr);
        hosts_out[0] = gs__host_id(cfg->host_id);
        *nonce_out = gs__now_ns();
        return GS_OK;
    }
    /* The blocking socket calls look at the flag too (core/socket.h). */
    gs__sock_watch_abort(abort_flag);
    if (cfg->rank == 0) {
        status = boot_serve(cfg, auth, abort_flag, my_addr, addrs_out, hosts_out, nonce_out);
    } else {
        status = boot_client(cfg, auth, my_addr, addrs_out, hosts_out, nonce_out);
    }
    gs__sock_watch_abort(NULL);
    return status;
}
