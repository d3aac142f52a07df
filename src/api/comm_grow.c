/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gs_comm_get_unique_id and gs_comm_grow: new ranks join a communicator
 * (ncclCommGetUniqueId and ncclCommGrow). docs/design.md, "Growing", has
 * the protocol; in short:
 *
 * - Rank 0's id holds the address of a listener it opens on the interface
 *   of its own connections (kept until the destroy), a random nonce (the
 *   latest id's is the only one admitted), the job and communicator ids,
 *   the old size and whether the job has a token.
 * - The old ranks run the grow as a task of their worker, over the old
 *   connections with recovery tags (so a revoked communicator grows too):
 *   rank 0 sends START (the new size and the nonce: the new communicator's
 *   id derives from it) to every old rank; each creates the new transport
 *   and sends its endpoint back (ADDR); rank 0 admits joiners on its
 *   listener until every new rank is there, driving the old transport
 *   between polls (heartbeats go on and a dying old rank is seen), then
 *   hands the table to the old ranks (TABLE) and to the joiners (REPLY),
 *   or the error every rank fails with.
 * - A joiner runs gs_comm_init's steps (comm.c, gs__comm_init_join) with
 *   the job and communicator ids of the id; its exchange is a HELLO to
 *   rank 0's listener (its rank, address and host; with a token, its
 *   nonce and MAC) and the REPLY (the table, and rank 0's MAC).
 * - Then every rank connects as at init.
 * Every wait is bounded by GS_TIMEOUT_MS; a joiner's wait watches its
 * abort_flag, the old ranks' an abort of the old communicator.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/comm_impl.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/host.h"
#include "core/le.h"
#include "core/log.h"
#include "core/socket.h"

#define ID_MAGIC 0x49475347u    /* "GSGI" */
#define HELLO_MAGIC 0x48475347u /* "GSGH" */
#define REPLY_MAGIC 0x52475347u /* "GSGR" */
#define START_MAGIC 0x53475347u /* "GSGS" */
#define ADDR_MAGIC 0x41475347u  /* "GSGA" */
#define TABLE_MAGIC 0x54475347u /* "GSGT" */
#define GROW_VERSION 1u
#define GROW_F_AUTH 1u
#define GROW_AUTH_DOMAIN "grow"
#define GROW_ID_SALT 0x67726f77ull /* "grow" */

#define ID_ADDR_OFF 52
#define ID_ADDR_MAX (GS_UNIQUE_ID_BYTES - ID_ADDR_OFF) /* with its NUL */
#define HELLO_BYTES 104
#define REPLY_BYTES 56
#define ROW_BYTES 12 /* address length, host id; the address follows */
#define START_BYTES 24
#define ADDR_BYTES (24 + GS_SOCK_ADDR_MAX) /* magic, new size, address length, 0, host, address */
#define TABLE_HDR_BYTES 16
#define TABLE_ROW_BYTES (GS_SOCK_ADDR_MAX + 8)

/* Joiners' connections rank 0 reads at once (the expected ones and a few strangers). */
#define GROW_PENDING_MAX 64
/* How long one poll of the admission may block (the old transport runs between). */
#define GROW_POLL_MS 10
/* A joiner whose whole hello is not there this long after its connect is dropped. */
#define GROW_HELLO_MS 5000
/* The largest communicator a grow makes (the rank fields are 32-bit; the bound keeps a
 * caller's typo from becoming a huge allocation). */
#define GROW_SIZE_MAX (1 << 20)

/* Recovery tags of the old ranks' steps: bit 41 (shrink's never have it), phase, seq. */
enum { PH_START = 0, PH_ADDR = 1, PH_TABLE = 2 };

static uint64_t grow_tag(int phase, uint32_t seq)
{
    return GS_TP_TAG_RECOVERY | (1ull << 41) | ((uint64_t)phase << 32) |
           (uint64_t)(seq & 0xffffffu);
}

/* ---------------------------------------------------------------------- */
/* The id                                                                 */
/* ---------------------------------------------------------------------- */

typedef struct grow_id {
    uint64_t job_id;
    uint64_t comm_id; /* of the communicator that grows */
    uint8_t nonce[GS_AUTH_NONCE_BYTES];
    int old_size;
    uint32_t flags;
    char addr[ID_ADDR_MAX];
} grow_id_t;

static uint64_t grow_child_id(uint64_t comm_id, const uint8_t *nonce)
{
    return gs__hash64(nonce, GS_AUTH_NONCE_BYTES, comm_id ^ GROW_ID_SALT);
}

static void id_encode(const grow_id_t *g, gs_unique_id_t *out)
{
    uint8_t *b = out->bytes;
    const size_t alen = strlen(g->addr);

    memset(b, 0, GS_UNIQUE_ID_BYTES);
    gs__put_le32(b, ID_MAGIC);
    gs__put_le32(b + 4, GROW_VERSION);
    gs__put_le64(b + 8, g->job_id);
    gs__put_le64(b + 16, g->comm_id);
    memcpy(b + 24, g->nonce, GS_AUTH_NONCE_BYTES);
    gs__put_le32(b + 40, (uint32_t)g->old_size);
    gs__put_le32(b + 44, g->flags);
    gs__put_le32(b + 48, (uint32_t)alen);
    memcpy(b + ID_ADDR_OFF, g->addr, alen);
}

static gs_status_t id_decode(const gs_unique_id_t *in, grow_id_t *g)
{
    const uint8_t *b = in->bytes;
    uint32_t alen;

    if (gs__get_le32(b) != ID_MAGIC) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_comm_grow: the id is not one of gs_comm_get_unique_id (bad "
                             "magic): copy all %d bytes of rank 0's id",
                             GS_UNIQUE_ID_BYTES);
    }
    if (gs__get_le32(b + 4) != GROW_VERSION) {
        return gs__error_set(GS_ERR_VERSION_MISMATCH,
                             "gs_comm_grow: the id is of version %" PRIu32
                             ", this library reads %u",
                             gs__get_le32(b + 4), GROW_VERSION);
    }
    memset(g, 0, sizeof(*g));
    g->job_id = gs__get_le64(b + 8);
    g->comm_id = gs__get_le64(b + 16);
    memcpy(g->nonce, b + 24, GS_AUTH_NONCE_BYTES);
    g->old_size = (int)gs__get_le32(b + 40);
    g->flags = gs__get_le32(b + 44);
    alen = gs__get_le32(b + 48);
    if ((alen == 0) || (alen >= ID_ADDR_MAX) || (g->old_size < 1) ||
        ((g->flags & ~GROW_F_AUTH) != 0)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_comm_grow: the id is malformed (address length %" PRIu32
                             ", old size %d, flags 0x%" PRIx32
                             "): copy all %d bytes of rank 0's id",
                             alen, g->old_size, g->flags, GS_UNIQUE_ID_BYTES);
    }
    memcpy(g->addr, b + ID_ADDR_OFF, alen);
    g->addr[alen] = '\0';
    return GS_OK;
}

