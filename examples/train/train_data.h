/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Data sets of the training example: a deterministic synthetic
 * classification problem (Gaussian clusters with label noise), a CSV
 * loader for real data, the held-out split and feature standardisation.
 * Everything here is local to one process and knows nothing of gradsync:
 * every rank builds the same full data set and takes its own shard.
 */
#ifndef GRADSYNC_EXAMPLES_TRAIN_DATA_H
#define GRADSYNC_EXAMPLES_TRAIN_DATA_H

#include <stddef.h>
#include <stdint.h>

/** A labelled data set: n samples of d f32 features, labels in [0, classes). */
typedef struct train_data {
    size_t n;    /* samples */
    size_t d;    /* features per sample */
    int classes; /* number of classes */
    float *x;    /* n * d, row-major */
    int *y;      /* n labels */
} train_data_t;

/** Parameters of the synthetic data set. */
typedef struct synth_params {
    size_t samples; /* total, train + held-out */
    size_t features;
    int classes;
    int clusters;       /* Gaussian clusters per class */
    double spread;      /* standard deviation of the cluster centres (unit noise around them) */
    double label_noise; /* probability that a label is replaced by a uniform random class */
    uint64_t seed;
} synth_params_t;

/* splitmix64 stream and the draws built on it (deterministic on every platform). */
uint64_t train_rng_next(uint64_t *state);
double train_rng_uniform(uint64_t *state);         /* in (0, 1) */
double train_rng_normal(uint64_t *state);          /* N(0, 1) */
size_t train_rng_below(uint64_t *state, size_t n); /* in [0, n), n > 0 */

/** Fill @p out with the synthetic data set. @return 0, or -1 (message on stderr). */
int train_data_synth(const synth_params_t *p, train_data_t *out);

/**
 * Load @p path: one sample per line, the integer label first, then the
 * features, separated by commas (spaces around them are allowed). Blank
 * lines and lines starting with '#' are skipped. The feature count comes
 * from the first sample and the number of classes is the largest label + 1.
 * @return 0, or -1 with a message naming the file and line in @p err.
 */
int train_data_load_csv(const char *path, train_data_t *out, char *err, size_t err_size);

/** Shuffle the samples in place with @p seed (Fisher-Yates). */
void train_data_shuffle(train_data_t *data, uint64_t seed);

/**
 * Split @p all into the first n - held_out samples (@p train) and the rest
 * (@p test); both alias @p all's arrays.
 */
void train_data_split(const train_data_t *all, size_t held_out, train_data_t *train,
                      train_data_t *test);

/** Standardise every feature of @p all with the mean and deviation over @p stats. */
void train_data_standardise(const train_data_t *stats, train_data_t *all);

void train_data_free(train_data_t *data);

#endif /* GRADSYNC_EXAMPLES_TRAIN_DATA_H */
