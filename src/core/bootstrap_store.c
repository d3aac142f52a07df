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
 *
 * The same exchange serves an explicit store (GS_STORE=host:port/prefix,
 * torch's TCPStore or gradsync's own, core/kvserver.h) under keys
 * /<prefix>/<epoch>/... (GS_STORE_EPOCH), with the epoch rule: the store
 * keeps /<prefix>/epoch, the highest epoch begun. Every rank reads it first
 * and a rank whose epoch is lower fails at once with GS_ERR_MISMATCH,
 * having written nothing; rank 0 raises it to its epoch (compare-set, never
 * lowering it). A rank that times out reads it again, so that its error
 * says "stale" when the job moved on while it waited.
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

#define STORE_PREFIX_MAX 320
#define STORE_EPOCH_TEXT_MAX 16 /* a decimal int and more: not an epoch */
#define STORE_RAISE_TRIES 64    /* compare-set rounds lost to other rank 0s */
#define STORE_MISSING_SHOWN 8   /* ranks named in a timeout */

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

int gs__boot_kv_applies(const gs__cfg_t *rcfg)
{
    return rcfg->store[0] != '\0';
}

typedef struct store_ex {
    const gs__cfg_t *cfg;
    gs__kv_t kv;
    char prefix[STORE_PREFIX_MAX];
    const char *label; /* "torchrun's store", "the store" */
    const char *same;  /* what the ranks must share: "the same torchrun job" */
    /* GS_STORE only: the epoch's key ("" without one), this rank's epoch, the store's name */
    char epoch_key[STORE_PREFIX_MAX];
    int epoch;
    char spec[GS_CFG_STR_MAX];
    const char *host;
    int port;
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
                             "rank %d joined twice: another process claimed it first in %s at %s "
                             "(key %s): does every process have its own RANK%s?",
                             cfg->rank, x->label, x->kv.where, key,
                             (x->epoch_key[0] != '\0')
                                 ? ", and does every new configuration of the job use a higher "
                                   "GS_STORE_EPOCH"
                                 : "");
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
                           "rank 0 waited %d ms in %s at %s for rank%s %s of %d to "
                           "publish its address: are they running, in %s?",
                           cfg->timeout_ms, x->label, x->kv.where, strchr(missing, ',') ? "s" : "",
                           missing[0] ? missing : "(unknown)", cfg->world_size, x->same);
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
            (void)snprintf(msg, cap, "rank %d's hello in %s at %s is malformed: %s", r, x->label,
                           x->kv.where, gs__error_get());
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
                             "rank %d waited %d ms in %s at %s for rank 0's table "
                             "of addresses: is rank 0 running, in %s?",
                             cfg->rank, cfg->timeout_ms, x->label, x->kv.where, x->same);
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
            st = gs__error_wrap(st, "%s at %s: rank 0's table: %s", x->label, x->kv.where,
                                gs__error_get());
        }
    }
    free(val);
    if (st == GS_OK) {
        *nonce_out = t.nonce;
    }
    return st;
}

/* This rank's view of the epoch: *m_out the store's (-1: none begun). Reads only. */
static gs_status_t store_epoch_read(store_ex_t *x, int *m_out, uint64_t deadline)
{
    void *val = NULL;
    size_t len = 0;
    int exists = 0;
    gs_status_t st = gs__kv_check(&x->kv, x->epoch_key, &exists, deadline);

    *m_out = -1;
    if ((st != GS_OK) || !exists) {
        return st;
    }
    st = gs__kv_get(&x->kv, x->epoch_key, STORE_EPOCH_TEXT_MAX, &val, &len, deadline);
    if (st != GS_OK) {
        return st;
    }
    st = gs__boot_epoch_parse(val, len, m_out);
    free(val);
    if (st != GS_OK) {
        return gs__error_set(st,
                             "the store at %s: key %s holds no epoch (a decimal integer >= 0): "
                             "another program uses the prefix %s; choose another prefix in "
                             "GS_STORE",
                             x->kv.where, x->epoch_key, x->spec);
    }
    return GS_OK;
}

static gs_status_t store_epoch_stale(const store_ex_t *x, int m)
{
    return gs__error_set(GS_ERR_MISMATCH,
                         "epoch %d is stale: the job at %s is at epoch %d; start this rank with "
                         "GS_STORE_EPOCH=%d or later",
                         x->epoch, x->spec, m, m);
}

/* Rank 0: raise the store's epoch to this rank's (never lower it). A compare-set loop: another
 * rank 0 (of a later epoch) may raise it between our read and our write. */