/* The host part of a transport address ("ip:port", or rails "ip:port/prefix,...") with port 0. */
static gs_status_t listen_addr_of(const char *tr_addr, gs__sockaddr_t *out)
{
    char first[GS_SOCK_ADDR_MAX];
    size_t n = strcspn(tr_addr, ",/");
    char *colon;

    if (n >= sizeof(first)) {
        return gs__error_set(GS_ERR_INTERNAL, "gs_comm_get_unique_id: address '%s' too long",
                             tr_addr);
    }
    memcpy(first, tr_addr, n);
    first[n] = '\0';
    colon = strrchr(first, ':');
    if (colon == NULL) {
        return gs__error_set(GS_ERR_INTERNAL, "gs_comm_get_unique_id: address '%s' has no port",
                             tr_addr);
    }
    snprintf(colon, sizeof(first) - (size_t)(colon - first), ":0");
    return gs__sock_parse(first, "any", out);
}

gs_status_t gs_comm_get_unique_id(gs_comm_t comm, gs_unique_id_t *id_out)
{
    grow_id_t g;
    gs_status_t status;
    const gs_status_t sticky = (comm != NULL) ? atomic_load(&comm->err.status) : GS_OK;

    if ((comm == NULL) || (id_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_comm_get_unique_id: %s is NULL",
                             comm == NULL ? "comm" : "id_out");
    }
    if (comm->rank != 0) {
        return gs__error_set(GS_ERR_INVALID_USAGE,
                             "gs_comm_get_unique_id: rank %d called it; rank 0 makes the id and "
                             "hands it to the new ranks",
                             comm->rank);
    }
    if (!gs__tp_has_peer_failed(&comm->tr)) {
        return gs__error_set(GS_ERR_UNSUPPORTED,
                             "gs_comm_get_unique_id: transport %s cannot grow (use tcp)",
                             gs__tp_name(&comm->tr));
    }
    if (sticky == GS_ERR_ABORTED) {
        return gs__error_set(GS_ERR_ABORTED, "gs_comm_get_unique_id: the communicator was aborted");
    }
    memset(&g, 0, sizeof(g));
    status = gs__auth_nonce(g.nonce);
    if (status != GS_OK) {
        return status;
    }
    pthread_mutex_lock(&comm->grow.mu);
    if (comm->grow.fd < 0) {
        char tr_addr[GS_SOCK_ADDR_MAX];
        gs__sockaddr_t want;
        gs__sockaddr_t bound;
        int fd = -1;

        /* The transport address is read-only once the communicator exists. */
        status = gs__tp_get_address(&comm->tr, tr_addr, sizeof(tr_addr));
        if (status == GS_OK) {
            status = listen_addr_of(tr_addr, &want);
        }
        if (status == GS_OK) {
            status = gs__sock_listen(&want, GROW_PENDING_MAX, &fd, &bound);
        }
        if (status == GS_OK) {
            status = gs__sock_format(&bound, comm->grow.addr, sizeof(comm->grow.addr));
            if ((status == GS_OK) && (strlen(comm->grow.addr) >= ID_ADDR_MAX)) {
                status = gs__error_set(GS_ERR_INTERNAL,
                                       "gs_comm_get_unique_id: address %s does not fit an id",
                                       comm->grow.addr);
            }
            if (status != GS_OK) {
                (void)close(fd);
                fd = -1;
            }
        }
        comm->grow.fd = fd;
    }
    if (status == GS_OK) {
        memcpy(comm->grow.nonce, g.nonce, sizeof(g.nonce));
        memcpy(g.addr, comm->grow.addr, sizeof(g.addr) - 1); /* checked to fit above */
        g.addr[sizeof(g.addr) - 1] = '\0';
    }
    pthread_mutex_unlock(&comm->grow.mu);
    if (status != GS_OK) {
        return status;
    }
    g.job_id = comm->job_id;
    g.comm_id = comm->comm_id;
    g.old_size = comm->size;
    g.flags = comm->auth.on ? GROW_F_AUTH : 0;
    id_encode(&g, id_out);
    GS_INFO(INIT, "grow: rank 0 listens for new ranks at %s", g.addr);
    return GS_OK;
}

/* ---------------------------------------------------------------------- */
/* A joiner's hello and rank 0's reply                                    */
/* ---------------------------------------------------------------------- */

typedef struct grow_hello {
    uint64_t job_id;
    uint8_t nonce[GS_AUTH_NONCE_BYTES];
    uint32_t new_size;
    uint32_t rank;
    uint64_t host_id;
    uint32_t flags;
    uint32_t addr_len;
    uint8_t cnonce[GS_AUTH_NONCE_BYTES];
    uint8_t mac[GS_AUTH_MAC_BYTES];
} grow_hello_t;

static void hello_encode(const grow_hello_t *h, uint8_t *b)
{
    memset(b, 0, HELLO_BYTES);
    gs__put_le32(b, HELLO_MAGIC);
    gs__put_le32(b + 4, GROW_VERSION);
    gs__put_le64(b + 8, h->job_id);
    memcpy(b + 16, h->nonce, GS_AUTH_NONCE_BYTES);
    gs__put_le32(b + 32, h->new_size);
    gs__put_le32(b + 36, h->rank);
    gs__put_le64(b + 40, h->host_id);
    gs__put_le32(b + 48, h->flags);
    gs__put_le32(b + 52, h->addr_len);
    memcpy(b + 56, h->cnonce, GS_AUTH_NONCE_BYTES);
    memcpy(b + 72, h->mac, GS_AUTH_MAC_BYTES);
}

/* Bytes from the network: hostile until checked. */
static int hello_decode(const uint8_t *b, grow_hello_t *h, char *why, size_t whylen)
{
    if ((gs__get_le32(b) != HELLO_MAGIC) || (gs__get_le32(b + 4) != GROW_VERSION)) {
        snprintf(why, whylen, "not a gradsync grow hello of version %u", GROW_VERSION);
        return 0;
    }
    h->job_id = gs__get_le64(b + 8);
    memcpy(h->nonce, b + 16, GS_AUTH_NONCE_BYTES);
    h->new_size = gs__get_le32(b + 32);
    h->rank = gs__get_le32(b + 36);
    h->host_id = gs__get_le64(b + 40);
    h->flags = gs__get_le32(b + 48);
    h->addr_len = gs__get_le32(b + 52);
    memcpy(h->cnonce, b + 56, GS_AUTH_NONCE_BYTES);
    memcpy(h->mac, b + 72, GS_AUTH_MAC_BYTES);
    if ((h->addr_len == 0) || (h->addr_len >= GS_SOCK_ADDR_MAX) || (h->host_id == 0) ||
        ((h->flags & ~GROW_F_AUTH) != 0)) {
        snprintf(why, whylen, "a malformed hello (address length %" PRIu32 ", flags 0x%" PRIx32 ")",
                 h->addr_len, h->flags);
        return 0;
    }
    return 1;
}

