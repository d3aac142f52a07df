/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The endpoint exchange through torchrun's store (bootstrap.h): under
 * torchrun, MASTER_ADDR:MASTER_PORT is the TCPStore its agent hosts, so
 * rank 0 cannot listen there. Every rank claims its rank (ADD) and sets its
 * hello (the rendezvous's encoding, address included) under a key of this
 * job; rank 0 reads them all, checks them as the rendezvous does and sets
 * the table (the rendezvous's encoding); the others read the table. Keys:
 * /gradsync/<TORCHELASTIC_RUN_ID>/<TORCHELASTIC_RESTART_COUNT>/<n>/..., n
 * counting this process's exchanges, so a restarted worker group or a
 * second communicator never reads an older table.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/bootstrap.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/host.h"
#include "core/kvstore.h"
#include "core/log.h"

#define STORE_PREFIX_MAX 256
#define STORE_MISSING_SHOWN 8 /* ranks named in a timeout */

static atomic_uint store_generation;

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);

    return ((v != NULL) && (v[0] != '\0')) ? v : dflt;
}

int gs__boot_store_applies(const gs__cfg_t *rcfg)
{
    const char *agent = env_or("TORCHELASTIC_USE_AGENT_STORE", "");
    gs__cfg_source_t port_src = gs__cfg_source_of(rcfg, "GS_MASTER_PORT");

    /* torchrun sets "True" when its agent hosts the store at MASTER_ADDR:MASTER_PORT; a
     * GS_MASTER_PORT (or the caller's port) names a rendezvous port of gradsync's own. */
    return ((strcasecmp(agent, "true") == 0) || (strcmp(agent, "1") == 0)) &&
           (port_src != GS_CFG_SRC_ENV) && (port_src != GS_CFG_SRC_CALLER);
}

typedef struct store_ex {
    const gs__cfg_t *cfg;
    gs__kv_t kv;
    char prefix[STORE_PREFIX_MAX];
    uint64_t deadline;
} store_ex_t;

static void store_key(const store_ex_t *x, char *key, size_t cap, const char *what, int rank)
{
    if (rank >= 0) {
        (void)snprintf(key, cap, "%s%s/%d", x->prefix, what, rank);
    } else {
        (void)snprintf(key, cap, "%s%s", x->prefix, what);
    }
}

/* This rank's hello: claim the rank first, so a second process with the same rank fails. */
static gs_status_t store_publish(store_ex_t *x, const char *my_addr)
{
    const gs__cfg_t *cfg = x->cfg;
    uint8_t hello[GS_BOOT_HELLO_BYTES + GS_SOCK_ADDR_MAX];
    char key[GS_KV_KEY_MAX];
    gs__boot_hello_t h;
    size_t alen = strlen(my_addr);
    int64_t claims = 0;
    gs_status_t st;

    if ((alen == 0) || (alen >= GS_SOCK_ADDR_MAX)) {
        return gs__error_set(GS_ERR_INTERNAL, "transport address '%s' has a bad length", my_addr);
    }
    store_key(x, key, sizeof(key), "claim", cfg->rank);
    st = gs__kv_add(&x->kv, key, 1, &claims, x->deadline);
    if (st != GS_OK) {
        return st;
    }
    if (claims != 1) {
        return gs__error_set(GS_ERR_MISMATCH,
                             "rank %d joined twice: another process claimed it first in torchrun's "
                             "store at %s (key %s): does every process have its own RANK?",
                             cfg->rank, x->kv.where, key);
    }
    gs__boot_hello_init(&h, cfg, alen);
    gs__boot_hello_encode(&h, hello);
    /* NOLINTNEXTLINE(bugprone-not-null-terminated-result): counted (addr_len), not a C string. */
    memcpy(hello + GS_BOOT_HELLO_BYTES, my_addr, alen);
    store_key(x, key, sizeof(key), "hello", cfg->rank);
    return gs__kv_set(&x->kv, key, hello, GS_BOOT_HELLO_BYTES + alen, x->deadline);
}