static gs_status_t store_epoch_raise(store_ex_t *x, int m)
{
    char want[STORE_EPOCH_TEXT_MAX], have[STORE_EPOCH_TEXT_MAX];

    (void)snprintf(want, sizeof(want), "%d", x->epoch);
    for (int tries = 0; tries < STORE_RAISE_TRIES; tries++) {
        void *val = NULL;
        size_t len = 0;
        gs_status_t st;

        if (m > x->epoch) {
            return store_epoch_stale(x, m);
        }
        if (m == x->epoch) {
            return GS_OK;
        }
        if (m < 0) {
            have[0] = '\0'; /* none begun: torch's compare-set sets a missing key to desired */
        } else {
            (void)snprintf(have, sizeof(have), "%d", m);
        }
        st = gs__kv_compare_set(&x->kv, x->epoch_key, have, strlen(have), want, strlen(want),
                                STORE_EPOCH_TEXT_MAX, &val, &len, x->deadline);
        if (st != GS_OK) {
            return st;
        }
        st = gs__boot_epoch_parse(val, len, &m);
        free(val);
        if (st != GS_OK) {
            return gs__error_set(st, "the store at %s: key %s holds no epoch after compare-set",
                                 x->kv.where, x->epoch_key);
        }
    }
    return gs__error_set(GS_ERR_TIMEOUT,
                         "rank 0 could not raise the epoch of %s to %d in %d tries: other rank 0s "
                         "keep changing it; is more than one job using this prefix?",
                         x->spec, x->epoch, STORE_RAISE_TRIES);
}

/* After a timeout: when the job moved to a later epoch meanwhile, say so instead. The timed-out
 * WAIT is still parked in the store (a connection is not reused after a timeout), so the epoch
 * is read over a connection of its own. */
static gs_status_t store_epoch_recheck(store_ex_t *x, gs_status_t st)
{
    const uint64_t quick = gs__deadline_after_ms(2000);
    char keep[GS_ERROR_MSG_MAX];
    int m = -1;

    if ((st != GS_ERR_TIMEOUT) || (x->epoch_key[0] == '\0')) {
        return st;
    }
    (void)snprintf(keep, sizeof(keep), "%s", gs__error_get());
    gs__kv_close(&x->kv);
    if ((gs__kv_connect(&x->kv, x->host, x->port, x->cfg->socket_family, quick) == GS_OK) &&
        (store_epoch_read(x, &m, quick) == GS_OK) && (m > x->epoch)) {
        return store_epoch_stale(x, m);
    }
    return gs__error_set(st, "%s", keep); /* the timeout, as it was */
}

/* Both paths: connect to the store, (GS_STORE) check the epoch, and exchange. */
static gs_status_t store_exchange(store_ex_t *x, const char *host, int port,
                                  const volatile int *abort_flag, const char *my_addr,
                                  char (*addrs_out)[GS_SOCK_ADDR_MAX], uint64_t *hosts_out,
                                  uint64_t *nonce_out)
{
    const gs__cfg_t *cfg = x->cfg;
    gs_status_t st;

    x->host = host;
    x->port = port;
    gs__sock_watch_abort(abort_flag);
    st = gs__kv_connect(&x->kv, host, port, cfg->socket_family, x->deadline);
    if ((st == GS_ERR_TIMEOUT) && (x->epoch_key[0] == '\0')) {
        st = gs__error_wrap(st,
                            "rank %d could not reach torchrun's store (MASTER_ADDR:MASTER_PORT): "
                            "%s; set GS_MASTER_PORT to bootstrap through a rendezvous port of "
                            "gradsync's own instead",
                            cfg->rank, gs__error_get());
    } else if (st == GS_ERR_TIMEOUT) {
        st = gs__error_wrap(st,
                            "rank %d could not reach the store of GS_STORE=%s: %s; is it running "
                            "(gsrun --store, or torch's TCPStore), and reachable from this host?",
                            cfg->rank, x->spec, gs__error_get());
    }
    if ((st == GS_OK) && (x->epoch_key[0] != '\0')) {
        int m = -1;

        /* Read before writing anything: a stale rank leaves the store as it found it. */
        st = store_epoch_read(x, &m, x->deadline);
        if ((st == GS_OK) && (m > x->epoch)) {
            st = store_epoch_stale(x, m);
        } else if ((st == GS_OK) && (cfg->rank == 0)) {
            st = store_epoch_raise(x, m);
        }
    }
    if (st == GS_OK) {
        GS_INFO(BOOT, "bootstrapping through %s at %s (keys %s)", x->label, x->kv.where, x->prefix);
        st = store_publish(x, my_addr);
    }
    if ((st == GS_OK) && (cfg->rank == 0)) {
        char msg[GS_ERROR_MSG_MAX] = "";
        uint64_t nonce = 0;

        (void)snprintf(addrs_out[0], GS_SOCK_ADDR_MAX, "%s", my_addr);
        hosts_out[0] = gs__host_id(cfg->host_id);
        st = store_collect(x, addrs_out, hosts_out, msg, sizeof(msg));
        if (st == GS_OK) {
            nonce = gs__boot_job_nonce();
            st = store_set_table(x, GS_OK, NULL, addrs_out, hosts_out, nonce);
            *nonce_out = nonce;
        } else if (msg[0] != '\0') {
            char keep[GS_ERROR_MSG_MAX];

            (void)snprintf(keep, sizeof(keep), "%s", gs__error_get());
            (void)store_set_table(x, st, msg, NULL, NULL, 0);
            (void)gs__error_set(st, "%s", keep);
        }
        st = store_epoch_recheck(x, st);
    } else if (st == GS_OK) {
        st = store_read_table(x, addrs_out, hosts_out, nonce_out);
        st = store_epoch_recheck(x, st);
    }
    gs__kv_close(&x->kv);
    gs__sock_watch_abort(NULL);
    return st;
}

