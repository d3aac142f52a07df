/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The --sync modes of examples/train and its straggler (train_sync.h says
 * what each mode does). Everything here runs on the training thread; the
 * parameter server's service thread is the library's.
 */
#include "train_sync.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PS_KEY 0u

static int sync_failed(const train_sync_t *s, gs_status_t status, const char *what)
{
    if (status == GS_OK) {
        return 0;
    }
    fprintf(stderr, "train: rank %d: %s failed: %s: %s\n", s->rank, what, gs_status_name(status),
            gs_last_error());
    return 1;
}

bool train_sync_parse(const char *s, train_sync_opts_t *o)
{
    static const struct {
        const char *name;
        train_sync_mode_t mode;
    } plain[] = {{"allreduce", TRAIN_SYNC_ALLREDUCE},
                 {"bucket", TRAIN_SYNC_BUCKET},
                 {"ps-bsp", TRAIN_SYNC_PS_BSP},
                 {"ps-asp", TRAIN_SYNC_PS_ASP}};
    const char *const ssp = "ps-ssp=";

    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
        if (strcmp(s, plain[i].name) == 0) {
            o->mode = plain[i].mode;
            return true;
        }
    }
    if (strncmp(s, ssp, strlen(ssp)) == 0) {
        const char *num = s + strlen(ssp);
        char *end;
        long v;

        errno = 0;
        v = strtol(num, &end, 10);
        if ((end != num) && (*end == '\0') && (errno == 0) && (v >= 0) && (v <= 1000000)) {
            o->mode = TRAIN_SYNC_PS_SSP;
            o->staleness = (int)v;
            return true;
        }
    }
    return false;
}

const char *train_sync_name(const train_sync_opts_t *o, char *buf, size_t len)
{
    static const char *const names[] = {"allreduce", "bucket", "ps-bsp", "ps-ssp", "ps-asp"};

    if (o->mode == TRAIN_SYNC_PS_SSP) {
        snprintf(buf, len, "ps-ssp=%d", o->staleness);
    } else {
        snprintf(buf, len, "%s", names[o->mode]);
    }
    return buf;
}

bool train_sync_replicated(const train_sync_opts_t *o)
{
    return (o->mode != TRAIN_SYNC_PS_SSP) && (o->mode != TRAIN_SYNC_PS_ASP);
}

static bool is_ps(const train_sync_t *s)
{
    return (s->o.mode == TRAIN_SYNC_PS_BSP) || (s->o.mode == TRAIN_SYNC_PS_SSP) ||
           (s->o.mode == TRAIN_SYNC_PS_ASP);
}

static int open_bucketer(train_sync_t *s)
{
    gs_bucketer_opts_t bo = GS_BUCKETER_OPTS_INIT;
    size_t off = 0;

    bo.op = GS_OP_AVG;
    if (s->o.bucket_bytes >= 0) {
        bo.bucket_bytes = (int64_t)s->o.bucket_bytes;
        bo.first_bucket_bytes = bo.bucket_bytes;
    }
    if (s->codec != NULL) {
        bo.codec = s->codec;
        bo.error_feedback = s->ef ? 1 : 0;
    }
    if (sync_failed(s, gs_bucketer_create(s->comm, &bo, &s->bucketer), "gs_bucketer_create")) {
        return 1;
    }
    /* Forward order: the bucketer fills its buckets from the last layer. */
    for (size_t t = 0; t < s->m.ntensors; t++) {
        if (sync_failed(s,
                        gs_bucketer_add(s->bucketer, s->m.grad + off, s->m.count[t], GS_DTYPE_F32,
                                        &s->ids[t]),
                        "gs_bucketer_add")) {
            return 1;
        }
        off += s->m.count[t];
    }
    return 0;
}

static int open_ps(train_sync_t *s)
{
    static const gs_ps_consistency_t consistency[] = {[TRAIN_SYNC_PS_BSP] = GS_PS_BSP,
                                                      [TRAIN_SYNC_PS_SSP] = GS_PS_SSP,
                                                      [TRAIN_SYNC_PS_ASP] = GS_PS_ASP};
    gs_ps_opts_t po = GS_PS_OPTS_INIT;

    po.consistency = consistency[s->o.mode];
    if (s->o.mode == TRAIN_SYNC_PS_SSP) {
        po.staleness = s->o.staleness;
    }
    po.servers = 0; /* colocated: every rank serves a shard */
    po.rule = GS_PS_RULE_SGD;
    po.lr = s->lr;
    po.momentum = s->momentum;
    po.weight_decay = 0.0;
    po.codec = s->codec;
    /* One key, cut into one balanced range per server whatever its size:
     * a small model on one server would make that rank the hot spot. */
    po.split_bytes = 1;
    s->push = malloc(s->m.nparams * sizeof(float));
    if (s->push == NULL) {
        fprintf(stderr, "train: rank %d: out of memory\n", s->rank);
        return 1;
    }
    if (sync_failed(s, gs_ps_create(s->comm, &po, &s->ps), "gs_ps_create") ||
        sync_failed(s, gs_ps_register(s->ps, PS_KEY, s->m.nparams, GS_DTYPE_F32, s->m.theta),
                    "gs_ps_register")) {
        return 1;
    }
    return 0;
}

