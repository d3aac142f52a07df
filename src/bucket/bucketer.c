/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Gradient bucketing, the lifetime half: gs_bucketer_create, the
 * registration of tensors (gs_bucketer_add, with the device-memory rule),
 * forming a grouping with its fusion buffers and error-feedback residuals
 * (the first ready() and the rebuild call it), destroy, and the
 * introspection calls. The step itself (ready, launch, wait, rebuild) is
 * bucketer_step.c; the grouping arithmetic is bucket_plan.c.
 *
 * It does not copy device memory: a bucket of device tensors must be
 * reduced in place (gradsync/bucket.h says when that holds).
 */
#include "bucket/bucketer.h"

#include "core/dtype.h"
#include "core/log.h"
#include "device/memkind.h"

#include <stdlib.h>
#include <string.h>

#define BKT_DEFAULT_BUCKET_BYTES (25ull << 20)
#define BKT_DEFAULT_FIRST_BYTES (1ull << 20)
/* No tensor past 2^50 bytes (the collectives' limit). */
#define BKT_MAX_TENSOR_BYTES (1ull << 50)
/* Ids travel as int32 in the rebuild's broadcast. */
#define BKT_MAX_TENSORS ((size_t)INT32_MAX)
/* Fusion buffers start on a cache line (the reductions' SIMD likes it). */
#define BKT_ALIGN 64
/* Options and stats structs larger than this are uninitialised memory. */
#define BKT_MAX_STRUCT_SIZE 4096

static gs_status_t bkt_resolve_codec(const gs_codec_config_t *in, bkt_config_t *cfg)
{
    static const gs_codec_config_t defaults = GS_CODEC_CONFIG_INIT;
    size_t probe = 0;
    gs_status_t status;

    if ((in->size < offsetof(gs_codec_config_t, kind) + sizeof(in->kind)) ||
        (in->size > BKT_MAX_STRUCT_SIZE)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_bucketer_create: opts->codec->size %zu is not the size of a "
                             "gs_codec_config_t (initialise it with GS_CODEC_CONFIG_INIT)",
                             in->size);
    }
    cfg->codec = defaults;
    memcpy(&cfg->codec, in, (in->size < sizeof(cfg->codec)) ? in->size : sizeof(cfg->codec));
    cfg->codec.size = sizeof(cfg->codec);
    status = gs_codec_encoded_size(&cfg->codec, 1, GS_DTYPE_F32, &probe);
    if (status != GS_OK) {
        return gs__error_wrap(status, "gs_bucketer_create: opts->codec: %s", gs__error_get());
    }
    cfg->use_codec = 1;
    return GS_OK;
}

static gs_status_t bkt_bytes_opt(const char *name, int64_t v, uint64_t def, uint64_t *out)
{
    if (v == (int64_t)GS_UNSET) {
        *out = def;
        return GS_OK;
    }
    if (v < 0) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_bucketer_create: opts->%s is %lld; it must be >= 0 (or "
                             "GS_UNSET for the default)",
                             name, (long long)v);
    }
    *out = (uint64_t)v;
    return GS_OK;
}