static void reply_encode(uint8_t *b, gs_status_t status, uint64_t comm_id, uint32_t size,
                         uint32_t msg_len, const uint8_t *mac)
{
    memset(b, 0, REPLY_BYTES);
    gs__put_le32(b, REPLY_MAGIC);
    gs__put_le32(b + 4, (uint32_t)status);
    gs__put_le64(b + 8, comm_id);
    gs__put_le32(b + 16, size);
    gs__put_le32(b + 20, msg_len);
    if (mac != NULL) {
        memcpy(b + 24, mac, GS_AUTH_MAC_BYTES);
    }
}

/* ---------------------------------------------------------------------- */
/* The joiner's side                                                      */
/* ---------------------------------------------------------------------- */

static gs_status_t join_exchange(const gs__comm_join_t *join, const gs__cfg_t *cfg,
                                 const gs__auth_t *auth, const volatile int *abort_flag,
                                 const char *my_addr, char (*addrs_out)[GS_SOCK_ADDR_MAX],
                                 uint64_t *hosts_out)
{
    const grow_id_t *g = (const grow_id_t *)join->ctx;
    const uint64_t deadline = gs__deadline_after_ms(cfg->timeout_ms);
    uint8_t buf[HELLO_BYTES + GS_SOCK_ADDR_MAX];
    uint8_t rep[REPLY_BYTES];
    grow_hello_t h;
    gs__sockaddr_t to;
    gs_status_t status;
    int32_t verdict;
    uint32_t size;
    uint32_t msg_len;
    int fd = -1;

    if ((cfg->rank < g->old_size) || (cfg->rank >= cfg->world_size)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_comm_grow: a new rank's rank (GS_RANK or gs_config_t.rank) must "
                             "be %d..%d (the old size to the new size - 1), not %d",
                             g->old_size, cfg->world_size - 1, cfg->rank);
    }
    if (((g->flags & GROW_F_AUTH) != 0) && ((auth == NULL) || !auth->on)) {
        return gs__error_set(GS_ERR_AUTH,
                             "gs_comm_grow: the job has a token and this rank has none: set "
                             "GS_AUTH_TOKEN (or GS_AUTH_TOKEN_FILE) as on the other ranks");
    }
    memset(&h, 0, sizeof(h));
    h.job_id = g->job_id;
    memcpy(h.nonce, g->nonce, GS_AUTH_NONCE_BYTES);
    h.new_size = (uint32_t)cfg->world_size;
    h.rank = (uint32_t)cfg->rank;
    h.host_id = gs__host_id(cfg->host_id);
    h.addr_len = (uint32_t)strlen(my_addr);
    if ((auth != NULL) && auth->on) {
        h.flags = GROW_F_AUTH;
        status = gs__auth_nonce(h.cnonce);
        if (status != GS_OK) {
            return status;
        }
        gs__auth_mac(auth, GS_AUTH_CONNECTOR, GROW_AUTH_DOMAIN, h.cnonce, g->nonce, h.mac);
    }
    hello_encode(&h, buf);
    memcpy(buf + HELLO_BYTES, my_addr, h.addr_len);
    status = gs__sock_parse(g->addr, cfg->socket_family, &to);
    if (status != GS_OK) {
        return status;
    }
    gs__sock_watch_abort(abort_flag);
    status = gs__sock_connect(&to, deadline, &fd);
    if (status == GS_ERR_TIMEOUT) {
        status = gs__error_set(GS_ERR_TIMEOUT,
                               "gs_comm_grow: no grow listener answered at %s within %d ms: the "
                               "id is stale (its communicator is gone) or rank 0 is unreachable",
                               g->addr, cfg->timeout_ms);
    }
    if (status == GS_OK) {
        status = gs__sock_write_full(fd, buf, HELLO_BYTES + h.addr_len, deadline);
    }
    if (status == GS_OK) {
        status = gs__sock_read_full(fd, rep, sizeof(rep), deadline);
        if (status == GS_ERR_TIMEOUT) {
            status = gs__error_set(GS_ERR_TIMEOUT,
                                   "gs_comm_grow: rank 0 at %s did not admit this rank (%d) within "
                                   "%d ms: the old ranks did not all call gs_comm_grow",
                                   g->addr, cfg->rank, cfg->timeout_ms);
        }
    }
    if ((status == GS_OK) && (gs__get_le32(rep) != REPLY_MAGIC)) {
        status = gs__error_set(GS_ERR_PROTOCOL, "gs_comm_grow: %s sent no grow reply", g->addr);
    }
    if (status != GS_OK) {
        goto out;
    }
    verdict = (int32_t)gs__get_le32(rep + 4);
    size = gs__get_le32(rep + 16);
    msg_len = gs__get_le32(rep + 20);
    if (verdict != GS_OK) {
        char msg[GS_ERROR_MSG_MAX];
        const size_t n = (msg_len < sizeof(msg)) ? msg_len : sizeof(msg) - 1;

        if ((verdict > 0) || (gs_status_scope((gs_status_t)verdict) == GS_SCOPE_NONE)) {
            verdict = GS_ERR_PROTOCOL;
        }
        memset(msg, 0, sizeof(msg));
        if ((n > 0) && (gs__sock_read_full(fd, msg, n, deadline) != GS_OK)) {
            snprintf(msg, sizeof(msg), "(its reason was cut off)");
        }
        status =
            gs__error_set((gs_status_t)verdict, "gs_comm_grow: rank 0 at %s refused rank %d: %s",
                          g->addr, cfg->rank, msg);
        goto out;
    }
    if ((size != (uint32_t)cfg->world_size) || (msg_len != 0)) {
        status = gs__error_set(
            GS_ERR_PROTOCOL, "gs_comm_grow: rank 0 at %s sent a table of %" PRIu32 " ranks for %d",
            g->addr, size, cfg->world_size);
        goto out;
    }
    if ((auth != NULL) && auth->on &&
        !gs__auth_check(auth, GS_AUTH_ACCEPTOR, GROW_AUTH_DOMAIN, h.cnonce, g->nonce, rep + 24)) {
        status = gs__error_set(GS_ERR_AUTH,
                               "gs_comm_grow: the listener at %s could not prove the job's token: "
                               "it is not this job's rank 0, or the tokens differ",
                               g->addr);
        goto out;
    }
    for (uint32_t r = 0; (r < size) && (status == GS_OK); r++) {
        uint8_t row[ROW_BYTES];
        uint32_t alen;

        status = gs__sock_read_full(fd, row, sizeof(row), deadline);
        if (status != GS_OK) {
            break;
        }
        alen = gs__get_le32(row);
        hosts_out[r] = gs__get_le64(row + 4);
        if ((alen == 0) || (alen >= GS_SOCK_ADDR_MAX) || (hosts_out[r] == 0)) {
            status = gs__error_set(GS_ERR_PROTOCOL,
                                   "gs_comm_grow: rank 0 at %s sent a bad row for rank %" PRIu32,
                                   g->addr, r);
            break;
        }
        memset(addrs_out[r], 0, GS_SOCK_ADDR_MAX);
        status = gs__sock_read_full(fd, addrs_out[r], alen, deadline);
    }