/* Rank 0, at its deadline: name the ranks whose hello is still missing. */
static void store_name_missing(store_ex_t *x, int from, char *out, size_t cap)
{
    const uint64_t quick = gs__deadline_after_ms(2000);
    size_t n = 0;
    int shown = 0, missing = 0;

    out[0] = '\0';
    for (int r = from; r < x->cfg->world_size; r++) {
        char key[GS_KV_KEY_MAX];
        int exists = 1;

        store_key(x, key, sizeof(key), "hello", r);
        if (gs__kv_check(&x->kv, key, &exists, quick) != GS_OK) {
            break; /* the store is gone too: say what is known */
        }
        if (exists) {
            continue;
        }
        missing++;
        if ((shown < STORE_MISSING_SHOWN) && (n < cap)) {
            n += (size_t)snprintf(out + n, cap - n, "%s%d", shown ? ", " : "", r);
            shown++;
        }
    }
    if ((missing > shown) && (n < cap)) {
        (void)snprintf(out + n, cap - n, " and %d more", missing - shown);
    }
}

/* Rank 0: every hello, checked as the rendezvous checks them. Sets msg on a failure that every
 * rank must report. */
static gs_status_t store_collect(store_ex_t *x, char (*addrs)[GS_SOCK_ADDR_MAX], uint64_t *hosts,
                                 char *msg, size_t cap)
{
    const gs__cfg_t *cfg = x->cfg;

    for (int r = 1; r < cfg->world_size; r++) {
        char key[GS_KV_KEY_MAX];
        gs__boot_hello_t h;
        void *val = NULL;
        size_t len = 0;
        gs_status_t st;

        store_key(x, key, sizeof(key), "hello", r);
        st = gs__kv_get(&x->kv, key, GS_BOOT_HELLO_BYTES + GS_SOCK_ADDR_MAX, &val, &len,
                        x->deadline);
        if (st == GS_ERR_TIMEOUT) {
            char missing[160];

            store_name_missing(x, r, missing, sizeof(missing));
            (void)snprintf(msg, cap,
                           "rank 0 waited %d ms in torchrun's store at %s for rank%s %s of %d to "
                           "publish its address: are they running, in the same torchrun job?",
                           cfg->timeout_ms, x->kv.where, strchr(missing, ',') ? "s" : "",
                           missing[0] ? missing : "(unknown)", cfg->world_size);
            return gs__error_set(GS_ERR_TIMEOUT, "%s", msg);
        }
        if (st != GS_OK) {
            return st;
        }
        st = gs__boot_hello_decode(val, len, &h);
        if ((st == GS_OK) && (len != GS_BOOT_HELLO_BYTES + h.addr_len)) {
            st = gs__error_set(GS_ERR_PROTOCOL, "its hello is %zu bytes, expected %u", len,
                               GS_BOOT_HELLO_BYTES + h.addr_len);
        }
        if (st != GS_OK) {
            (void)snprintf(msg, cap, "rank %d's hello in torchrun's store at %s is malformed: %s",
                           r, x->kv.where, gs__error_get());
        } else if (h.job_hash != gs__boot_job_hash(cfg)) {
            st = GS_ERR_MISMATCH;
            (void)snprintf(msg, cap, "rank %d belongs to another job (GS_JOB_ID differs)", r);
        } else if (((int)h.world != cfg->world_size) || ((int)h.rank != r)) {
            st = GS_ERR_MISMATCH;
            (void)snprintf(msg, cap,
                           "ranks disagree on the world size: rank %u says %u, rank 0 says %d",
                           h.rank, h.world, cfg->world_size);
        } else {
            memcpy(addrs[r], (const uint8_t *)val + GS_BOOT_HELLO_BYTES, h.addr_len);
            addrs[r][h.addr_len] = '\0';
            hosts[r] = h.host_id;
        }
        free(val);
        if (st != GS_OK) {
            return gs__error_set(st, "%s", msg);
        }
    }
    return GS_OK;
}