static gs_status_t bkt_resolve_opts(const gs_bucketer_opts_t *user, bkt_config_t *cfg)
{
    gs_bucketer_opts_t o = GS_BUCKETER_OPTS_INIT;
    gs_status_t status;

    if (user != NULL) {
        if ((user->size < sizeof(gs_bucketer_opts_t)) || (user->size > BKT_MAX_STRUCT_SIZE)) {
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "gs_bucketer_create: opts->size %zu is not the size of a "
                                 "gs_bucketer_opts_t (%zu; initialise it with "
                                 "GS_BUCKETER_OPTS_INIT)",
                                 user->size, sizeof(gs_bucketer_opts_t));
        }
        memcpy(&o, user, sizeof(o));
    }
    status =
        bkt_bytes_opt("bucket_bytes", o.bucket_bytes, BKT_DEFAULT_BUCKET_BYTES, &cfg->bucket_bytes);
    if (status == GS_OK) {
        status = bkt_bytes_opt("first_bucket_bytes", o.first_bucket_bytes, BKT_DEFAULT_FIRST_BYTES,
                               &cfg->first_bytes);
    }
    if (status != GS_OK) {
        return status;
    }
    if ((o.op != GS_OP_SUM) && (o.op != GS_OP_AVG)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_bucketer_create: opts->op must be GS_OP_SUM or GS_OP_AVG, not "
                             "%s (%d)",
                             gs__op_name(o.op), (int)o.op);
    }
    if ((unsigned)o.algo >= GS_ALGO_COUNT) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_bucketer_create: unknown opts->algo %d",
                             (int)o.algo);
    }
    if (o.flags != 0) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_bucketer_create: opts->flags 0x%x: no flag is defined yet",
                             o.flags);
    }
    if ((o.error_feedback != GS_UNSET) && (o.error_feedback != 0) && (o.error_feedback != 1)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_bucketer_create: opts->error_feedback is %d; use 0, 1 or "
                             "GS_UNSET",
                             o.error_feedback);
    }
    if ((o.rebuild != GS_UNSET) && (o.rebuild != 0) && (o.rebuild != 1)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_bucketer_create: opts->rebuild is %d; use 0, 1 or GS_UNSET",
                             o.rebuild);
    }
    cfg->op = o.op;
    cfg->algo = o.algo;
    cfg->stream = o.stream;
    cfg->rebuild = (o.rebuild == GS_UNSET) ? -1 : o.rebuild;
    if (o.codec != NULL) {
        status = bkt_resolve_codec(o.codec, cfg);
        if (status != GS_OK) {
            return status;
        }
        if (o.algo != GS_ALGO_AUTO) {
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "gs_bucketer_create: opts->algo must be GS_ALGO_AUTO with a "
                                 "codec (the compressed all-reduce has its own algorithm)");
        }
    }
    cfg->use_ef =
        cfg->use_codec &&
        ((o.error_feedback == GS_UNSET) ? (cfg->codec.kind != GS_CODEC_NONE) : o.error_feedback);
    return GS_OK;
}

gs_status_t gs_bucketer_create(gs_comm_t comm, const gs_bucketer_opts_t *opts,
                               gs_bucketer_t *bucketer_out)
{
    bkt_config_t cfg = {0};
    gs_bucketer_t b;
    int rank = 0;
    gs_status_t status;

    if ((comm == NULL) || (bucketer_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_bucketer_create: %s is NULL",
                             (comm == NULL) ? "comm" : "bucketer_out");
    }
    status = bkt_resolve_opts(opts, &cfg);
    if (status != GS_OK) {
        return status;
    }
    status = gs_comm_rank(comm, &rank);
    if (status != GS_OK) {
        return status;
    }
    b = calloc(1, sizeof(*b));
    if (b == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "gs_bucketer_create: out of memory");
    }
    if (pthread_mutex_init(&b->mu, NULL) != 0) {
        free(b);
        return gs__error_set(GS_ERR_SYSTEM, "gs_bucketer_create: pthread_mutex_init failed");
    }
    b->comm = comm;
    b->rank = rank;
    b->cfg = cfg;
    b->dead = GS_OK;
    atomic_init(&b->built, 0);
    GS_INFO(COLL, "bucketer: buckets of %llu bytes (first %llu), op %s, algo %d, codec %s%s",
            (unsigned long long)cfg.bucket_bytes, (unsigned long long)cfg.first_bytes,
            gs__op_name(cfg.op), (int)cfg.algo, cfg.use_codec ? "on" : "off",
            cfg.use_ef ? " with error feedback" : "");
    *bucketer_out = b;
    return GS_OK;
}