out:
    gs__sock_watch_abort(NULL);
    if (fd >= 0) {
        (void)close(fd);
    }
    return status;
}

/* A new rank: gs_comm_init's steps with the id's job and communicator. */
static gs_status_t grow_join(int new_size, const gs_unique_id_t *id, const gs_config_t *cfg,
                             gs_comm_t *newcomm_out)
{
    gs__comm_join_t join;
    gs_config_t c;
    grow_id_t g;
    char host[ID_ADDR_MAX];
    gs_status_t status = id_decode(id, &g);

    if (status != GS_OK) {
        return status;
    }
    if (new_size <= g.old_size) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_comm_grow: new_size %d is not above the old size %d", new_size,
                             g.old_size);
    }
    (void)gs_config_init(&c);
    if (cfg != NULL) {
        const size_t n = (cfg->size < sizeof(c)) ? cfg->size : sizeof(c);

        if (n < offsetof(gs_config_t, world_size) + sizeof(int)) {
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "gs_comm_grow: cfg->size %zu is too small; "
                                 "initialise it with gs_config_init()",
                                 cfg->size);
        }
        memcpy(&c, cfg, n);
        c.size = sizeof(c);
    }
    c.world_size = new_size;
    if (c.master_addr == NULL) {
        /* No rendezvous here; the transport picks its interface by the route to the
         * master address (without GS_SOCKET_IFNAME): make that rank 0's listener. */
        char *colon = strrchr(g.addr, ':');

        if ((colon != NULL) && (colon > g.addr)) {
            const size_t n = (size_t)(colon - g.addr);
            const int v6 = (g.addr[0] == '[') && (g.addr[n - 1] == ']');

            memcpy(host, g.addr + v6, n - 2u * (size_t)v6);
            host[n - 2u * (size_t)v6] = '\0';
            c.master_addr = host;
        }
    }
    join.job_id = g.job_id;
    join.comm_id = grow_child_id(g.comm_id, g.nonce);
    join.exchange = join_exchange;
    join.ctx = &g;
    return gs__comm_init_join(newcomm_out, &c, &join);
}

/* ---------------------------------------------------------------------- */
/* The old ranks' side                                                    */
/* ---------------------------------------------------------------------- */

typedef struct pending {
    int fd;
    size_t got;
    uint64_t deadline;
    char peer[GS_SOCK_ADDR_MAX];
    uint8_t buf[HELLO_BYTES + GS_SOCK_ADDR_MAX];
} pending_t;

typedef struct grow_task {
    gs__task_t task; /* first: the worker sees only this */
    gs_comm_t comm;
    int new_size;
    uint32_t seq;
    uint64_t deadline;
    uint8_t nonce[GS_AUTH_NONCE_BYTES]; /* rank 0: the id's */
    gs_comm_t child;
    char (*addrs)[GS_SOCK_ADDR_MAX]; /* new size entries */
    uint64_t *hosts;
    int *jfd; /* rank 0: a joiner's connection per new rank, -1 */
    uint8_t jcnonce[GROW_PENDING_MAX][GS_AUTH_NONCE_BYTES];
    char why[GS_ERROR_MSG_MAX]; /* the error every rank reports */
} grow_task_t;

/* Refuse a joiner: the reason to it (best effort), WARN, close. */
static void refuse(grow_task_t *s, int fd, const char *peer, gs_status_t verdict, const char *fmt,
                   ...) __attribute__((format(printf, 5, 6)));
static void refuse(grow_task_t *s, int fd, const char *peer, gs_status_t verdict, const char *fmt,
                   ...)
{
    char msg[GS_ERROR_MSG_MAX];
    uint8_t rep[REPLY_BYTES];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    GS_WARN("gs_comm_grow: rank 0 refused a joiner at %s: %s", peer, msg);
    reply_encode(rep, verdict, 0, 0, (uint32_t)strlen(msg), NULL);
    (void)(gs__sock_write_full(fd, rep, sizeof(rep), gs__deadline_after_ms(100)) == GS_OK &&
           gs__sock_write_full(fd, msg, strlen(msg), gs__deadline_after_ms(100)) == GS_OK);
    (void)close(fd);
    (void)s;
}

/* A whole hello from a pending connection: admit it as its rank, or refuse it. */
static void admit(grow_task_t *s, pending_t *p)
{
    gs_comm_t comm = s->comm;
    char why[160];
    grow_hello_t h;

    if (!hello_decode(p->buf, &h, why, sizeof(why))) {
        refuse(s, p->fd, p->peer, GS_ERR_PROTOCOL, "%s", why);
        return;
    }
    if (h.job_id != comm->job_id) {
        refuse(s, p->fd, p->peer, GS_ERR_MISMATCH,
               "its id is of another job (GS_JOB_ID or rendezvous address differ)");
        return;
    }
    if (memcmp(h.nonce, s->nonce, GS_AUTH_NONCE_BYTES) != 0) {
        refuse(s, p->fd, p->peer, GS_ERR_MISMATCH,
               "its id is stale or wrong (not the latest gs_comm_get_unique_id of rank 0): ask "
               "rank 0 for the current one");
        return;
    }
    if (h.new_size != (uint32_t)s->new_size) {
        refuse(s, p->fd, p->peer, GS_ERR_MISMATCH,
               "it asks for a communicator of %" PRIu32 " ranks, the old ranks for %d", h.new_size,
               s->new_size);
        return;
    }
    if ((h.rank < (uint32_t)comm->size) || (h.rank >= (uint32_t)s->new_size)) {
        refuse(s, p->fd, p->peer, GS_ERR_INVALID_ARG, "rank %" PRIu32 " is not a new rank (%d..%d)",
               h.rank, comm->size, s->new_size - 1);
        return;
    }
    if (comm->auth.on != ((h.flags & GROW_F_AUTH) != 0)) {
        refuse(s, p->fd, p->peer, GS_ERR_AUTH,
               comm->auth.on ? "the job has a token (GS_AUTH_TOKEN) and the joiner has none"
                             : "the joiner has a token (GS_AUTH_TOKEN) and the job has none");
        return;
    }
    if (comm->auth.on && !gs__auth_check(&comm->auth, GS_AUTH_CONNECTOR, GROW_AUTH_DOMAIN, h.cnonce,
                                         s->nonce, h.mac)) {
        refuse(s, p->fd, p->peer, GS_ERR_AUTH, "its token (GS_AUTH_TOKEN) differs from the job's");
        return;
    }
    if (s->jfd[h.rank] >= 0) {
        refuse(s, p->fd, p->peer, GS_ERR_MISMATCH,
               "rank %" PRIu32 " is taken by an earlier joiner (%s)", h.rank, s->addrs[h.rank]);
        return;
    }
    s->jfd[h.rank] = p->fd;
    memcpy(s->jcnonce[h.rank - (uint32_t)comm->size], h.cnonce, GS_AUTH_NONCE_BYTES);
    memcpy(s->addrs[h.rank], p->buf + HELLO_BYTES, h.addr_len);
    s->addrs[h.rank][h.addr_len] = '\0';
    s->hosts[h.rank] = h.host_id;
    GS_INFO(INIT, "grow: rank %" PRIu32 " joined from %s (transport %s)", h.rank, p->peer,
            s->addrs[h.rank]);
}