/* Rank 0: the table (status GS_OK and every row), or the failure every rank reports. */
static gs_status_t store_set_table(store_ex_t *x, gs_status_t status, const char *msg,
                                   char (*addrs)[GS_SOCK_ADDR_MAX], const uint64_t *hosts,
                                   uint64_t nonce)
{
    const int world = x->cfg->world_size;
    const size_t cap = GS_BOOT_TABLE_HDR_BYTES + GS_BOOT_MSG_MAX +
                       (size_t)world * (GS_BOOT_ENTRY_BYTES + GS_SOCK_ADDR_MAX);
    gs__boot_table_hdr_t t = {.status = (int32_t)status, .nonce = nonce};
    char key[GS_KV_KEY_MAX];
    uint8_t *buf = malloc(cap);
    size_t n = GS_BOOT_TABLE_HDR_BYTES;
    gs_status_t st;

    if (buf == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "store bootstrap: out of memory for %d ranks",
                             world);
    }
    if (status == GS_OK) {
        t.world = (uint32_t)world;
        for (int r = 0; r < world; r++) {
            uint32_t alen = (uint32_t)strlen(addrs[r]);

            gs__boot_entry_encode(alen, hosts[r], buf + n);
            n += GS_BOOT_ENTRY_BYTES;
            memcpy(buf + n, addrs[r], alen);
            n += alen;
        }
    } else {
        size_t mlen = strlen(msg);

        t.msg_len = (uint32_t)((mlen < GS_BOOT_MSG_MAX) ? mlen : GS_BOOT_MSG_MAX - 1);
        memcpy(buf + n, msg, t.msg_len);
        n += t.msg_len;
    }
    gs__boot_table_hdr_encode(&t, buf);
    store_key(x, key, sizeof(key), "table", -1);
    /* A failure is published with a deadline of its own: rank 0's may have passed. */
    st = gs__kv_set(&x->kv, key, buf, n,
                    (status == GS_OK) ? x->deadline : gs__deadline_after_ms(2000));
    free(buf);
    return st;
}

/* The other ranks: read and decode the table. */
static gs_status_t store_read_table(store_ex_t *x, char (*addrs)[GS_SOCK_ADDR_MAX], uint64_t *hosts,
                                    uint64_t *nonce_out)
{
    const gs__cfg_t *cfg = x->cfg;
    const size_t cap = GS_BOOT_TABLE_HDR_BYTES + GS_BOOT_MSG_MAX +
                       (size_t)cfg->world_size * (GS_BOOT_ENTRY_BYTES + GS_SOCK_ADDR_MAX);
    char key[GS_KV_KEY_MAX];
    gs__boot_table_hdr_t t;
    void *val = NULL;
    size_t len = 0, off = GS_BOOT_TABLE_HDR_BYTES;
    gs_status_t st;

    store_key(x, key, sizeof(key), "table", -1);
    /* Rank 0 publishes a timeout of its own at its deadline: wait a little longer for it. */
    st = gs__kv_get(&x->kv, key, cap, &val, &len, x->deadline + 5000000000ull);
    if (st == GS_ERR_TIMEOUT) {
        return gs__error_set(GS_ERR_TIMEOUT,
                             "rank %d waited %d ms in torchrun's store at %s for rank 0's table "
                             "of addresses: is rank 0 running, in the same torchrun job?",
                             cfg->rank, cfg->timeout_ms, x->kv.where);
    }
    if (st != GS_OK) {
        return st;
    }
    const uint8_t *b = val;
    st = gs__boot_table_hdr_decode(b, len, &t);
    if ((st == GS_OK) && (t.status != GS_OK)) {
        char msg[GS_BOOT_MSG_MAX];
        size_t m = (t.msg_len < len - off) ? t.msg_len : len - off;

        memcpy(msg, b + off, m);
        msg[m] = '\0';
        st = gs__error_set((gs_status_t)t.status, "rank 0 refused rank %d: %s", cfg->rank, msg);
    } else if ((st == GS_OK) && ((int)t.world != cfg->world_size)) {
        st = gs__error_set(GS_ERR_MISMATCH,
                           "ranks disagree on the world size: rank 0's table has %u ranks, rank "
                           "%d says %d",
                           t.world, cfg->rank, cfg->world_size);
    }
    for (int r = 0; (st == GS_OK) && (r < cfg->world_size); r++) {
        uint32_t alen = 0;

        st = gs__boot_entry_decode(b + off, len - off, &alen, &hosts[r]);
        off += GS_BOOT_ENTRY_BYTES;
        if ((st == GS_OK) && (alen > len - off)) {
            st = gs__error_set(GS_ERR_PROTOCOL, "the table ends inside rank %d's address", r);
        }
        if (st == GS_OK) {
            memcpy(addrs[r], b + off, alen);
            addrs[r][alen] = '\0';
            off += alen;
        } else if (st == GS_ERR_PROTOCOL) {
            st = gs__error_wrap(st, "torchrun's store at %s: rank 0's table: %s", x->kv.where,
                                gs__error_get());
        }
    }
    free(val);
    if (st == GS_OK) {
        *nonce_out = t.nonce;
    }
    return st;
}