/* Device tensors are reduced in place only: all device, one flat run in registration order. */
static gs_status_t bkt_check_memory(const bkt_registry_t *reg, const void *ptr, size_t count,
                                    int on_device)
{
    const uintptr_t addr = (uintptr_t)ptr;

    if (count == 0) {
        return GS_OK;
    }
    if (on_device && reg->host) {
        return gs__error_set(GS_ERR_UNSUPPORTED,
                             "gs_bucketer_add: tensor %zu is device memory but earlier tensors "
                             "are host memory; a bucketer holds one kind",
                             reg->n);
    }
    if (!on_device && reg->device) {
        return gs__error_set(GS_ERR_UNSUPPORTED,
                             "gs_bucketer_add: tensor %zu is host memory but earlier tensors are "
                             "device memory; a bucketer holds one kind",
                             reg->n);
    }
    if (on_device && (reg->end != 0) && (addr != reg->end)) {
        return gs__error_set(GS_ERR_UNSUPPORTED,
                             "gs_bucketer_add: device tensor %zu at %p does not start where "
                             "tensor %zu ends (%p): device tensors must form one flat buffer "
                             "registered in memory order, because the bucketer cannot copy "
                             "device memory into a fusion buffer",
                             reg->n, ptr, reg->last_nonempty, (void *)reg->end);
    }
    return GS_OK;
}

static gs_status_t bkt_check_overlap(const bkt_registry_t *reg, const void *ptr, size_t bytes)
{
    const uintptr_t lo = (uintptr_t)ptr, hi = lo + bytes;

    if (bytes == 0) {
        return GS_OK;
    }
    for (size_t id = 0; id < reg->n; id++) {
        const uintptr_t a = reg->t[id].addr, e = a + reg->t[id].count * reg->t[id].esize;

        if ((reg->t[id].count > 0) && (lo < e) && (a < hi)) {
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "gs_bucketer_add: the new tensor [%p, +%zu bytes) overlaps "
                                 "tensor %zu [%p, +%zu bytes)",
                                 ptr, bytes, id, (void *)a, (size_t)(e - a));
        }
    }
    return GS_OK;
}

static gs_status_t bkt_check_dtype(const bkt_config_t *cfg, size_t id, gs_dtype_t dtype)
{
    if ((unsigned)dtype >= GS_DTYPE_COUNT) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_bucketer_add: tensor %zu: unknown dtype %d",
                             id, (int)dtype);
    }
    if ((cfg->op == GS_OP_AVG) && !gs__dtype_is_float(dtype)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_bucketer_add: tensor %zu is %s, which cannot be averaged "
                             "(GS_OP_AVG needs a float dtype); create the bucketer with "
                             "GS_OP_SUM for integer tensors",
                             id, gs__dtype_name(dtype));
    }
    if (cfg->use_codec && !gs__dtype_is_float(dtype)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_bucketer_add: tensor %zu is %s, but the bucketer compresses "
                             "with a codec, which needs f32, f64, f16 or bf16",
                             id, gs__dtype_name(dtype));
    }
    return GS_OK;
}

static gs_status_t bkt_registry_grow(bkt_registry_t *reg)
{
    const size_t cap = (reg->cap == 0) ? 64 : reg->cap * 2;
    gs__bplan_tensor_t *t;
    void **ptr;

    t = realloc(reg->t, cap * sizeof(*t));
    if (t == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "gs_bucketer_add: out of memory (%zu tensors)", cap);
    }
    reg->t = t;
    ptr = realloc(reg->ptr, cap * sizeof(*ptr));
    if (ptr == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "gs_bucketer_add: out of memory (%zu tensors)", cap);
    }
    reg->ptr = ptr;
    reg->cap = cap;
    return GS_OK;
}