/* Read what a pending joiner sent; 1 when it is done with (admitted, refused, gone). */
static int pending_read(grow_task_t *s, pending_t *p, uint64_t now)
{
    for (;;) {
        size_t want = HELLO_BYTES;
        ssize_t n;

        if (p->got >= HELLO_BYTES) {
            const uint32_t alen = gs__get_le32(p->buf + 52);

            want = HELLO_BYTES + ((alen < GS_SOCK_ADDR_MAX) ? alen : 0);
        }
        if (p->got >= want) {
            admit(s, p);
            return 1;
        }
        n = read(p->fd, p->buf + p->got, want - p->got);
        if (n > 0) {
            p->got += (size_t)n;
            continue;
        }
        if ((n < 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == EINTR))) {
            if (now >= p->deadline) {
                GS_WARN("gs_comm_grow: rank 0 dropped a joiner at %s: no whole hello within %d ms",
                        p->peer, GROW_HELLO_MS);
                (void)close(p->fd);
                return 1;
            }
            return 0;
        }
        GS_WARN("gs_comm_grow: rank 0 dropped a joiner at %s: it closed before its hello", p->peer);
        (void)close(p->fd);
        return 1;
    }
}

static int joiners_missing(const grow_task_t *s, char *list, size_t cap)
{
    size_t used = 0;
    int n = 0;

    list[0] = '\0';
    for (int r = s->comm->size; r < s->new_size; r++) {
        if (s->jfd[r] < 0) {
            if (used + 16 < cap) {
                used += (size_t)snprintf(list + used, cap - used, "%s%d", n > 0 ? "," : "", r);
            }
            n++;
        }
    }
    return n;
}

/* Rank 0: admit joiners until every new rank is there, the deadline, or an old rank fails. */
static gs_status_t admit_joiners(grow_task_t *s, int lfd)
{
    gs_comm_t comm = s->comm;
    pending_t *pend = calloc(GROW_PENDING_MAX, sizeof(*pend));
    int npend = 0;
    gs_status_t status = GS_OK;

    if (pend == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "gs_comm_grow: out of memory");
    }
    for (;;) {
        struct pollfd pfd[GROW_PENDING_MAX + 1];
        char missing[160];
        uint64_t now = gs__now_ns();
        int nfds = 0;

        if (joiners_missing(s, missing, sizeof(missing)) == 0) {
            break;
        }
        if (now >= s->deadline) {
            status = gs__error_set(GS_ERR_TIMEOUT,
                                   "gs_comm_grow: new rank(s) %s did not join within %d ms (rank "
                                   "0's listener %s)",
                                   missing, comm->cfg.timeout_ms, comm->grow.addr);
            break;
        }
        /* The old communicator goes on meanwhile: heartbeats, and a failure seen. */
        if (gs__tp_progress(&comm->tr, 0) == GS_ERR_ABORTED) {
            status = gs__error_set(GS_ERR_ABORTED, "gs_comm_grow: the communicator was aborted");
            break;
        }
        for (int p = 1; p < comm->size; p++) {
            if (gs__tp_peer_failed(&comm->tr, p)) {
                status = gs__error_set(GS_ERR_PEER_FAILED,
                                       "gs_comm_grow: old rank %d failed during the grow; shrink "
                                       "the communicator (gs_comm_shrink) and grow again",
                                       p);
                break;
            }
        }
        if (status != GS_OK) {
            break;
        }
        pfd[nfds].fd = lfd;
        pfd[nfds].events = POLLIN;
        nfds++;
        for (int i = 0; i < npend; i++) {
            pfd[nfds].fd = pend[i].fd;
            pfd[nfds].events = POLLIN;
            nfds++;
        }
        if (poll(pfd, (nfds_t)nfds, GROW_POLL_MS) < 0) {
            if (errno == EINTR) {
                continue;
            }
            status = gs__error_set(GS_ERR_SYSTEM, "gs_comm_grow: poll: %s", strerror(errno));
            break;
        }
        now = gs__now_ns();
        for (int i = 0; i < npend;) {
            if (pending_read(s, &pend[i], now)) {
                pend[i] = pend[--npend];
            } else {
                i++;
            }
        }
        while ((pfd[0].revents & POLLIN) != 0) {
            gs__sockaddr_t from;
            int fd;

            from.len = sizeof(from.ss);
            fd = accept(lfd, (struct sockaddr *)&from.ss, &from.len);
            if (fd < 0) {
                break; /* EAGAIN: no more for now */
            }
            if ((npend >= GROW_PENDING_MAX) || (gs__sock_tune(fd) != GS_OK)) {
                GS_WARN("gs_comm_grow: rank 0 dropped a connection: %d pending already",
                        GROW_PENDING_MAX);
                (void)close(fd);
                continue;
            }
            memset(&pend[npend], 0, sizeof(pend[npend]));
            pend[npend].fd = fd;
            pend[npend].deadline = now + (uint64_t)GROW_HELLO_MS * 1000000ull;
            if (gs__sock_format(&from, pend[npend].peer, sizeof(pend[npend].peer)) != GS_OK) {
                snprintf(pend[npend].peer, sizeof(pend[npend].peer), "(unknown)");
            }
            if (pending_read(s, &pend[npend], now)) {
                continue;
            }
            npend++;
        }
    }
    for (int i = 0; i < npend; i++) {
        (void)close(pend[i].fd);
    }
    free(pend);
    return status;
}

