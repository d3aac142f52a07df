/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Keys of the parameter server: the registry (an open-addressing table by
 * key id, read by the callers' threads and rx, written by registration) and
 * the collective gs_ps_register: every rank's arguments compared, the
 * placement computed (ps_shard.c), the shards this rank serves allocated,
 * rank 0's initial values sent to their servers, and a barrier so that no
 * rank pushes a key another rank does not know yet. Runs its collectives on
 * the second private communicator (ccomm).
 */
#include "ps/ps_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/log.h"

/* ====================================================================== */
/* Registry                                                               */
/* ====================================================================== */

static size_t key_hash(uint64_t key, size_t cap)
{
    return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 17) & (cap - 1);
}

static gs__ps_key_t *slots_find(gs__ps_key_t **slots, size_t cap, uint64_t key)
{
    if (cap == 0) {
        return NULL;
    }
    for (size_t i = key_hash(key, cap);; i = (i + 1) & (cap - 1)) {
        if (slots[i] == NULL) {
            return NULL;
        }
        if (slots[i]->key == key) {
            return slots[i];
        }
    }
}

gs__ps_key_t *gs__ps_key_find(gs_ps_t ps, uint64_t key)
{
    gs__ps_key_t *k;

    pthread_rwlock_rdlock(&ps->reg.lock);
    k = slots_find(ps->reg.slots, ps->reg.cap, key);
    pthread_rwlock_unlock(&ps->reg.lock);
    return k;
}

/* Insert under the write lock; grows the table at half load. */
static gs_status_t registry_insert(gs_ps_t ps, gs__ps_key_t *k)
{
    gs__ps_registry_t *reg = &ps->reg;
    gs_status_t status = GS_OK;

    pthread_rwlock_wrlock(&reg->lock);
    if (2 * (reg->nkeys + 1) > reg->cap) {
        const size_t ncap = (reg->cap == 0) ? 64 : 2 * reg->cap;
        gs__ps_key_t **ns = calloc(ncap, sizeof(*ns));

        if (ns == NULL) {
            status =
                gs__error_set(GS_ERR_NO_MEMORY, "gs_ps_register: out of memory for the key table");
            goto out_unlock;
        }
        for (size_t i = 0; i < reg->cap; i++) {
            if (reg->slots[i] != NULL) {
                size_t j = key_hash(reg->slots[i]->key, ncap);

                while (ns[j] != NULL) {
                    j = (j + 1) & (ncap - 1);
                }
                ns[j] = reg->slots[i];
            }
        }
        free(reg->slots);
        reg->slots = ns;
        reg->cap = ncap;
    }
    if (reg->nserved + k->nshards > reg->served_cap) {
        const size_t ncap = 2 * (reg->nserved + k->nshards) + 16;
        gs__ps_shard_t **nv = realloc(reg->served, ncap * sizeof(*nv));

        if (nv == NULL) {
            status =
                gs__error_set(GS_ERR_NO_MEMORY, "gs_ps_register: out of memory for the shard list");
            goto out_unlock;
        }
        reg->served = nv;
        reg->served_cap = ncap;
    }
    {
        size_t j = key_hash(k->key, reg->cap);

        while (reg->slots[j] != NULL) {
            j = (j + 1) & (reg->cap - 1);
        }
        reg->slots[j] = k;
        reg->nkeys++;
    }
    for (uint32_t i = 0; i < k->nshards; i++) {
        if (k->served[i] != NULL) {
            reg->served[reg->nserved++] = k->served[i];
            reg->served_bytes += k->served[i]->bytes;
            reg->served_wire += k->served[i]->wire_cap;
        }
    }
out_unlock:
    pthread_rwlock_unlock(&reg->lock);
    return status;
}

static void shard_free(gs__ps_shard_t *s)
{
    gs__ps_buf_t *b;

    if (s == NULL) {
        return;
    }
    while ((b = s->pool) != NULL) {
        s->pool = b->next;
        free(b->data);
        free(b);
    }
    free(s->w);
    free(s->opt.m);
    free(s->opt.v);
    free(s->acc);
    free(s->pushed);
    free(s->kept);
    free(s->pushed_clock);
    free(s);
}

static void key_free(gs__ps_key_t *k)
{
    if (k == NULL) {
        return;
    }
    for (uint32_t i = 0; i < k->nshards; i++) {
        if (k->served != NULL) {
            shard_free(k->served[i]);
        }
        if (k->ef != NULL) {
            (void)gs_ef_destroy(k->ef[i]);
        }
    }
    pthread_mutex_destroy(&k->mu);
    free(k->ranges);
    free(k->server_rank);
    free(k->served);
    free(k->ef);
    free(k);
}