int train_sync_open(train_sync_t *s, gs_comm_t comm, const train_sync_opts_t *o,
                    const train_sync_model_t *m, double lr, double momentum,
                    const gs_codec_config_t *codec, bool ef)
{
    memset(s, 0, sizeof(*s));
    s->o = *o;
    s->comm = comm;
    s->m = *m;
    s->lr = (float)lr;
    s->momentum = (float)momentum;
    s->codec = codec;
    s->ef = ef && (codec != NULL);
    if (sync_failed(s, gs_comm_rank(comm, &s->rank), "gs_comm_rank") ||
        sync_failed(s, gs_comm_size(comm, &s->size), "gs_comm_size")) {
        return 1;
    }
    switch (o->mode) {
    case TRAIN_SYNC_ALLREDUCE:
        if (s->ef &&
            sync_failed(s, gs_ef_create(m->nparams, GS_DTYPE_F32, &s->residual), "gs_ef_create")) {
            return 1;
        }
        return 0;
    case TRAIN_SYNC_BUCKET:
        return open_bucketer(s);
    default:
        return open_ps(s);
    }
}

static void straggle(const train_sync_t *s)
{
    struct timespec ts = {.tv_sec = s->o.slow_ms / 1000,
                          .tv_nsec = (long)(s->o.slow_ms % 1000) * 1000000L};

    if ((s->rank != s->o.slow_rank) || (s->o.slow_ms <= 0)) {
        return;
    }
    while ((nanosleep(&ts, &ts) != 0) && (errno == EINTR)) {
    }
}

/* SGD with momentum on the averaged gradient, the same on every rank. */
static void local_update(train_sync_t *s)
{
    float *theta = s->m.theta, *vel = s->m.vel;
    const float *g = s->m.grad;
    const float lr = s->lr, mu = s->momentum;

    for (size_t k = 0; k < s->m.nparams; k++) {
        vel[k] = mu * vel[k] + g[k];
        theta[k] -= lr * vel[k];
    }
}

static int step_bucket(train_sync_t *s)
{
    /* The backward pass finishes the last layer first. */
    for (size_t t = s->m.ntensors; t > 0; t--) {
        if (sync_failed(s, gs_bucketer_ready(s->bucketer, s->ids[t - 1]), "gs_bucketer_ready")) {
            return 1;
        }
    }
    return sync_failed(s, gs_bucketer_wait(s->bucketer), "gs_bucketer_wait");
}

static int step_ps(train_sync_t *s)
{
    gs_ps_request_t reqs[2] = {GS_PS_REQUEST_NULL, GS_PS_REQUEST_NULL};
    const float inv = 1.0f / (float)s->size;
    gs_status_t status;

    for (size_t k = 0; k < s->m.nparams; k++) {
        s->push[k] = s->m.grad[k] * inv;
    }
    status = gs_ps_push(s->ps, PS_KEY, s->push, s->m.nparams, GS_DTYPE_F32, &reqs[0]);
    if (status == GS_OK) {
        status = gs_ps_pull(s->ps, PS_KEY, s->m.theta, s->m.nparams, GS_DTYPE_F32, &reqs[1]);
    }
    if (status == GS_OK) {
        status = gs_ps_clock(s->ps);
    }
    if (status != GS_OK) {
        (void)gs_ps_waitall(2, reqs);
        return sync_failed(s, status, "gs_ps_push/pull/clock");
    }
    return sync_failed(s, gs_ps_waitall(2, reqs), "gs_ps_waitall (push, pull)");
}

int train_sync_step(train_sync_t *s)
{
    straggle(s);
    switch (s->o.mode) {
    case TRAIN_SYNC_ALLREDUCE: {
        gs_allreduce_opts_t opts = GS_ALLREDUCE_OPTS_INIT;

        if (s->codec != NULL) {
            opts.codec = s->codec;
            opts.ef = s->residual;
        }
        if (sync_failed(s,
                        gs_allreduce_ex(s->comm, s->m.grad, s->m.grad, s->m.nparams, GS_DTYPE_F32,
                                        GS_OP_AVG, &opts),
                        "gs_allreduce_ex (gradient)")) {
            return 1;
        }
        local_update(s);
        return 0;
    }
    case TRAIN_SYNC_BUCKET:
        if (step_bucket(s) != 0) {
            return 1;
        }
        local_update(s);
        return 0;
    default:
        return step_ps(s);
    }
}

int train_sync_finish(train_sync_t *s)
{
    gs_ps_request_t req = GS_PS_REQUEST_NULL;

    if (!is_ps(s)) {
        return 0;
    }
    /* Every push has completed on its rank (applied, or in a closed BSP
     * round) once every rank is past the barrier: the pull sees them all. */
    if (sync_failed(s, gs_barrier(s->comm), "gs_barrier (end of training)") ||
        sync_failed(s, gs_ps_pull(s->ps, PS_KEY, s->m.theta, s->m.nparams, GS_DTYPE_F32, &req),
                    "gs_ps_pull (final)") ||
        sync_failed(s, gs_ps_wait(&req), "gs_ps_wait (final pull)")) {
        return 1;
    }
    return 0;
}

int train_sync_close(train_sync_t *s)
{
    int rc = 0;

    rc |= sync_failed(s, gs_ef_destroy(s->residual), "gs_ef_destroy");
    rc |= sync_failed(s, gs_bucketer_destroy(s->bucketer), "gs_bucketer_destroy");
    if (s->ps != GS_PS_NULL) {
        rc |= sync_failed(s, gs_ps_destroy(s->ps), "gs_ps_destroy");
    }
    free(s->push);
    memset(s, 0, sizeof(*s));
    return rc;
}