gs_status_t gs__boot_epoch_parse(const void *text, size_t len, int *epoch_out)
{
    const char *t = text;
    long long v = 0;

    if ((len == 0) || (len >= STORE_EPOCH_TEXT_MAX)) {
        return GS_ERR_PROTOCOL;
    }
    for (size_t i = 0; i < len; i++) {
        if ((t[i] < '0') || (t[i] > '9')) {
            return GS_ERR_PROTOCOL;
        }
        v = v * 10 + (t[i] - '0');
        if (v > 2147483647LL) {
            return GS_ERR_PROTOCOL;
        }
    }
    *epoch_out = (int)v;
    return GS_OK;
}

gs_status_t gs__bootstrap_store_exchange(const gs__cfg_t *cfg, const gs__auth_t *auth,
                                         const volatile int *abort_flag, const char *my_addr,
                                         char (*addrs_out)[GS_SOCK_ADDR_MAX], uint64_t *hosts_out,
                                         uint64_t *nonce_out)
{
    store_ex_t x;
    unsigned gen = atomic_fetch_add(&store_generation, 1u);

    (void)auth; /* every transport connection authenticates; the store is torch's */
    if (cfg->world_size == 1) {
        return gs__bootstrap_exchange(cfg, auth, abort_flag, my_addr, addrs_out, hosts_out,
                                      nonce_out);
    }
    memset(&x, 0, sizeof(x));
    x.cfg = cfg;
    x.label = "torchrun's store";
    x.same = "the same torchrun job";
    x.deadline = gs__deadline_after_ms(cfg->timeout_ms);
    (void)snprintf(x.prefix, sizeof(x.prefix), "/gradsync/%s/%s/%u/",
                   env_or("TORCHELASTIC_RUN_ID", "none"), env_or("TORCHELASTIC_RESTART_COUNT", "0"),
                   gen);
    return store_exchange(&x, cfg->master_addr, cfg->master_port, abort_flag, my_addr, addrs_out,
                          hosts_out, nonce_out);
}

gs_status_t gs__bootstrap_kv_exchange(const gs__cfg_t *cfg, const gs__auth_t *auth,
                                      const volatile int *abort_flag, const char *my_addr,
                                      char (*addrs_out)[GS_SOCK_ADDR_MAX], uint64_t *hosts_out,
                                      uint64_t *nonce_out)
{
    store_ex_t x;
    char host[GS_KV_HOST_MAX], prefix[GS_KV_PREFIX_MAX], why[128];
    int port = 0;

    (void)auth; /* every transport connection authenticates; the store is not gradsync's */
    memset(&x, 0, sizeof(x));
    if (gs__kv_parse_spec(cfg->store, host, &port, prefix, why, sizeof(why)) != GS_OK) {
        /* gs__cfg_resolve checked it: only a caller that skipped it gets here */
        return gs__error_set(GS_ERR_INVALID_ARG, "GS_STORE=\"%.64s\" %s", cfg->store, why);
    }
    x.cfg = cfg;
    x.label = "the store";
    x.same = "the same job, with the same GS_STORE and GS_STORE_EPOCH";
    x.epoch = cfg->store_epoch;
    x.deadline = gs__deadline_after_ms(cfg->timeout_ms);
    (void)snprintf(x.spec, sizeof(x.spec), "%s", cfg->store);
    (void)snprintf(x.prefix, sizeof(x.prefix), "/%s/%d/", prefix, cfg->store_epoch);
    (void)snprintf(x.epoch_key, sizeof(x.epoch_key), "/%s/epoch", prefix);
    return store_exchange(&x, host, port, abort_flag, my_addr, addrs_out, hosts_out, nonce_out);
}
