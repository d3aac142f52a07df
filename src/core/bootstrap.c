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
#include <stdbool.h>
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
    gs__put_le32(out + 56, h->ring_port);
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
    out->ring_port = gs__get_le32(in + 56);
    if (out->ring_port > 65535) {
        return gs__error_set(GS_ERR_PROTOCOL, "rendezvous hello has ring port %u", out->ring_port);
    }
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
        ((out->status == GS_OK) && (out->msg_len > GS_BOOT_REPLY_RING))) {
        return gs__error_set(GS_ERR_PROTOCOL,
                             "rendezvous reply has status %d and message length %u", out->status,
                             out->msg_len);
    }
    return GS_OK;
}

void gs__boot_ring_hello_encode(const gs__boot_ring_hello_t *h, uint8_t *out)
{
    memset(out, 0, GS_BOOT_RING_HELLO_BYTES);
    gs__put_le32(out + 0, GS_BOOT_MAGIC_RING);
    gs__put_le32(out + 4, GS_BOOT_VERSION);
    gs__put_le64(out + 8, h->job_hash);
    gs__put_le64(out + 16, h->nonce);
    gs__put_le32(out + 24, h->rank);
    gs__put_le32(out + 28, h->world);
}

gs_status_t gs__boot_ring_hello_decode(const uint8_t *in, size_t len, gs__boot_ring_hello_t *out)
{
    if ((len < GS_BOOT_RING_HELLO_BYTES) || (gs__get_le32(in) != GS_BOOT_MAGIC_RING)) {
        return gs__error_set(GS_ERR_PROTOCOL, "bootstrap ring hello is malformed");
    }
    if (gs__get_le32(in + 4) != GS_BOOT_VERSION) {
        return gs__error_set(GS_ERR_PROTOCOL,
                             "bootstrap ring hello has protocol version %u, this library speaks %u",
                             gs__get_le32(in + 4), GS_BOOT_VERSION);
    }
    out->job_hash = gs__get_le64(in + 8);
    out->nonce = gs__get_le64(in + 16);
    out->rank = gs__get_le32(in + 24);
    out->world = gs__get_le32(in + 28);
    return GS_OK;
}

void gs__boot_row_encode(uint32_t rank, uint32_t addr_len, uint64_t host_id, uint8_t *out)
{
    gs__put_le32(out + 0, rank);
    gs__put_le32(out + 4, addr_len);
    gs__put_le64(out + 8, host_id);
}