void gs__ps_registry_free(gs_ps_t ps)
{
    for (size_t i = 0; i < ps->reg.cap; i++) {
        key_free(ps->reg.slots[i]);
    }
    free(ps->reg.slots);
    free(ps->reg.served);
    free(ps->reg.placer.load);
    ps->reg.slots = NULL;
    ps->reg.served = NULL;
    ps->reg.placer.load = NULL;
    ps->reg.cap = 0;
}

/* ====================================================================== */
/* Register                                                               */
/* ====================================================================== */

/* What each rank passes to gs_ps_register, compared across ranks. */
typedef struct ps_reg_rec {
    uint64_t key;
    uint64_t count;
    uint32_t dtype;
    uint32_t flags; /* REC_INIT, REC_BAD */
} ps_reg_rec_t;

#define REC_INIT 1u
#define REC_BAD 2u

static gs__ps_shard_t *shard_alloc(gs_ps_t ps, gs__ps_key_t *k, uint32_t i)
{
    const gs__ps_range_t *r = &k->ranges[i];
    const size_t asize = gs__dtype_size(gs__ps_acc_dtype(k->dtype));
    const int nw = ps->roles.nworkers;
    const int nstate = gs__ps_rule_nstate(&ps->cfg.rule);
    gs__ps_shard_t *s = calloc(1, sizeof(*s));

    if (s == NULL) {
        return NULL;
    }
    s->key = k;
    s->index = i;
    s->offset = r->offset;
    s->count = r->count;
    s->bytes = r->count * k->esize;
    if (ps->cfg.has_codec &&
        (gs_codec_encoded_size(&ps->cfg.codec, r->count, k->dtype, &s->max_encoded) != GS_OK)) {
        free(s);
        return NULL;
    }
    s->wire_cap = (s->max_encoded > s->bytes) ? s->max_encoded : s->bytes;
    s->w = calloc(r->count, k->esize);
    s->pushed = calloc((size_t)nw, 1);
    s->kept = calloc((size_t)nw, 1);
    s->pushed_clock = malloc((size_t)nw * sizeof(int64_t));
    if (ps->cfg.consistency == GS_PS_BSP) {
        s->acc = malloc(r->count * asize);
    }
    if (nstate >= 1) {
        s->opt.m = calloc(r->count, asize);
    }
    if (nstate >= 2) {
        s->opt.v = calloc(r->count, asize);
    }
    if ((s->w == NULL) || (s->pushed == NULL) || (s->kept == NULL) || (s->pushed_clock == NULL) ||
        ((ps->cfg.consistency == GS_PS_BSP) && (s->acc == NULL)) ||
        ((nstate >= 1) && (s->opt.m == NULL)) || ((nstate >= 2) && (s->opt.v == NULL))) {
        shard_free(s);
        return NULL;
    }
    for (int w = 0; w < nw; w++) {
        s->pushed_clock[w] = -1;
    }
    return s;
}

/* Build the key: placement, shards this rank serves, error feedback. */
static gs_status_t key_build(gs_ps_t ps, uint64_t key, size_t count, gs_dtype_t dtype,
                             gs__ps_key_t **k_out)
{
    gs__ps_key_t *k = calloc(1, sizeof(*k));
    gs__ps_placer_t trial = ps->reg.placer;
    uint64_t *load = malloc((size_t)ps->roles.nservers * sizeof(uint64_t));
    size_t n;

    if ((k == NULL) || (load == NULL)) {
        free(k);
        free(load);
        return gs__error_set(GS_ERR_NO_MEMORY, "gs_ps_register: out of memory");
    }
    pthread_mutex_init(&k->mu, NULL);
    k->key = key;
    k->count = count;
    k->dtype = dtype;
    k->esize = gs__dtype_size(dtype);
    k->last_push = -1;
    /* Place on a copy of the loads: committed only once every rank succeeded. */
    memcpy(load, ps->reg.placer.load, (size_t)ps->roles.nservers * sizeof(uint64_t));
    trial.load = load;
    n = gs__ps_nshards(&trial, count, k->esize);
    k->ranges = calloc(n, sizeof(*k->ranges));
    k->server_rank = calloc(n, sizeof(int));
    k->served = calloc(n, sizeof(*k->served));
    if ((k->ranges == NULL) || (k->server_rank == NULL) || (k->served == NULL)) {
        goto err_nomem;
    }
    k->nshards = (uint32_t)gs__ps_place(&trial, count, k->esize, k->ranges);
    for (uint32_t i = 0; i < k->nshards; i++) {
        k->server_rank[i] = gs__ps_server_rank(&ps->roles, k->ranges[i].server);
        if (k->server_rank[i] == ps->rank) {
            k->served[i] = shard_alloc(ps, k, i);
            if (k->served[i] == NULL) {
                goto err_nomem;
            }
        }
    }
    if ((ps->worker >= 0) && ps->cfg.has_codec) {
        k->ef = calloc(k->nshards, sizeof(*k->ef));
        if (k->ef == NULL) {
            goto err_nomem;
        }
        for (uint32_t i = 0; i < k->nshards; i++) {
            if (gs_ef_create(k->ranges[i].count, dtype, &k->ef[i]) != GS_OK) {
                goto err_nomem;
            }
        }
    }
    free(load);
    *k_out = k;
    return GS_OK;

err_nomem:
    free(load);
    key_free(k);
    return gs__error_set(GS_ERR_NO_MEMORY,
                         "gs_ps_register: out of memory for key %llu (%zu "
                         "elements)",
                         (unsigned long long)key, count);
}