gs_status_t gs_bucketer_add(gs_bucketer_t b, void *ptr, size_t count, gs_dtype_t dtype,
                            size_t *id_out)
{
    bkt_registry_t *reg;
    size_t esize, id;
    int on_device;
    gs_status_t status;

    if ((b == NULL) || (id_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_bucketer_add: %s is NULL",
                             (b == NULL) ? "bucketer" : "id_out");
    }
    reg = &b->reg;
    id = reg->n;
    if (atomic_load_explicit(&b->built, memory_order_acquire)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_bucketer_add: registration closed at the first "
                             "gs_bucketer_ready() (%zu tensors registered); create a new "
                             "bucketer to change the set of tensors",
                             reg->n);
    }
    if ((ptr == NULL) && (count > 0)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_bucketer_add: tensor %zu: ptr is NULL but count is %zu", id,
                             count);
    }
    status = bkt_check_dtype(&b->cfg, id, dtype);
    if (status != GS_OK) {
        return status;
    }
    esize = gs__dtype_size(dtype);
    if (count > BKT_MAX_TENSOR_BYTES / esize) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_bucketer_add: tensor %zu: %zu elements of %s exceed the "
                             "%llu-byte limit",
                             id, count, gs__dtype_name(dtype),
                             (unsigned long long)BKT_MAX_TENSOR_BYTES);
    }
    if (id >= BKT_MAX_TENSORS) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_bucketer_add: more than %zu tensors",
                             BKT_MAX_TENSORS);
    }
    status = bkt_check_overlap(reg, ptr, count * esize);
    if (status != GS_OK) {
        return status;
    }
    on_device = (count > 0) && gs__mem_is_device(ptr, NULL);
    status = bkt_check_memory(reg, ptr, count, on_device);
    if (status != GS_OK) {
        return status;
    }
    if (reg->n == reg->cap) {
        status = bkt_registry_grow(reg);
        if (status != GS_OK) {
            return status;
        }
    }
    reg->t[id] = (gs__bplan_tensor_t){
        .addr = (uintptr_t)ptr, .count = count, .esize = esize, .dtype = dtype};
    reg->ptr[id] = ptr;
    reg->n++;
    reg->bytes += (uint64_t)(count * esize);
    if (count > 0) {
        reg->device |= on_device;
        reg->host |= !on_device;
        reg->end = (uintptr_t)ptr + count * esize;
        reg->last_nonempty = id;
    }
    *id_out = id;
    return GS_OK;
}

/* The arrays of a grouping over n tensors, before its buckets. */
static bkt_plan_t *bkt_plan_alloc(size_t n)
{
    bkt_plan_t *p = calloc(1, sizeof(*p));

    if (p == NULL) {
        return NULL;
    }
    p->bucket_of = malloc((n + 1) * sizeof(*p->bucket_of));
    p->offset_of = malloc((n + 1) * sizeof(*p->offset_of));
    p->first = malloc((n + 2) * sizeof(*p->first));
    p->members = malloc((n + 1) * sizeof(*p->members));
    p->count_of = malloc((n + 1) * sizeof(*p->count_of));
    p->buckets = calloc(n + 1, sizeof(*p->buckets));
    if ((p->bucket_of == NULL) || (p->offset_of == NULL) || (p->first == NULL) ||
        (p->members == NULL) || (p->count_of == NULL) || (p->buckets == NULL)) {
        gs__bucketer_plan_destroy(p);
        return NULL;
    }
    return p;
}

void gs__bucketer_plan_destroy(bkt_plan_t *p)
{
    if (p == NULL) {
        return;
    }
    if (p->buckets != NULL) {
        for (size_t i = 0; i < p->nbuckets; i++) {
            free(p->buckets[i].fusion);
            (void)gs_ef_destroy(p->buckets[i].ef);
        }
    }
    free(p->buckets);
    free(p->count_of);
    free(p->members);
    free(p->first);
    free(p->offset_of);
    free(p->bucket_of);
    free(p);
}

/* Bucket i's buffer: in place when its tensors lie back to back, else a fusion buffer. */
static gs_status_t bkt_bucket_setup(gs_bucketer_t b, bkt_plan_t *p, size_t i)
{
    const bkt_registry_t *reg = &b->reg;
    bkt_bucket_t *bk = &p->buckets[i];
    const uint32_t *mem = &p->members[p->first[i]];
    const size_t nmem = p->first[i + 1] - p->first[i];
    uintptr_t base = 0;
    gs_status_t status;

    bk->dtype = reg->t[mem[0]].dtype;
    bk->esize = reg->t[mem[0]].esize;
    bk->count = p->count_of[i];
    bk->req = GS_REQUEST_NULL;
    bk->ef = GS_EF_NULL;
    if (gs__bplan_contiguous(reg->t, mem, nmem, &base)) {
        bk->inplace = 1;
        bk->base = (void *)base;
        p->inplace++;
    } else if (reg->device) {
        return gs__error_set(GS_ERR_UNSUPPORTED,
                             "gs_bucketer_ready: bucket %zu of device tensors (%zu of them, "
                             "from id %u) is not contiguous in memory, and the bucketer cannot "
                             "copy device memory into a fusion buffer",
                             i, nmem, mem[0]);
    } else if (bk->count > 0) {
        const size_t bytes = bk->count * bk->esize;

        bk->fusion = aligned_alloc(BKT_ALIGN, (bytes + BKT_ALIGN - 1) / BKT_ALIGN * BKT_ALIGN);
        if (bk->fusion == NULL) {
            return gs__error_set(GS_ERR_NO_MEMORY,
                                 "gs_bucketer: out of memory for the %zu-byte fusion buffer of "
                                 "bucket %zu",
                                 bytes, i);
        }
        bk->base = bk->fusion;
        p->fusion_bytes += bytes;
    }
    if (b->cfg.use_ef && (bk->count > 0)) {
        status = gs_ef_create(bk->count, bk->dtype, &bk->ef);
        if (status != GS_OK) {
            return gs__error_wrap(status, "gs_bucketer: error feedback of bucket %zu: %s", i,
                                  gs__error_get());
        }
    }
    return GS_OK;
}