/* Rank 0: the table (or the error) to every joiner admitted; closes their connections. */
static void reply_joiners(grow_task_t *s, gs_status_t status)
{
    gs_comm_t comm = s->comm;
    const uint64_t deadline = gs__deadline_after_ms(comm->cfg.timeout_ms);
    const char *msg = s->why;

    for (int r = comm->size; r < s->new_size; r++) {
        const int fd = s->jfd[r];
        uint8_t rep[REPLY_BYTES];
        uint8_t mac[GS_AUTH_MAC_BYTES];
        gs_status_t w;

        if (fd < 0) {
            continue;
        }
        if (status != GS_OK) {
            reply_encode(rep, status, 0, 0, (uint32_t)strlen(msg), NULL);
            w = gs__sock_write_full(fd, rep, sizeof(rep), deadline);
            if (w == GS_OK) {
                w = gs__sock_write_full(fd, msg, strlen(msg), deadline);
            }
        } else {
            if (comm->auth.on) {
                gs__auth_mac(&comm->auth, GS_AUTH_ACCEPTOR, GROW_AUTH_DOMAIN,
                             s->jcnonce[r - comm->size], s->nonce, mac);
            }
            reply_encode(rep, GS_OK, s->child->comm_id, (uint32_t)s->new_size, 0,
                         comm->auth.on ? mac : NULL);
            w = gs__sock_write_full(fd, rep, sizeof(rep), deadline);
            for (int q = 0; (q < s->new_size) && (w == GS_OK); q++) {
                uint8_t row[ROW_BYTES];
                const size_t alen = strlen(s->addrs[q]);

                gs__put_le32(row, (uint32_t)alen);
                gs__put_le64(row + 4, s->hosts[q]);
                w = gs__sock_write_full(fd, row, sizeof(row), deadline);
                if (w == GS_OK) {
                    w = gs__sock_write_full(fd, s->addrs[q], alen, deadline);
                }
            }
        }
        if (w != GS_OK) {
            GS_WARN("gs_comm_grow: rank 0 could not answer new rank %d: %s", r, gs__error_get());
        }
        (void)close(fd);
        s->jfd[r] = -1;
    }
    if (status != GS_OK) {
        /* Joiners waiting in the listener's backlog hear the verdict too. */
        int lfd;

        pthread_mutex_lock(&comm->grow.mu);
        lfd = comm->grow.fd;
        pthread_mutex_unlock(&comm->grow.mu);
        for (int k = 0; (lfd >= 0) && (k < GROW_PENDING_MAX); k++) {
            const int fd = accept(lfd, NULL, NULL);

            if (fd < 0) {
                break; /* EAGAIN: none left */
            }
            (void)gs__sock_tune(fd);
            refuse(s, fd, "(backlog)", status, "%s", msg);
        }
    }
}

/* The old ranks' requests: one per old rank, in reqs[0..size). */
static gs_status_t old_wait(grow_task_t *s, gs__algo_req_t *reqs, size_t *nbytes, gs_status_t *st,
                            const char *what, int only)
{
    gs_comm_t comm = s->comm;
    gs_status_t status =
        gs__comm_wait_each(comm, "gs_comm_grow", reqs, nbytes, st, comm->size, s->deadline);

    for (int p = 0; (status == GS_OK) && (p < comm->size); p++) {
        if ((p != comm->rank) && ((only < 0) || (p == only)) && (st[p] != GS_OK) &&
            (st[p] != GS_INPROGRESS)) {
            status = gs__error_set(
                st[p] == GS_ERR_TIMEOUT ? GS_ERR_TIMEOUT : GS_ERR_PEER_FAILED,
                "gs_comm_grow: old rank %d %s (%s)%s", p, what, gs_status_name(st[p]),
                (st[p] == GS_ERR_TIMEOUT) ? ": every old rank must call gs_comm_grow"
                                          : "; shrink the communicator and grow again");
        }
    }
    return status;
}

static void table_encode(uint8_t *b, gs_status_t status, int size, const char *msg,
                         char (*addrs)[GS_SOCK_ADDR_MAX], const uint64_t *hosts)
{
    gs__put_le32(b, TABLE_MAGIC);
    gs__put_le32(b + 4, (uint32_t)status);
    gs__put_le32(b + 8, (uint32_t)size);
    gs__put_le32(b + 12, (uint32_t)strlen(msg));
    if (status != GS_OK) {
        /* NOLINTNEXTLINE(bugprone-not-null-terminated-result): counted, not a C string. */
        memcpy(b + TABLE_HDR_BYTES, msg, strlen(msg));
        return;
    }
    for (int q = 0; q < size; q++) {
        memcpy(b + TABLE_HDR_BYTES + (size_t)q * TABLE_ROW_BYTES, addrs[q], GS_SOCK_ADDR_MAX);
        gs__put_le64(b + TABLE_HDR_BYTES + (size_t)q * TABLE_ROW_BYTES + GS_SOCK_ADDR_MAX,
                     hosts[q]);
    }
}

static size_t table_len(int size)
{
    const size_t rows = (size_t)size * TABLE_ROW_BYTES;

    return TABLE_HDR_BYTES + ((rows > GS_ERROR_MSG_MAX) ? rows : GS_ERROR_MSG_MAX);
}

/* Rank 0's part, after START went out: endpoints, joiners, table. */
static gs_status_t grow_lead(grow_task_t *s, gs__algo_req_t *reqs, size_t *nbytes, gs_status_t *st,
                             uint8_t *inbox, uint8_t *table)
{
    gs_comm_t comm = s->comm;
    const int n = comm->size;
    gs_status_t status = GS_OK;
    gs_status_t verdict;
    int lfd;

    for (int p = 1; p < n; p++) {
        status = gs__algo_irecv(&comm->actx, p, grow_tag(PH_ADDR, s->seq),
                                inbox + (size_t)p * ADDR_BYTES, ADDR_BYTES, &reqs[p]);
        if (status != GS_OK) {
            gs__algo_release_all(&comm->actx, reqs, (size_t)n);
            return status;
        }
    }
    status = old_wait(s, reqs, nbytes, st, "sent no endpoint", -1);
    for (int p = 1; (status == GS_OK) && (p < n); p++) {
        const uint8_t *b = inbox + (size_t)p * ADDR_BYTES;
        const uint32_t alen = gs__get_le32(b + 8);

        if ((nbytes[p] != ADDR_BYTES) || (gs__get_le32(b) != ADDR_MAGIC) ||
            (alen >= GS_SOCK_ADDR_MAX)) {
            status = gs__error_set(GS_ERR_PROTOCOL,
                                   "gs_comm_grow: old rank %d sent a malformed "
                                   "endpoint",
                                   p);
        } else if (gs__get_le32(b + 4) != (uint32_t)s->new_size) {
            status =
                gs__error_set(GS_ERR_MISMATCH,
                              "gs_comm_grow: old rank %d grows to %" PRIu32 " ranks, rank 0 to %d",
                              p, gs__get_le32(b + 4), s->new_size);
        } else if (alen == 0) {
            status = gs__error_set(GS_ERR_SYSTEM,
                                   "gs_comm_grow: old rank %d could not create its "
                                   "new transport",
                                   p);
        } else {
            memcpy(s->addrs[p], b + 24, alen);
            s->addrs[p][alen] = '\0';
            s->hosts[p] = gs__get_le64(b + 16);
        }
    }
    if (status == GS_OK) {
        pthread_mutex_lock(&comm->grow.mu);
        lfd = comm->grow.fd;
        pthread_mutex_unlock(&comm->grow.mu);
        status = admit_joiners(s, lfd);
    }
    verdict = status;
    snprintf(s->why, sizeof(s->why), "%s", (status == GS_OK) ? "" : gs__error_get());
    reply_joiners(s, verdict);
    table_encode(table, verdict, s->new_size, s->why, s->addrs, s->hosts);
    for (int p = 1; p < n; p++) {
        (void)gs__algo_isend(&comm->actx, p, grow_tag(PH_TABLE, s->seq), table,
                             table_len(s->new_size), &reqs[p]);
    }
    (void)gs__comm_wait_each(comm, "gs_comm_grow", reqs, nbytes, st, n, s->deadline);
    if (verdict != GS_OK) {
        gs__error_copy_in(s->why);
    }
    return verdict;
}