/* Rank 0's initial values to every shard's server. */
static gs_status_t key_init_values(gs_ps_t ps, gs__ps_key_t *k, const void *init)
{
    gs_status_t status = GS_OK;

    for (uint32_t i = 0; (i < k->nshards) && (status == GS_OK); i++) {
        const int sr = k->server_rank[i];
        const size_t off = k->ranges[i].offset * k->esize;
        const size_t bytes = k->ranges[i].count * k->esize;
        const uint32_t tag = gs__ps_tag(GS_PS_TAG_KIND_INIT, i);

        if ((ps->rank == 0) && (sr == 0)) {
            /* init is not NULL: rank 0 asked for initial values (all[0] is its own record). */
            /* NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker) */
            memcpy(k->served[i]->w, (const char *)init + off, bytes);
        } else if (ps->rank == 0) {
            status = gs_send(ps->ccomm, (const char *)init + off, bytes, GS_DTYPE_U8, sr, tag);
        } else if (ps->rank == sr) {
            status = gs_recv(ps->ccomm, k->served[i]->w, bytes, GS_DTYPE_U8, 0, tag);
        }
    }
    return status;
}

static gs_status_t reg_check(gs_ps_t ps, uint64_t key, size_t count, gs_dtype_t dtype)
{
    if ((dtype != GS_DTYPE_F32) && (dtype != GS_DTYPE_F64) && (dtype != GS_DTYPE_F16) &&
        (dtype != GS_DTYPE_BF16)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_ps_register: key %llu has dtype %d; the update rules need f32, "
                             "f64, f16 or bf16",
                             (unsigned long long)key, (int)dtype);
    }
    if (count == 0) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_ps_register: key %llu has 0 elements",
                             (unsigned long long)key);
    }
    if (count > SIZE_MAX / 16) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_ps_register: key %llu has %zu elements",
                             (unsigned long long)key, count);
    }
    if (gs__ps_key_find(ps, key) != NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_ps_register: key %llu is already registered",
                             (unsigned long long)key);
    }
    return GS_OK;
}