gs_status_t gs__bucketer_plan_create(gs_bucketer_t b, const uint32_t *order, bkt_plan_t **plan_out)
{
    const size_t n = b->reg.n;
    bkt_plan_t *p = bkt_plan_alloc(n);
    gs_status_t status = GS_OK;

    if (p == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "gs_bucketer: out of memory for %zu tensors", n);
    }
    const size_t nbuckets =
        gs__bplan_assign(b->reg.t, n, order, b->cfg.first_bytes, b->cfg.bucket_bytes, p->bucket_of);

    gs__bplan_layout(b->reg.t, n, p->bucket_of, nbuckets, p->first, p->members, p->offset_of,
                     p->count_of);
    p->nbuckets = nbuckets;
    for (size_t i = 0; (i < nbuckets) && (status == GS_OK); i++) {
        status = bkt_bucket_setup(b, p, i);
    }
    if (status != GS_OK) {
        gs__bucketer_plan_destroy(p);
        return status;
    }
    *plan_out = p;
    return GS_OK;
}

gs_status_t gs__bucketer_step_alloc(gs_bucketer_t b)
{
    const size_t n = b->reg.n;

    b->step.ready = calloc(n + 1, sizeof(*b->step.ready));
    b->step.order = calloc(n + 1, sizeof(*b->step.order));
    b->scratch = calloc(n + 1, sizeof(*b->scratch));
    b->scratch2 = calloc(n + 1, sizeof(*b->scratch2));
    b->seen = calloc(n + 1, 1);
    if ((b->step.ready == NULL) || (b->step.order == NULL) || (b->scratch == NULL) ||
        (b->scratch2 == NULL) || (b->seen == NULL)) {
        gs__bucketer_step_free(b);
        return gs__error_set(GS_ERR_NO_MEMORY, "gs_bucketer: out of memory for %zu tensors", n);
    }
    for (size_t id = 0; id < n; id++) {
        atomic_init(&b->step.ready[id], 0);
    }
    return GS_OK;
}

void gs__bucketer_step_free(gs_bucketer_t b)
{
    free((void *)b->step.ready);
    free(b->step.order);
    free(b->scratch);
    free(b->scratch2);
    free(b->seen);
    b->step.ready = NULL;
    b->step.order = NULL;
    b->scratch = NULL;
    b->scratch2 = NULL;
    b->seen = NULL;
}

gs_status_t gs_bucketer_destroy(gs_bucketer_t b)
{
    gs_status_t first = GS_OK;

    if (b == NULL) {
        return GS_OK;
    }
    if (b->plan != NULL) {
        for (size_t i = 0; i < b->plan->nbuckets; i++) {
            /* gs_wait is bounded by the communicator's deadline. */
            const gs_status_t st = gs_wait(&b->plan->buckets[i].req);

            if ((st != GS_OK) && (first == GS_OK)) {
                first = st;
            }
        }
        gs__bucketer_plan_destroy(b->plan);
    }
    gs__bucketer_step_free(b);
    free(b->reg.t);
    free(b->reg.ptr);
    pthread_mutex_destroy(&b->mu);
    free(b);
    return first;
}