/* An old rank but 0: START, endpoint, table. */
static gs_status_t grow_follow(grow_task_t *s, gs__algo_req_t *reqs, size_t *nbytes,
                               gs_status_t *st, uint8_t *msg, uint8_t *table)
{
    gs_comm_t comm = s->comm;
    const int n = comm->size;
    uint8_t start[START_BYTES];
    char my_addr[GS_SOCK_ADDR_MAX];
    gs_status_t status;
    gs_status_t local;

    status =
        gs__algo_irecv(&comm->actx, 0, grow_tag(PH_START, s->seq), start, sizeof(start), &reqs[0]);
    if (status == GS_OK) {
        status = old_wait(s, reqs, nbytes, st, "(rank 0) sent no start", 0);
    }
    if ((status == GS_OK) && ((nbytes[0] != START_BYTES) || (gs__get_le32(start) != START_MAGIC))) {
        status = gs__error_set(GS_ERR_PROTOCOL, "gs_comm_grow: rank 0 sent a malformed start");
    }
    if (status != GS_OK) {
        return status;
    }
    memcpy(s->nonce, start + 8, GS_AUTH_NONCE_BYTES);
    s->child->comm_id = grow_child_id(comm->comm_id, s->nonce);
    memset(my_addr, 0, sizeof(my_addr));
    local = gs__comm_transport_init(s->child);
    if (local == GS_OK) {
        local = gs__tp_get_address(&s->child->tr, my_addr, sizeof(my_addr));
    }
    if (local != GS_OK) {
        GS_WARN("gs_comm_grow: rank %d: new transport: %s", comm->rank, gs__error_get());
        my_addr[0] = '\0'; /* rank 0 fails the grow at once */
    }
    memset(msg, 0, ADDR_BYTES);
    gs__put_le32(msg, ADDR_MAGIC);
    gs__put_le32(msg + 4, (uint32_t)s->new_size);
    gs__put_le32(msg + 8, (uint32_t)strlen(my_addr));
    gs__put_le64(msg + 16, gs__host_id(comm->cfg.host_id));
    /* NOLINTNEXTLINE(bugprone-not-null-terminated-result): counted, not a C string. */
    memcpy(msg + 24, my_addr, strlen(my_addr));
    status = gs__algo_irecv(&comm->actx, 0, grow_tag(PH_TABLE, s->seq), table,
                            table_len(s->new_size), &reqs[0]);
    if (status == GS_OK) {
        status =
            gs__algo_isend(&comm->actx, 0, grow_tag(PH_ADDR, s->seq), msg, ADDR_BYTES, &reqs[1]);
    }
    if (status != GS_OK) {
        gs__algo_release_all(&comm->actx, reqs, (size_t)n);
        return status;
    }
    /* Rank 0 waits for the joiners up to the deadline: the table may take that long. */
    s->deadline += (uint64_t)comm->cfg.timeout_ms * 1000000ull;
    status = old_wait(s, reqs, nbytes, st, "(rank 0) sent no table", 0);
    if (status != GS_OK) {
        return status;
    }
    if ((nbytes[0] < TABLE_HDR_BYTES) || (gs__get_le32(table) != TABLE_MAGIC) ||
        (gs__get_le32(table + 8) != (uint32_t)s->new_size) ||
        (gs__get_le32(table + 12) >= GS_ERROR_MSG_MAX)) {
        return gs__error_set(GS_ERR_PROTOCOL, "gs_comm_grow: rank 0 sent a malformed table");
    }
    status = (gs_status_t)(int32_t)gs__get_le32(table + 4);
    if (status != GS_OK) {
        char why[GS_ERROR_MSG_MAX];
        const uint32_t len = gs__get_le32(table + 12);

        if ((status > 0) || (gs_status_scope(status) == GS_SCOPE_NONE)) {
            status = GS_ERR_PROTOCOL;
        }
        memcpy(why, table + TABLE_HDR_BYTES, len);
        why[len] = '\0';
        return gs__error_set(status, "%s (rank 0's verdict)", why);
    }
    if (nbytes[0] < TABLE_HDR_BYTES + (size_t)s->new_size * TABLE_ROW_BYTES) {
        return gs__error_set(GS_ERR_PROTOCOL, "gs_comm_grow: rank 0 sent a short table");
    }
    for (int q = 0; q < s->new_size; q++) {
        const uint8_t *row = table + TABLE_HDR_BYTES + (size_t)q * TABLE_ROW_BYTES;

        memcpy(s->addrs[q], row, GS_SOCK_ADDR_MAX);
        s->addrs[q][GS_SOCK_ADDR_MAX - 1] = '\0';
        s->hosts[q] = gs__get_le64(row + GS_SOCK_ADDR_MAX);
        if ((s->addrs[q][0] == '\0') || (s->hosts[q] == 0)) {
            return gs__error_set(GS_ERR_PROTOCOL,
                                 "gs_comm_grow: rank 0's table has no endpoint "
                                 "for rank %d",
                                 q);
        }
    }
    return GS_OK;
}