gs_status_t gs__boot_row_decode(const uint8_t *in, size_t len, uint32_t *rank_out,
                                uint32_t *addr_len_out, uint64_t *host_id_out)
{
    if (len < GS_BOOT_ROW_BYTES) {
        return gs__error_set(GS_ERR_PROTOCOL, "bootstrap ring row is %zu bytes, expected %d", len,
                             GS_BOOT_ROW_BYTES);
    }
    *rank_out = gs__get_le32(in);
    return gs__boot_entry_decode(in + 4, len - 4, addr_len_out, host_id_out);
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
    uint32_t *ring_ports;            /* world entries; 0: no ring (a token, or the store) */
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
        s->ring_ports[h->rank] = h->ring_port;
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

static gs_status_t ring_addr(const char *addr, uint32_t port, char *out);

/* Whether every rank has a ring port (none has a token): then each gets only
 * the next rank's ring address, and the rows go round the ring. */
static bool boot_ring_mode(const boot_server_t *s)
{
    for (int r = 0; r < s->cfg->world_size; r++) {
        if (s->ring_ports[r] == 0) {
            return false;
        }
    }
    return !s->auth->on;
}

static gs_status_t boot_send_table(boot_server_t *s, uint64_t nonce, uint64_t deadline)
{
    const int world = s->cfg->world_size;
    const bool ring = boot_ring_mode(s);
    size_t cap = GS_BOOT_TABLE_HDR_BYTES + (size_t)world * (GS_BOOT_ENTRY_BYTES + GS_SOCK_ADDR_MAX);
    uint8_t *buf = malloc(cap);
    size_t len = GS_BOOT_TABLE_HDR_BYTES;
    gs__boot_table_hdr_t h = {.status = GS_OK,
                              .nonce = nonce,
                              .world = (uint32_t)world,
                              .msg_len = ring ? GS_BOOT_REPLY_RING : GS_BOOT_REPLY_TABLE};
    gs_status_t status = GS_OK;

    if (buf == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "rendezvous: cannot allocate %zu bytes", cap);
    }
    gs__boot_table_hdr_encode(&h, buf);
    for (int r = 0; (r < world) && !ring; r++) {
        uint32_t alen = (uint32_t)strlen(s->addrs[r]);
        gs__boot_entry_encode(alen, s->hosts[r], buf + len);
        memcpy(buf + len + GS_BOOT_ENTRY_BYTES, s->addrs[r], alen);
        len += GS_BOOT_ENTRY_BYTES + alen;
    }
    for (int r = 1; r < world; r++) {
        size_t n = len;
        gs_status_t st = GS_OK;

        if (ring) {
            /* O(1) a rank: the next rank's ring address (the rest comes round the ring). */
            const int next = (r + 1) % world;
            char at[GS_SOCK_ADDR_MAX];
            uint32_t alen;

            st = ring_addr(s->addrs[next], s->ring_ports[next], at);
            alen = (uint32_t)strlen(at);
            gs__boot_entry_encode(alen, s->hosts[next], buf + len);
            memcpy(buf + len + GS_BOOT_ENTRY_BYTES, at, alen);
            n = len + GS_BOOT_ENTRY_BYTES + alen;
        }
        if (st == GS_OK) {
            st = gs__sock_write_full(s->rank_fd[r], buf, n, deadline);
        }
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

/* ---------------------------------------------------------------------- */
/* The bootstrap ring (every rank)                                        */
/* ---------------------------------------------------------------------- */

/* A DOWN row: rank field RING_DOWN, host id = failed rank + 1, the text a reason. */
#define RING_DOWN 0xffffffffu
/* How long refused connects to the next rank's ring port mean it is gone. */
#define RING_REFUSED_MS 1000
/* How long a rank that failed waits for its previous rank, to tell it. */
#define RING_TELL_MS 2000

/* A transport address's first host and port: a multi-rail TCP address is
 * "ip:port/prefix,ip:port/prefix" (src/transport/tcp/tcp_rail.h), and the
 * ring uses its first rail. */
static gs_status_t ring_parse(const char *addr, gs__sockaddr_t *a)
{
    char first[GS_SOCK_ADDR_MAX];
    size_t n = strcspn(addr, ",");

    if (n >= sizeof(first)) {
        n = sizeof(first) - 1;
    }
    memcpy(first, addr, n);
    first[n] = '\0';
    if ((strchr(addr, ',') != NULL) && (strrchr(first, '/') != NULL)) {
        *strrchr(first, '/') = '\0';
    }
    return gs__sock_parse(first, "any", a);
}

/* This rank's ring port: a listening socket on its transport address's host. */
static gs_status_t ring_listen(const char *my_addr, int *fd_out, uint32_t *port_out)
{
    gs__sockaddr_t a;
    gs__sockaddr_t bound;
    gs_status_t st = ring_parse(my_addr, &a);

    if (st == GS_OK) {
        boot_set_port(&a, 0);
        st = gs__sock_listen(&a, 16, fd_out, &bound);
    }
    if (st != GS_OK) {
        return st;
    }
    *port_out = (bound.ss.ss_family == AF_INET6)
                    ? ntohs(((const struct sockaddr_in6 *)&bound.ss)->sin6_port)
                    : ntohs(((const struct sockaddr_in *)&bound.ss)->sin_port);
    return GS_OK;
}

/* @p addr's host with @p port, as "ip:port" into out[GS_SOCK_ADDR_MAX]. */
static gs_status_t ring_addr(const char *addr, uint32_t port, char *out)
{
    gs__sockaddr_t a;
    gs_status_t st = ring_parse(addr, &a);

    if (st == GS_OK) {
        boot_set_port(&a, (int)port);
        st = gs__sock_format(&a, out, GS_SOCK_ADDR_MAX);
    }
    return st;
}

typedef struct ring {
    const gs__cfg_t *cfg;
    uint64_t nonce;
    int next;
    int prev;
    int nfd; /* to the next rank */
    int lfd; /* this rank's ring port, until the previous rank is in */
    int pfd; /* from the previous rank */
    char (*addrs)[GS_SOCK_ADDR_MAX];
    uint64_t *hosts;
    const volatile int *abort_flag; /* gs_config_t.abort_flag, or NULL */
} ring_t;

/* Send a DOWN row naming @p failed (reason @p why) on @p fd (best effort). */
static void ring_tell(int fd, int failed, const char *why)
{
    uint8_t row[GS_BOOT_ROW_BYTES + GS_SOCK_ADDR_MAX];
    size_t len = strnlen(why, GS_SOCK_ADDR_MAX - 1);

    if (fd < 0) {
        return;
    }
    len = (len == 0) ? 1 : len;
    gs__put_le32(row, RING_DOWN);
    gs__put_le32(row + 4, (uint32_t)len);
    gs__put_le64(row + 8, (uint64_t)failed + 1u);
    memset(row + GS_BOOT_ROW_BYTES, ' ', len);
    memcpy(row + GS_BOOT_ROW_BYTES, why, strnlen(why, len));
    (void)gs__sock_write_full(fd, row, GS_BOOT_ROW_BYTES + len, gs__deadline_after_ms(500));
}

/* Fail the ring: rank @p failed is gone (@p why); tell both sides, the one it
 * came from (@p from_fd) excepted. */
static gs_status_t ring_fail(ring_t *g, int failed, int from_fd, const char *why)
{
    char msg[GS_ERROR_MSG_MAX];

    (void)snprintf(msg, sizeof(msg), "%s", why);
    if (g->nfd != from_fd) {
        ring_tell(g->nfd, failed, msg);
    }
    if (g->pfd != from_fd) {
        ring_tell(g->pfd, failed, msg);
    }
    return gs__error_set(GS_ERR_PEER_FAILED, "rank %d: bootstrap ring: %s", g->cfg->rank, msg);
}

/* A DOWN row arrived on @p fd (its header in @p row): read its reason, pass it on. */
static gs_status_t ring_down_heard(ring_t *g, int fd, const uint8_t *row, int from)
{
    char text[GS_SOCK_ADDR_MAX] = "";
    uint32_t len = gs__get_le32(row + 4);
    uint64_t failed = gs__get_le64(row + 8);
    char why[GS_ERROR_MSG_MAX];

    if ((len == 0) || (len >= GS_SOCK_ADDR_MAX) || (failed == 0) ||
        (failed > (uint64_t)g->cfg->world_size)) {
        return gs__error_set(GS_ERR_PROTOCOL, "rank %d: bootstrap ring: rank %d sent a bad report",
                             g->cfg->rank, from);
    }
    (void)gs__sock_read_full(fd, text, len, gs__deadline_after_ms(1000));
    text[len] = '\0';
    (void)snprintf(why, sizeof(why), "%.150s (reported along the ring by rank %d)", text, from);
    return ring_fail(g, (int)(failed - 1u), fd, why);
}

static gs_status_t ring_send_row(ring_t *g, int fd, int r, uint64_t deadline)
{
    uint8_t row[GS_BOOT_ROW_BYTES + GS_SOCK_ADDR_MAX];
    const uint32_t alen = (uint32_t)strlen(g->addrs[r]);

    gs__boot_row_encode((uint32_t)r, alen, g->hosts[r], row);
    memcpy(row + GS_BOOT_ROW_BYTES, g->addrs[r], alen);
    return gs__sock_write_full(fd, row, GS_BOOT_ROW_BYTES + alen, deadline);
}

/* Row @p want from neighbour @p from on @p fd; a DOWN row or a broken socket fails the ring. */
static gs_status_t ring_recv_row(ring_t *g, int fd, int from, int want, uint64_t deadline)
{
    uint8_t row[GS_BOOT_ROW_BYTES];
    uint32_t rank;
    uint32_t alen;
    uint64_t host;
    gs_status_t st = gs__sock_read_full(fd, row, sizeof(row), deadline);

    if (st == GS_ERR_PEER_FAILED) {
        char why[GS_ERROR_MSG_MAX];

        (void)snprintf(why, sizeof(why), "rank %d failed: its bootstrap ring socket closed (%.80s)",
                       from, gs__error_get());
        return ring_fail(g, from, fd, why);
    }
    if (st != GS_OK) {
        return gs__error_wrap(st,
                              "rank %d: bootstrap ring, waiting for rank %d's row from rank "
                              "%d: %s",
                              g->cfg->rank, want, from, gs__error_get());
    }
    if (gs__get_le32(row) == RING_DOWN) {
        return ring_down_heard(g, fd, row, from);
    }
    st = gs__boot_row_decode(row, sizeof(row), &rank, &alen, &host);
    if ((st == GS_OK) && (rank != (uint32_t)want)) {
        st = gs__error_set(GS_ERR_PROTOCOL, "row of rank %u, expected rank %d", rank, want);
    }
    if (st == GS_OK) {
        st = gs__sock_read_full(fd, g->addrs[want], alen, deadline);
        g->addrs[want][alen] = '\0';
        g->hosts[want] = host;
    }
    if (st != GS_OK) {
        return gs__error_wrap(st, "rank %d: bootstrap ring: rank %d sent a bad row: %s",
                              g->cfg->rank, from, gs__error_get());
    }
    return GS_OK;
}

/* The previous rank's connection on the ring port, if it is this job's: 1 taken, 0 dropped. */
static int ring_take_prev(ring_t *g)
{
    const gs__cfg_t *cfg = g->cfg;
    uint8_t buf[GS_BOOT_RING_HELLO_BYTES];
    gs__boot_ring_hello_t h = {0};
    gs_status_t st;
    int fd = -1;

    if ((gs__sock_accept(g->lfd, 0, &fd) != GS_OK) || (fd < 0)) {
        return 0;
    }
    st = gs__sock_read_full(fd, buf, sizeof(buf), gs__deadline_after_ms(1000));
    if (st == GS_OK) {
        st = gs__boot_ring_hello_decode(buf, sizeof(buf), &h);
    }
    if ((st == GS_OK) && (h.job_hash == gs__boot_job_hash(cfg)) && (h.nonce == g->nonce) &&
        (h.rank == (uint32_t)g->prev) && (h.world == (uint32_t)cfg->world_size)) {
        g->pfd = fd;
        return 1;
    }
    GS_WARN("bootstrap: rank %d dropped a ring connection that is not rank %d of this job (%s)",
            cfg->rank, g->prev, (st != GS_OK) ? gs__error_get() : "another job, nonce or rank");
    close(fd);
    return 0;
}

/* A side whose rows are all here is readable: its EOF (it finished; *eof set),
 * a DOWN row, or a protocol error. */
static gs_status_t ring_after(ring_t *g, int fd, int from, bool *eof)
{
    uint8_t head[GS_BOOT_ROW_BYTES];
    const ssize_t got = recv(fd, head, sizeof(head), MSG_PEEK | MSG_DONTWAIT);

    if (got == 0) {
        *eof = true;
        return GS_OK;
    }
    if ((got == (ssize_t)sizeof(head)) && (gs__get_le32(head) == RING_DOWN)) {
        (void)recv(fd, head, sizeof(head), MSG_DONTWAIT);
        return ring_down_heard(g, fd, head, from);
    }
    if ((got < 0) && ((errno == EAGAIN) || (errno == EINTR))) {
        return GS_OK;
    }
    if (got < 0) {
        *eof = true; /* reset after it finished: nothing more is wanted from it */
        return GS_OK;
    }
    if (got < (ssize_t)sizeof(head)) {
        return GS_OK; /* the rest of a row is on its way */
    }
    return gs__error_set(GS_ERR_PROTOCOL,
                         "rank %d: bootstrap ring: rank %d sent more rows than the ring has",
                         g->cfg->rank, from);
}

/* Wait until @p deadline for the previous rank, to tell it a failure. */
static void ring_wait_prev(ring_t *g, uint64_t deadline)
{
    while ((g->pfd < 0) && (gs__now_ns() < deadline)) {
        struct pollfd p = {.fd = g->lfd, .events = POLLIN};

        if (poll(&p, 1, 20) > 0) {
            (void)ring_take_prev(g);
        }
    }
}

/*
 * The ring's steps as events: a row goes on as soon as it is here (rank r's
 * own at once, rank r - k's once received), and whatever arrives on either
 * side is read, so that a DOWN row from one side is seen while the other
 * is silent. Rows from the previous rank come in the order r - 1, r - 2, ...
 * (n / 2 of them), from the next r + 1, r + 2, ... ((n - 1) / 2).
 */
static gs_status_t ring_run(ring_t *g, uint64_t deadline)
{
    const int n = g->cfg->world_size;
    const int r = g->cfg->rank;
    const int want_cw = n / 2;
    const int want_ccw = (n - 1) / 2;
    int cw_sent = 0;
    int cw_got = 0;
    int ccw_sent = 0;
    int ccw_got = 0;
    bool p_eof = false;
    bool n_eof = false;

    for (;;) {
        struct pollfd pfd[3];
        nfds_t np = 0;
        int lfd_at = -1;
        int pfd_at = -1;
        int nfd_at = -1;
        uint64_t now;
        gs_status_t st = GS_OK;

        while ((st == GS_OK) && (cw_sent < want_cw) && (cw_sent <= cw_got)) {
            st = ring_send_row(g, g->nfd, (r - cw_sent + n) % n, deadline);
            cw_sent++;
        }
        if (st != GS_OK) {
            return ring_fail(g, g->next, g->nfd, "the next rank's ring socket broke");
        }
        while ((st == GS_OK) && (g->pfd >= 0) && (ccw_sent < want_ccw) && (ccw_sent <= ccw_got)) {
            st = ring_send_row(g, g->pfd, (r + ccw_sent) % n, deadline);
            ccw_sent++;
        }
        if (st != GS_OK) {
            return ring_fail(g, g->prev, g->pfd, "the previous rank's ring socket broke");
        }
        if ((cw_got == want_cw) && (ccw_got == want_ccw) && (cw_sent == want_cw) &&
            (ccw_sent == want_ccw)) {
            return GS_OK;
        }
        now = gs__now_ns();
        if ((g->abort_flag != NULL) && (__atomic_load_n(g->abort_flag, __ATOMIC_RELAXED) != 0)) {
            return gs__error_set(GS_ERR_ABORTED, "rank %d: bootstrap ring aborted", g->cfg->rank);
        }
        if (now >= deadline) {
            return gs__error_set(GS_ERR_TIMEOUT,
                                 "rank %d: the bootstrap ring did not finish within %d ms: %s",
                                 g->cfg->rank, g->cfg->timeout_ms,
                                 (g->pfd < 0) ? "the previous rank never connected (it is not "
                                                "running or cannot reach this rank's address)"
                                              : "a neighbour stopped answering");
        }
        /* Both sides are watched until the end: a side whose rows are all here may still
         * bring a DOWN row, or its EOF (it finished: then it is watched no more). */
        if (g->pfd < 0) {
            lfd_at = (int)np;
            pfd[np++] = (struct pollfd){.fd = g->lfd, .events = POLLIN};
        } else if (!p_eof) {
            pfd_at = (int)np;
            pfd[np++] = (struct pollfd){.fd = g->pfd, .events = POLLIN};
        }
        if (!n_eof) {
            nfd_at = (int)np;
            pfd[np++] = (struct pollfd){.fd = g->nfd, .events = POLLIN};
        }
        if (poll(pfd, np,
                 gs__ms_until((deadline < now + 20000000ull) ? deadline : now + 20000000ull,
                              now)) <= 0) {
            continue; /* the abort flag and the deadline are looked at every 20 ms */
        }
        if ((lfd_at >= 0) && (pfd[lfd_at].revents != 0)) {
            (void)ring_take_prev(g);
        }
        if ((pfd_at >= 0) && (pfd[pfd_at].revents != 0)) {
            st = (cw_got < want_cw)
                     ? ring_recv_row(g, g->pfd, g->prev, (r - cw_got - 1 + n) % n, deadline)
                     : ring_after(g, g->pfd, g->prev, &p_eof);
            cw_got += (cw_got < want_cw) ? 1 : 0;
        }
        if ((st == GS_OK) && (nfd_at >= 0) && (pfd[nfd_at].revents != 0)) {
            st = (ccw_got < want_ccw)
                     ? ring_recv_row(g, g->nfd, g->next, (r + ccw_got + 1) % n, deadline)
                     : ring_after(g, g->nfd, g->next, &n_eof);
            ccw_got += (ccw_got < want_ccw) ? 1 : 0;
        }
        if (st != GS_OK) {
            return st;
        }
    }
}

/*
 * Fill every rank's row of addrs and hosts (this rank's is set) by passing
 * them both ways round the ring: rank r connects to rank r + 1's ring port
 * (@p next_addr) and accepts rank r - 1 on @p lfd (closed here). In step k
 * it sends rank r - k's row on and rank r + k's row back, and receives rank
 * r - k - 1's and rank r + k + 1's: n / 2 steps.
 */
static gs_status_t boot_ring(const gs__cfg_t *cfg, const volatile int *abort_flag, int lfd,
                             const char *next_addr, uint64_t nonce, char (*addrs)[GS_SOCK_ADDR_MAX],
                             uint64_t *hosts)
{
    const int n = cfg->world_size;
    const int r = cfg->rank;
    const uint64_t deadline = gs__deadline_after_ms(cfg->timeout_ms);
    ring_t g = {.cfg = cfg,
                .nonce = nonce,
                .next = (r + 1) % n,
                .prev = (r + n - 1) % n,
                .nfd = -1,
                .lfd = lfd,
                .pfd = -1,
                .addrs = addrs,
                .hosts = hosts,
                .abort_flag = abort_flag};
    const uint64_t t0 = gs__now_ns();
    gs_status_t st;
    gs_status_t failed = GS_OK;
    gs__sockaddr_t a;

    st = gs__sock_parse(next_addr, "any", &a);
    if (st == GS_OK) {
        /* Every rank listens on its ring port before its hello: a refusal now means the
         * next rank is gone. */
        st = gs__sock_connect(&a, gs__deadline_after_ms(RING_REFUSED_MS), &g.nfd);
    }
    if (st == GS_OK) {
        uint8_t hello[GS_BOOT_RING_HELLO_BYTES];
        const gs__boot_ring_hello_t h = {.job_hash = gs__boot_job_hash(cfg),
                                         .nonce = nonce,
                                         .rank = (uint32_t)r,
                                         .world = (uint32_t)n};

        gs__boot_ring_hello_encode(&h, hello);
        st = gs__sock_write_full(g.nfd, hello, sizeof(hello), deadline);
    }
    if (st != GS_OK) {
        char why[GS_ERROR_MSG_MAX];

        (void)snprintf(why, sizeof(why),
                       "rank %d failed: its bootstrap ring port %s cannot be reached (%.80s); it "
                       "exited or crashed after joining the rendezvous",
                       g.next, next_addr, gs__error_get());
        if (g.nfd >= 0) {
            close(g.nfd);
            g.nfd = -1;
        }
        /* Tell the previous rank, so that the report goes round. */
        ring_wait_prev(&g, gs__deadline_after_ms(RING_TELL_MS));
        failed = ring_fail(&g, g.next, -1, why);
    }
    if (failed == GS_OK) {
        failed = ring_run(&g, deadline);
    }
    if (g.nfd >= 0) {
        close(g.nfd);
    }
    if (g.pfd >= 0) {
        close(g.pfd);
    }
    close(lfd);
    if (failed == GS_OK) {
        GS_INFO(BOOT, "bootstrap: rank %d has every rank's address after %d ring steps (%.1f ms)",
                r, n / 2, (double)(gs__now_ns() - t0) / 1e6);
    }
    return failed;
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
                              uint32_t ring_port, char (*addrs)[GS_SOCK_ADDR_MAX], uint64_t *hosts,
                              uint64_t *nonce_out, char *next_ring)
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
    s.ring_ports = calloc((size_t)cfg->world_size, sizeof(*s.ring_ports));
    if ((s.rank_fd == NULL) || (s.ring_ports == NULL)) {
        free(s.rank_fd);
        free(s.ring_ports);
        return gs__error_set(GS_ERR_NO_MEMORY, "rendezvous: out of memory for %d ranks",
                             cfg->world_size);
    }
    s.ring_ports[0] = ring_port;
    for (int r = 0; r < cfg->world_size; r++) {
        s.rank_fd[r] = -1;
    }
    snprintf(addrs[0], GS_SOCK_ADDR_MAX, "%s", my_addr);
    hosts[0] = gs__host_id(cfg->host_id);
    s.joined = 1;

    status = boot_listen(cfg, &s.listen_fd, where, sizeof(where));
    if (status != GS_OK) {
        free(s.rank_fd);
        free(s.ring_ports);
    }
    if (status == GS_ERR_INVALID_ARG) {
        return status; /* the configuration's fault, said in full */
    }
    if (status != GS_OK) {
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
        next_ring[0] = '\0';
        if ((status == GS_OK) && boot_ring_mode(&s)) {
            status =
                ring_addr(addrs[1 % cfg->world_size], s.ring_ports[1 % cfg->world_size], next_ring);
        }
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
    free(s.ring_ports);
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
                               uint32_t ring_port, char (*addrs)[GS_SOCK_ADDR_MAX], uint64_t *hosts,
                               uint64_t *nonce_out, char *next_ring)
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
    h.ring_port = ring_port;
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
    next_ring[0] = '\0';
    if ((t.msg_len == GS_BOOT_REPLY_RING) && (ring_port == 0)) {
        close(fd);
        return gs__error_set(GS_ERR_PROTOCOL,
                             "rank 0 answered with the ring, and this rank has none");
    }
    /* The whole table, or the next rank's ring address (the rest comes round the ring). */
    for (int k = 0;
         (k < ((t.msg_len == GS_BOOT_REPLY_RING) ? 1 : cfg->world_size)) && (status == GS_OK);
         k++) {
        const int r = (t.msg_len == GS_BOOT_REPLY_RING) ? (cfg->rank + 1) % cfg->world_size : k;
        char *dst = (t.msg_len == GS_BOOT_REPLY_RING) ? next_ring : addrs[r];
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
        status = gs__sock_read_full(fd, dst, len, deadline + 5000000000ull);
        dst[len] = '\0';
    }
    close(fd);
    if (status == GS_OK) {
        *nonce_out = t.nonce;
    }
    return status;
}

/* Above GS_BOOT_STAGGER_RANKS ranks, rank r contacts rank 0 r / GS_BOOT_STAGGER_RATE s after the
 * others start (NCCL_UID_STAGGER_RATE's idea): rank 0 serves them in order, its backlog unflooded. */
static void boot_stagger(const gs__cfg_t *cfg, const volatile int *abort_flag)
{
    uint64_t delay_us;
    uint64_t until;

    if ((cfg->world_size <= GS_BOOT_STAGGER_RANKS) || (cfg->rank == 0)) {
        return;
    }
    delay_us = (uint64_t)cfg->rank * 1000000ull / GS_BOOT_STAGGER_RATE;
    if (cfg->rank == cfg->world_size - 1) {
        GS_INFO(BOOT,
                "rendezvous: %d ranks: contact with rank 0 staggered at %d ranks a second "
                "(this last rank waits %.1f ms)",
                cfg->world_size, GS_BOOT_STAGGER_RATE, (double)delay_us / 1e3);
    }
    until = gs__now_ns() + delay_us * 1000ull;
    while ((gs__now_ns() < until) &&
           ((abort_flag == NULL) || (__atomic_load_n(abort_flag, __ATOMIC_RELAXED) == 0))) {
        (void)poll(NULL, 0, 20); /* the abort flag is looked at every 20 ms */
    }
}

gs_status_t gs__bootstrap_exchange(const gs__cfg_t *cfg, const gs__auth_t *auth,
                                   const volatile int *abort_flag, const char *my_addr,
                                   char (*addrs_out)[GS_SOCK_ADDR_MAX], uint64_t *hosts_out,
                                   uint64_t *nonce_out)
{
    static const gs__auth_t no_auth;
    char next_ring[GS_SOCK_ADDR_MAX] = "";
    uint32_t ring_port = 0;
    int ring_fd = -1;
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
    if (!auth->on) {
        /* The ring port listens before the hello: a refused connect means a rank is gone. */
        status = ring_listen(my_addr, &ring_fd, &ring_port);
        if (status != GS_OK) {
            gs__sock_watch_abort(NULL);
            return gs__error_wrap(status, "rank %d: cannot listen for the bootstrap ring: %s",
                                  cfg->rank, gs__error_get());
        }
    }
    boot_stagger(cfg, abort_flag);
    if (cfg->rank == 0) {
        status = boot_serve(cfg, auth, abort_flag, my_addr, ring_port, addrs_out, hosts_out,
                            nonce_out, next_ring);
    } else {
        status =
            boot_client(cfg, auth, my_addr, ring_port, addrs_out, hosts_out, nonce_out, next_ring);
    }
    if ((status == GS_OK) && (next_ring[0] != '\0')) {
        snprintf(addrs_out[cfg->rank], GS_SOCK_ADDR_MAX, "%s", my_addr);
        hosts_out[cfg->rank] = gs__host_id(cfg->host_id);
        status = boot_ring(cfg, abort_flag, ring_fd, next_ring, *nonce_out, addrs_out, hosts_out);
        ring_fd = -1; /* closed by the ring */
    }
    if (ring_fd >= 0) {
        close(ring_fd);
    }
    gs__sock_watch_abort(NULL);
    return status;
}