gs_status_t gs__bootstrap_store_exchange(const gs__cfg_t *cfg, const gs__auth_t *auth,
                                         const volatile int *abort_flag, const char *my_addr,
                                         char (*addrs_out)[GS_SOCK_ADDR_MAX], uint64_t *hosts_out,
                                         uint64_t *nonce_out)
{
    store_ex_t x;
    unsigned gen = atomic_fetch_add(&store_generation, 1u);
    gs_status_t st;

    (void)auth; /* every transport connection authenticates; the store is torch's */
    if (cfg->world_size == 1) {
        return gs__bootstrap_exchange(cfg, auth, abort_flag, my_addr, addrs_out, hosts_out,
                                      nonce_out);
    }
    memset(&x, 0, sizeof(x));
    x.cfg = cfg;
    x.deadline = gs__deadline_after_ms(cfg->timeout_ms);
    (void)snprintf(x.prefix, sizeof(x.prefix), "/gradsync/%s/%s/%u/",
                   env_or("TORCHELASTIC_RUN_ID", "none"), env_or("TORCHELASTIC_RESTART_COUNT", "0"),
                   gen);
    gs__sock_watch_abort(abort_flag);
    st = gs__kv_connect(&x.kv, cfg->master_addr, cfg->master_port, cfg->socket_family, x.deadline);
    if (st == GS_ERR_TIMEOUT) {
        st = gs__error_wrap(st,
                            "rank %d could not reach torchrun's store (MASTER_ADDR:MASTER_PORT): "
                            "%s; set GS_MASTER_PORT to bootstrap through a rendezvous port of "
                            "gradsync's own instead",
                            cfg->rank, gs__error_get());
    }
    if (st == GS_OK) {
        GS_INFO(BOOT, "bootstrapping through torchrun's store at %s (keys %s)", x.kv.where,
                x.prefix);
        st = store_publish(&x, my_addr);
    }
    if ((st == GS_OK) && (cfg->rank == 0)) {
        char msg[GS_ERROR_MSG_MAX] = "";
        uint64_t nonce = 0;

        (void)snprintf(addrs_out[0], GS_SOCK_ADDR_MAX, "%s", my_addr);
        hosts_out[0] = gs__host_id(cfg->host_id);
        st = store_collect(&x, addrs_out, hosts_out, msg, sizeof(msg));
        if (st == GS_OK) {
            nonce = gs__boot_job_nonce();
            st = store_set_table(&x, GS_OK, NULL, addrs_out, hosts_out, nonce);
            *nonce_out = nonce;
        } else if (msg[0] != '\0') {
            char keep[GS_ERROR_MSG_MAX];

            (void)snprintf(keep, sizeof(keep), "%s", gs__error_get());
            (void)store_set_table(&x, st, msg, NULL, NULL, 0);
            (void)gs__error_set(st, "%s", keep);
        }
    } else if (st == GS_OK) {
        st = store_read_table(&x, addrs_out, hosts_out, nonce_out);
    }
    gs__kv_close(&x.kv);
    gs__sock_watch_abort(NULL);
    return st;
}