/* Runs on the old communicator's worker thread (or inline). */
static gs_status_t grow_run(gs__task_t *task, void *ctx)
{
    grow_task_t *s = (grow_task_t *)task;
    gs_comm_t comm = (gs_comm_t)ctx;
    const int n = comm->size;
    gs__algo_req_t *reqs = calloc((size_t)n, sizeof(*reqs));
    size_t *nbytes = calloc((size_t)n, sizeof(*nbytes));
    gs_status_t *st = calloc((size_t)n, sizeof(*st));
    uint8_t *inbox = calloc((size_t)n, ADDR_BYTES);
    uint8_t *table = calloc(1, table_len(s->new_size));
    gs_status_t status = GS_OK;

    comm->actx.opname = "gs_comm_grow";
    if ((reqs == NULL) || (nbytes == NULL) || (st == NULL) || (inbox == NULL) || (table == NULL)) {
        status = gs__error_set(GS_ERR_NO_MEMORY, "gs_comm_grow: out of memory");
        goto out;
    }
    if (comm->rank == 0) {
        uint8_t start[START_BYTES];
        char my_addr[GS_SOCK_ADDR_MAX];

        memset(start, 0, sizeof(start));
        gs__put_le32(start, START_MAGIC);
        gs__put_le32(start + 4, (uint32_t)s->new_size);
        memcpy(start + 8, s->nonce, GS_AUTH_NONCE_BYTES);
        for (int p = 1; p < n; p++) {
            (void)gs__algo_isend(&comm->actx, p, grow_tag(PH_START, s->seq), start, sizeof(start),
                                 &reqs[p]);
        }
        status = old_wait(s, reqs, nbytes, st, "took no start", -1);
        s->child->comm_id = grow_child_id(comm->comm_id, s->nonce);
        if (status == GS_OK) {
            status = gs__comm_transport_init(s->child);
        }
        if (status == GS_OK) {
            status = gs__tp_get_address(&s->child->tr, my_addr, sizeof(my_addr));
        }
        if (status == GS_OK) {
            snprintf(s->addrs[0], GS_SOCK_ADDR_MAX, "%s", my_addr);
            s->hosts[0] = gs__host_id(comm->cfg.host_id);
            /* Rank 0 waits for the joiners up to the deadline from here. */
            s->deadline = gs__deadline_after_ms(comm->cfg.timeout_ms);
            status = grow_lead(s, reqs, nbytes, st, inbox, table);
        } else {
            /* Tell the joiners and old ranks that wait. */
            snprintf(s->why, sizeof(s->why), "%s", gs__error_get());
            reply_joiners(s, status);
            table_encode(table, status, s->new_size, s->why, s->addrs, s->hosts);
            for (int p = 1; p < n; p++) {
                (void)gs__algo_isend(&comm->actx, p, grow_tag(PH_TABLE, s->seq), table,
                                     table_len(s->new_size), &reqs[p]);
            }
            (void)gs__comm_wait_each(comm, "gs_comm_grow", reqs, nbytes, st, n, s->deadline);
            gs__error_copy_in(s->why);
        }
    } else {
        status = grow_follow(s, reqs, nbytes, st, inbox, table);
    }
out:
    free(reqs);
    free(nbytes);
    free(st);
    free(inbox);
    free(table);
    return status;
}

gs_status_t gs_comm_grow(gs_comm_t comm, int new_size, const gs_unique_id_t *id,
                         const gs_config_t *cfg, gs_comm_t *newcomm_out)
{
    grow_task_t *s;
    gs_status_t status;

    if (newcomm_out == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_comm_grow: newcomm_out is NULL");
    }
    if (comm == NULL) {
        if (id == NULL) {
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "gs_comm_grow: a new rank (comm NULL) needs the id of rank 0's "
                                 "gs_comm_get_unique_id");
        }
        return grow_join(new_size, id, cfg, newcomm_out);
    }
    if (cfg != NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_comm_grow: cfg is for new ranks; an old rank passes NULL (the new "
                             "communicator has the configuration of comm)");
    }
    if ((new_size <= comm->size) || (new_size > GROW_SIZE_MAX)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_comm_grow: new_size %d must be above the size %d (and at most %d)",
                             new_size, comm->size, GROW_SIZE_MAX);
    }
    if (!gs__tp_has_peer_failed(&comm->tr)) {
        return gs__error_set(GS_ERR_UNSUPPORTED, "gs_comm_grow: transport %s cannot grow (use tcp)",
                             gs__tp_name(&comm->tr));
    }
    if (atomic_load(&comm->err.status) == GS_ERR_ABORTED) {
        return gs__error_set(GS_ERR_ABORTED, "gs_comm_grow: the communicator was aborted");
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "gs_comm_grow: out of memory");
    }
    if (comm->rank == 0) {
        grow_id_t g;

        status = (id != NULL) ? id_decode(id, &g) : GS_ERR_INVALID_USAGE;
        pthread_mutex_lock(&comm->grow.mu);
        if ((status == GS_OK) &&
            ((comm->grow.fd < 0) || (memcmp(g.nonce, comm->grow.nonce, GS_AUTH_NONCE_BYTES) != 0) ||
             (g.comm_id != comm->comm_id))) {
            status = GS_ERR_INVALID_USAGE;
        }
        memcpy(s->nonce, comm->grow.nonce, GS_AUTH_NONCE_BYTES);
        pthread_mutex_unlock(&comm->grow.mu);
        if (status == GS_ERR_INVALID_USAGE) {
            free(s);
            return gs__error_set(GS_ERR_INVALID_USAGE,
                                 "gs_comm_grow: rank 0 must pass the id its latest "
                                 "gs_comm_get_unique_id made on this communicator");
        }
        if (status != GS_OK) {
            free(s);
            return status;
        }
    }
    s->comm = comm;
    s->new_size = new_size;
    s->seq = atomic_fetch_add(&comm->split_seq, 1);
    s->deadline = gs__deadline_after_ms(comm->cfg.timeout_ms);
    s->addrs = calloc((size_t)new_size, GS_SOCK_ADDR_MAX);
    s->hosts = calloc((size_t)new_size, sizeof(*s->hosts));
    s->jfd = malloc((size_t)new_size * sizeof(*s->jfd));
    for (int r = 0; (s->jfd != NULL) && (r < new_size); r++) {
        s->jfd[r] = -1; /* set before any way out: the cleanup closes what is not -1 */
    }
    s->child = gs__comm_alloc();
    if ((s->addrs == NULL) || (s->hosts == NULL) || (s->jfd == NULL) || (s->child == NULL) ||
        (new_size - comm->size > GROW_PENDING_MAX)) {
        status = (s->child == NULL || s->addrs == NULL || s->hosts == NULL || s->jfd == NULL)
                     ? gs__error_set(GS_ERR_NO_MEMORY, "gs_comm_grow: out of memory")
                     : gs__error_set(GS_ERR_INVALID_ARG,
                                     "gs_comm_grow: at most %d new ranks at once (asked %d)",
                                     GROW_PENDING_MAX, new_size - comm->size);
        goto out;
    }
    s->child->cfg = comm->cfg;
    s->child->cfg.world_size = new_size;
    s->child->sel.policy = comm->sel.policy;
    s->child->job_id = comm->job_id;
    s->child->rank = comm->rank;
    s->child->size = new_size;
    s->task.run = grow_run;
    status = gs__worker_run_blocking(&comm->worker, &s->task);
    if (status == GS_OK) {
        GS_INFO(INIT, "grow: rank %d of %d -> of %d", comm->rank, comm->size, new_size);
        status = gs__comm_start(s->child, s->addrs, s->hosts);
    }
out:
    if (status == GS_OK) {
        *newcomm_out = s->child;
    } else if (s->child != NULL) {
        gs__comm_free(s->child); /* and its transport */
    }
    if (s->jfd != NULL) {
        for (int r = 0; r < new_size; r++) {
            if (s->jfd[r] >= 0) {
                (void)close(s->jfd[r]);
            }
        }
    }
    free(s->addrs);
    free(s->hosts);
    free(s->jfd);
    free(s);
    return status;
}