gs_status_t gs_ps_register(gs_ps_t ps, uint64_t key, size_t count, gs_dtype_t dtype,
                           const void *initial_value)
{
    ps_reg_rec_t mine;
    ps_reg_rec_t *all = NULL;
    int32_t ok;
    int32_t *oks = NULL;
    gs__ps_key_t *k = NULL;
    gs_status_t status;
    gs_status_t local;
    char saved[GS_ERROR_MSG_MAX];
    int bad_rank = -1;

    if (ps == GS_PS_NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_ps_register: ps is NULL");
    }
    status = gs__ps_sticky(ps);
    if (status != GS_OK) {
        return status;
    }
    local = reg_check(ps, key, count, dtype);
    snprintf(saved, sizeof(saved), "%s", gs__error_get());
    mine.key = key;
    mine.count = count;
    mine.dtype = (uint32_t)dtype;
    mine.flags = ((initial_value != NULL) ? REC_INIT : 0u) | ((local != GS_OK) ? REC_BAD : 0u);
    all = calloc((size_t)ps->nranks, sizeof(*all));
    oks = calloc((size_t)ps->nranks, sizeof(*oks));
    if ((all == NULL) || (oks == NULL)) {
        free(all);
        free(oks);
        return gs__error_set(GS_ERR_NO_MEMORY, "gs_ps_register: out of memory");
    }
    status = gs_allgather(ps->ccomm, &mine, all, sizeof(mine), GS_DTYPE_U8);
    if (status != GS_OK) {
        goto out;
    }
    for (int r = 0; r < ps->nranks; r++) {
        if (((all[r].flags & REC_BAD) != 0) || (all[r].key != all[0].key) ||
            (all[r].count != all[0].count) || (all[r].dtype != all[0].dtype)) {
            bad_rank = r;
            break;
        }
    }
    if ((bad_rank >= 0) && (local != GS_OK)) {
        gs__error_copy_in(saved); /* this rank's own reason comes first */
        status = local;
        goto out;
    }
    if (bad_rank >= 0) {
        if (bad_rank == ps->rank) {
            gs__error_copy_in(saved);
            status = (local != GS_OK) ? local : GS_ERR_INVALID_ARG;
            if (local == GS_OK) {
                status = gs__error_set(GS_ERR_INVALID_ARG,
                                       "gs_ps_register: this rank registers key %llu (%llu "
                                       "elements, dtype %u) but rank 0 registers key %llu (%llu "
                                       "elements, dtype %u)",
                                       (unsigned long long)key, (unsigned long long)count,
                                       (unsigned)dtype, (unsigned long long)all[0].key,
                                       (unsigned long long)all[0].count, (unsigned)all[0].dtype);
            }
        } else if ((all[bad_rank].flags & REC_BAD) != 0) {
            status = gs__error_set(GS_ERR_INVALID_ARG,
                                   "gs_ps_register: rank %d rejected its arguments for key %llu "
                                   "(its gs_last_error() says why)",
                                   bad_rank, (unsigned long long)all[bad_rank].key);
        } else {
            status = gs__error_set(GS_ERR_INVALID_ARG,
                                   "gs_ps_register: rank %d registers key %llu (%llu elements, "
                                   "dtype %u) but rank 0 registers key %llu (%llu elements, dtype "
                                   "%u); every rank registers the same keys in the same order",
                                   bad_rank, (unsigned long long)all[bad_rank].key,
                                   (unsigned long long)all[bad_rank].count,
                                   (unsigned)all[bad_rank].dtype, (unsigned long long)all[0].key,
                                   (unsigned long long)all[0].count, (unsigned)all[0].dtype);
        }
        goto out;
    }
    local = key_build(ps, key, count, dtype, &k);
    snprintf(saved, sizeof(saved), "%s", gs__error_get());
    ok = (local == GS_OK) ? 1 : 0;
    status = gs_allgather(ps->ccomm, &ok, oks, 1, GS_DTYPE_I32);
    if (status != GS_OK) {
        goto out;
    }
    for (int r = 0; r < ps->nranks; r++) {
        if (oks[r] == 0) {
            if (r == ps->rank) {
                gs__error_copy_in(saved);
                status = local;
            } else {
                status = gs__error_set(GS_ERR_NO_MEMORY,
                                       "gs_ps_register: rank %d could not allocate key %llu", r,
                                       (unsigned long long)key);
            }
            goto out;
        }
    }
    if (k == NULL) {
        /* Not reached: oks[ps->rank] is this rank's ok, so a failed key_build has left the
         * loop above. Written out for the static analyzer, which cannot see through the
         * all-gather. */
        status = local;
        goto out;
    }
    if ((all[0].flags & REC_INIT) != 0) {
        status = key_init_values(ps, k, initial_value);
        if (status != GS_OK) {
            goto out;
        }
    }
    /* Commit the placement (every rank does the same). */
    {
        gs__ps_placer_t *pl = &ps->reg.placer;
        const size_t es = k->esize;

        if (k->nshards > 1) {
            pl->nsplit++;
        }
        for (uint32_t i = 0; i < k->nshards; i++) {
            pl->load[k->ranges[i].server] += (uint64_t)k->ranges[i].count * es;
        }
    }
    status = registry_insert(ps, k);
    if (status != GS_OK) {
        gs__ps_fail(ps, status, gs__error_get(), 1);
        goto out;
    }
    k = NULL;
    /* Nobody pushes the key before every rank has it in its registry. */
    status = gs_barrier(ps->ccomm);
    if (status == GS_OK) {
        GS_INFO(PS, "registered key %llu: %zu elements of %s in %u shards", (unsigned long long)key,
                count, gs__dtype_name(dtype), (unsigned)gs__ps_key_find(ps, key)->nshards);
    }

out:
    if (k != NULL) {
        key_free(k);
    }
    free(all);
    free(oks);
    return status;
}
