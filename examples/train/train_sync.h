/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How examples/train turns each rank's local gradient into new parameters
 * (--sync), and the deliberate straggler (--slow-rank, --slow-ms):
 *
 *   allreduce  gs_allreduce_ex(GS_OP_AVG) of the flat gradient (through the
 *              codec, with one error-feedback residual, when one is set),
 *              then SGD with momentum on every rank.
 *   bucket     a gs_bucketer over the same flat buffer, one tensor per
 *              layer's weight and bias, marked ready last layer first as a
 *              backward pass would, then the same update. Same arithmetic as
 *              allreduce when the grouping gives one bucket (the default for
 *              models under 1 MiB of gradient).
 *   ps-bsp, ps-ssp=N, ps-asp
 *              a colocated parameter server (every rank a worker and the
 *              server of a shard; the parameters one key split over every
 *              server). Each step pushes the local gradient divided by the
 *              number of workers, so that a BSP round's sum is the
 *              all-reduce's average; the servers apply SGD with momentum
 *              (the run's lr and momentum); the worker pulls the parameters
 *              and ends its clock.
 *
 * What it does not do: the forward and backward passes, evaluation and
 * printing stay in train.c. The helpers print their own errors (stderr,
 * naming the rank) and return 0 on success, 1 on a gradsync error, 2 on a
 * usage error.
 */
#ifndef TRAIN_SYNC_H
#define TRAIN_SYNC_H

#include <stdbool.h>
#include <stddef.h>

#include <gradsync/bucket.h>
#include <gradsync/compress.h>
#include <gradsync/gradsync.h>
#include <gradsync/ps.h>

#define TRAIN_SYNC_MAX_TENSORS 8

typedef enum train_sync_mode {
    TRAIN_SYNC_ALLREDUCE = 0,
    TRAIN_SYNC_BUCKET,
    TRAIN_SYNC_PS_BSP,
    TRAIN_SYNC_PS_SSP,
    TRAIN_SYNC_PS_ASP
} train_sync_mode_t;

/* What the command line chose. */
typedef struct train_sync_opts {
    train_sync_mode_t mode;
    int staleness;     /* ps-ssp=N */
    int slow_rank;     /* -1: no straggler */
    int slow_ms;       /* sleep of the straggler per step */
    long bucket_bytes; /* bucket: bytes per bucket (first one too); < 0: library default */
} train_sync_opts_t;

/* The flat parameter, gradient and velocity buffers (nparams floats each,
 * owned by the caller) and the layer tensors inside them, forward order. */
typedef struct train_sync_model {
    float *theta, *grad, *vel;
    size_t nparams;
    size_t ntensors;
    size_t count[TRAIN_SYNC_MAX_TENSORS]; /* back to back from offset 0 */
} train_sync_model_t;

typedef struct train_sync {
    train_sync_opts_t o;
    gs_comm_t comm;
    int rank, size;
    train_sync_model_t m;
    float lr, momentum;
    const gs_codec_config_t *codec; /* NULL: uncompressed */
    bool ef;
    gs_ef_t residual; /* allreduce mode's error feedback */
    gs_bucketer_t bucketer;
    size_t ids[TRAIN_SYNC_MAX_TENSORS];
    gs_ps_t ps;
    float *push; /* ps: the scaled gradient in flight */
} train_sync_t;

/* Parses a --sync value ("allreduce", "bucket", "ps-bsp", "ps-ssp=N",
 * "ps-asp") into o->mode and o->staleness; false when it is not one. */
bool train_sync_parse(const char *s, train_sync_opts_t *o);

/* The mode's name as --sync spells it, into buf. */
const char *train_sync_name(const train_sync_opts_t *o, char *buf, size_t len);

/* True when every rank holds the same parameters after every step (all but
 * ps-ssp and ps-asp), so that evaluation may be collective. */
bool train_sync_replicated(const train_sync_opts_t *o);

/* Sets up the mode over comm. codec: NULL for none; ef: error feedback
 * with a lossy codec (the parameter server always keeps it). Collective. */
int train_sync_open(train_sync_t *s, gs_comm_t comm, const train_sync_opts_t *o,
                    const train_sync_model_t *m, double lr, double momentum,
                    const gs_codec_config_t *codec, bool ef);

/* One step: the straggler sleeps, then m.grad (this rank's batch-averaged
 * gradient) becomes new parameters in m.theta. m.grad is clobbered. */
int train_sync_step(train_sync_t *s);

/* After the last step: every rank ends with the servers' final parameters
 * (ps modes: a barrier, then one pull); nothing to do otherwise. Collective. */
int train_sync_finish(train_sync_t *s);

/* Frees everything; returns 1 if a destroy call failed. Collective in ps
 * and bucket modes (their destroy calls are). */
int train_sync_close(train_sync_t *s);

#endif /* TRAIN_SYNC_H */
