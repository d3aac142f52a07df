/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Data sets of the training example (see train_data.h): the synthetic
 * Gaussian-cluster problem, the CSV loader with line-accurate errors, the
 * shuffle, the held-out split and standardisation. No gradsync calls.
 */
#include "train_data.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CSV_MAX_LABEL 65535

uint64_t train_rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double train_rng_uniform(uint64_t *state)
{
    return ((double)(train_rng_next(state) >> 11) + 0.5) / 9007199254740992.0;
}

double train_rng_normal(uint64_t *state)
{
    const double u1 = train_rng_uniform(state);
    const double u2 = train_rng_uniform(state);

    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

size_t train_rng_below(uint64_t *state, size_t n)
{
    return (size_t)(train_rng_uniform(state) * (double)n) % n;
}

static int data_alloc(train_data_t *data, size_t n, size_t d)
{
    data->n = n;
    data->d = d;
    data->x = malloc((n * d > 0 ? n * d : 1) * sizeof(float));
    data->y = malloc((n > 0 ? n : 1) * sizeof(int));
    if ((data->x == NULL) || (data->y == NULL)) {
        train_data_free(data);
        return -1;
    }
    return 0;
}

int train_data_synth(const synth_params_t *p, train_data_t *out)
{
    const size_t ncent = (size_t)p->classes * (size_t)p->clusters;
    uint64_t rng = p->seed * 0x2545f4914f6cdd1dull + 1;
    train_data_t data = {0};
    float *centres;

    if ((p->samples == 0) || (p->features == 0) || (p->classes < 2) || (p->clusters < 1)) {
        fprintf(stderr, "train: synthetic data needs samples, features >= 1, classes >= 2\n");
        return -1;
    }
    centres = malloc(ncent * p->features * sizeof(float));
    if ((centres == NULL) || (data_alloc(&data, p->samples, p->features) != 0)) {
        free(centres);
        fprintf(stderr, "train: out of memory for %zu x %zu samples\n", p->samples, p->features);
        return -1;
    }
    data.classes = p->classes;
    for (size_t i = 0; i < ncent * p->features; i++) {
        centres[i] = (float)(p->spread * train_rng_normal(&rng));
    }
    for (size_t s = 0; s < p->samples; s++) {
        /* Centre k belongs to class k % classes: each class is a mixture. */
        const size_t k = train_rng_below(&rng, ncent);
        float *row = data.x + s * p->features;

        for (size_t j = 0; j < p->features; j++) {
            row[j] = centres[k * p->features + j] + (float)train_rng_normal(&rng);
        }
        data.y[s] = (int)(k % (size_t)p->classes);
        if (train_rng_uniform(&rng) < p->label_noise) {
            data.y[s] = (int)train_rng_below(&rng, (size_t)p->classes);
        }
    }
    free(centres);
    *out = data;
    return 0;
}

/* ----------------------------------------------------------------------- */
/* CSV                                                                     */
/* ----------------------------------------------------------------------- */

typedef struct csv_reader {
    const char *path;
    size_t line;
    char *err;
    size_t err_size;
} csv_reader_t;

__attribute__((format(printf, 2, 3))) static int csv_error(csv_reader_t *r, const char *fmt, ...)
{
    int used = snprintf(r->err, r->err_size, "%s:%zu: ", r->path, r->line);
    va_list ap;

    if ((used >= 0) && ((size_t)used < r->err_size)) {
        va_start(ap, fmt);
        vsnprintf(r->err + used, r->err_size - (size_t)used, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Copy of a field for an error message: up to the next separator, at most 24 bytes. */
static const char *csv_field_text(const char *s, char *buf, size_t size)
{
    size_t i = 0;

    while ((s[i] != '\0') && (s[i] != ',') && (s[i] != '\n') && (s[i] != '\r') && (i + 1 < size)) {
        buf[i] = s[i];
        i++;
    }
    buf[i] = '\0';
    return buf;
}

static const char *skip_space(const char *s)
{
    while ((*s == ' ') || (*s == '\t')) {
        s++;
    }
    return s;
}

/* Parse one line into label and features (appended to *vals). Returns the
 * feature count, or -1 on a malformed line. */
static long csv_parse_line(csv_reader_t *r, const char *s, int *label, float **vals, size_t *cap,
                           size_t *len)
{
    char field[25];
    const char *p = skip_space(s);
    char *end;
    long features = 0, lab;

    errno = 0;
    lab = strtol(p, &end, 10);
    end = (char *)skip_space(end);
    if ((end == p) || (errno != 0) ||
        ((*end != ',') && (*end != '\0') && (*end != '\n') && (*end != '\r'))) {
        return csv_error(r, "bad label '%s' (expected an integer)",
                         csv_field_text(p, field, sizeof(field)));
    }
    if ((lab < 0) || (lab > CSV_MAX_LABEL)) {
        return csv_error(r, "label %ld out of range 0..%d", lab, CSV_MAX_LABEL);
    }
    *label = (int)lab;
    p = end;
    while (*p == ',') {
        float v;

        p = skip_space(p + 1);
        errno = 0;
        v = strtof(p, &end);
        if ((end == p) || (errno == ERANGE && (fabsf(v) > 1.0f)) || !isfinite(v)) {
            return csv_error(r, "feature %ld: bad number '%s'", features + 1,
                             csv_field_text(p, field, sizeof(field)));
        }
        end = (char *)skip_space(end);
        if ((*end != ',') && (*end != '\0') && (*end != '\n') && (*end != '\r')) {
            return csv_error(r, "feature %ld: bad number '%s'", features + 1,
                             csv_field_text(p, field, sizeof(field)));
        }
        if (*len == *cap) {
            const size_t ncap = (*cap == 0) ? 4096 : 2 * *cap;
            float *nv = realloc(*vals, ncap * sizeof(float));

            if (nv == NULL) {
                return csv_error(r, "out of memory");
            }
            *vals = nv;
            *cap = ncap;
        }
        (*vals)[(*len)++] = v;
        features++;
        p = end;
    }
    return features;
}

int train_data_load_csv(const char *path, train_data_t *out, char *err, size_t err_size)
{
    csv_reader_t r = {.path = path, .line = 0, .err = err, .err_size = err_size};
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t line_cap = 0, vcap = 0, vlen = 0, ycap = 0, n = 0, d = 0;
    float *vals = NULL;
    int *labels = NULL, maxlab = -1, rc = -1;

    if (f == NULL) {
        snprintf(err, err_size, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    while (getline(&line, &line_cap, f) != -1) {
        const char *s = skip_space(line);
        long nf;
        int lab = 0;

        r.line++;
        if ((*s == '\0') || (*s == '\n') || (*s == '\r') || (*s == '#')) {
            continue;
        }
        nf = csv_parse_line(&r, s, &lab, &vals, &vcap, &vlen);
        if (nf < 0) {
            goto out;
        }
        if (nf == 0) {
            csv_error(&r, "no features after the label");
            goto out;
        }
        if (n == 0) {
            d = (size_t)nf;
        } else if ((size_t)nf != d) {
            csv_error(&r, "%ld features, but the first sample has %zu", nf, d);
            goto out;
        }
        if (n == ycap) {
            const size_t ncap = (ycap == 0) ? 1024 : 2 * ycap;
            int *ny = realloc(labels, ncap * sizeof(int));

            if (ny == NULL) {
                csv_error(&r, "out of memory");
                goto out;
            }
            labels = ny;
            ycap = ncap;
        }
        labels[n++] = lab;
        maxlab = (lab > maxlab) ? lab : maxlab;
    }
    if (ferror(f)) {
        snprintf(err, err_size, "%s: read error: %s", path, strerror(errno));
        goto out;
    }
    if (n < 2) {
        snprintf(err, err_size, "%s: %zu samples; need at least 2", path, n);
        goto out;
    }
    if (maxlab < 1) {
        snprintf(err, err_size, "%s: every label is 0; need at least 2 classes", path);
        goto out;
    }
    out->n = n;
    out->d = d;
    out->classes = maxlab + 1;
    out->x = vals;
    out->y = labels;
    vals = NULL;
    labels = NULL;
    rc = 0;
out:
    free(line);
    free(vals);
    free(labels);
    fclose(f);
    return rc;
}

/* ----------------------------------------------------------------------- */
/* Shuffle, split, standardise                                             */
/* ----------------------------------------------------------------------- */

void train_data_shuffle(train_data_t *data, uint64_t seed)
{
    uint64_t rng = seed ^ 0x5851f42d4c957f2dull;
    float *tmp = malloc(data->d * sizeof(float));

    if (tmp == NULL) {
        return; /* order only matters for the split, which then keeps the file order */
    }
    for (size_t i = data->n; i > 1; i--) {
        const size_t j = train_rng_below(&rng, i);
        const int t = data->y[i - 1];

        data->y[i - 1] = data->y[j];
        data->y[j] = t;
        memcpy(tmp, data->x + (i - 1) * data->d, data->d * sizeof(float));
        memcpy(data->x + (i - 1) * data->d, data->x + j * data->d, data->d * sizeof(float));
        memcpy(data->x + j * data->d, tmp, data->d * sizeof(float));
    }
    free(tmp);
}

void train_data_split(const train_data_t *all, size_t held_out, train_data_t *train,
                      train_data_t *test)
{
    const size_t ntrain = all->n - held_out;

    *train = (train_data_t){ntrain, all->d, all->classes, all->x, all->y};
    *test =
        (train_data_t){held_out, all->d, all->classes, all->x + ntrain * all->d, all->y + ntrain};
}

void train_data_standardise(const train_data_t *stats, train_data_t *all)
{
    for (size_t j = 0; j < all->d; j++) {
        double sum = 0, sq = 0, mean, sd;

        for (size_t i = 0; i < stats->n; i++) {
            const double v = stats->x[i * stats->d + j];

            sum += v;
            sq += v * v;
        }
        mean = sum / (double)stats->n;
        sd = sqrt(fmax(sq / (double)stats->n - mean * mean, 0.0));
        sd = (sd > 1e-12) ? sd : 1.0;
        for (size_t i = 0; i < all->n; i++) {
            all->x[i * all->d + j] = (float)((all->x[i * all->d + j] - mean) / sd);
        }
    }
}

void train_data_free(train_data_t *data)
{
    free(data->x);
    free(data->y);
    data->x = NULL;
    data->y = NULL;
}