/* Validate a caller's size-first struct: at least the first version, not absurd. */
static gs_status_t bkt_check_struct(const char *fn, const char *what, size_t size, size_t v1)
{
    if ((size < v1) || (size > BKT_MAX_STRUCT_SIZE)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s: %s->size is %zu; set it with the INIT macro (%zu)", fn, what,
                             size, v1);
    }
    return GS_OK;
}

gs_status_t gs_bucketer_stats(gs_bucketer_t b, gs_bucketer_stats_t *stats_out)
{
    gs_bucketer_stats_t s = GS_BUCKETER_STATS_INIT;
    size_t n;
    gs_status_t status;

    if ((b == NULL) || (stats_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_bucketer_stats: %s is NULL",
                             (b == NULL) ? "bucketer" : "stats_out");
    }
    status = bkt_check_struct("gs_bucketer_stats", "stats_out", stats_out->size, sizeof(s));
    if (status != GS_OK) {
        return status;
    }
    s.steps = b->counters.steps;
    s.failed_steps = b->counters.failed_steps;
    s.tensors = b->reg.n;
    s.bytes = b->reg.bytes;
    if (b->plan != NULL) {
        s.buckets = b->plan->nbuckets;
        s.inplace_buckets = b->plan->inplace;
        s.fusion_bytes = b->plan->fusion_bytes;
    }
    s.last_exposed_ns = b->counters.last_exposed_ns;
    s.total_exposed_ns = b->counters.total_exposed_ns;
    s.last_step_ns = b->counters.last_step_ns;
    s.rebuilt = b->counters.rebuilt;
    s.device = b->reg.device;
    n = (stats_out->size < sizeof(s)) ? stats_out->size : sizeof(s);
    s.size = n;
    memcpy(stats_out, &s, n);
    return GS_OK;
}

static gs_status_t bkt_check_plan(const char *fn, gs_bucketer_t b)
{
    if (b->plan == NULL) {
        return gs__error_set(GS_ERR_INVALID_USAGE,
                             "%s: the buckets are formed at the first gs_bucketer_ready(), "
                             "which has not been called yet",
                             fn);
    }
    return GS_OK;
}

gs_status_t gs_bucketer_bucket_info(gs_bucketer_t b, size_t index, gs_bucket_info_t *info_out)
{
    gs_bucket_info_t info = GS_BUCKET_INFO_INIT;
    const bkt_bucket_t *bk;
    gs_status_t status;

    if ((b == NULL) || (info_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_bucketer_bucket_info: %s is NULL",
                             (b == NULL) ? "bucketer" : "info_out");
    }
    status = bkt_check_struct("gs_bucketer_bucket_info", "info_out", info_out->size, sizeof(info));
    if (status == GS_OK) {
        status = bkt_check_plan("gs_bucketer_bucket_info", b);
    }
    if (status != GS_OK) {
        return status;
    }
    if (index >= b->plan->nbuckets) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_bucketer_bucket_info: bucket %zu does not exist (%zu buckets)",
                             index, b->plan->nbuckets);
    }
    bk = &b->plan->buckets[index];
    info.count = bk->count;
    info.dtype = bk->dtype;
    info.ntensors = b->plan->first[index + 1] - b->plan->first[index];
    info.inplace = bk->inplace;
    memcpy(info_out, &info, sizeof(info));
    return GS_OK;
}

gs_status_t gs_bucketer_locate(gs_bucketer_t b, size_t id, size_t *bucket_out, size_t *offset_out)
{
    gs_status_t status;

    if ((b == NULL) || (bucket_out == NULL) || (offset_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_bucketer_locate: %s is NULL",
                             (b == NULL)            ? "bucketer"
                             : (bucket_out == NULL) ? "bucket_out"
                                                    : "offset_out");
    }
    status = bkt_check_plan("gs_bucketer_locate", b);
    if (status != GS_OK) {
        return status;
    }
    if (id >= b->reg.n) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_bucketer_locate: unknown tensor id %zu (%zu registered)", id,
                             b->reg.n);
    }
    *bucket_out = b->plan->bucket_of[id];
    *offset_out = b->plan->offset_of[id];
    return GS_OK;
}
