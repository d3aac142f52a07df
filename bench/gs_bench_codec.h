/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The codec parts of gs-bench (bench/gs_bench_codec.c): the `gs-bench codec`
 * subcommand, and the helpers behind `gs-bench allreduce --codec NAME`
 * (codec names, deterministic normal input, relative error against the
 * exact result). Public API only; nothing here communicates.
 */
#ifndef GRADSYNC_BENCH_GS_BENCH_CODEC_H
#define GRADSYNC_BENCH_GS_BENCH_CODEC_H

#include <stddef.h>

#include "gradsync/compress.h"

/** `gs-bench codec ...` (argv[0] is "codec"); returns the exit status. */
int gs_bench_codec_main(int argc, char **argv);

/** The codec called @p name (GS_CODEC_MAP short names); 0, or -1 when unknown. */
int gs_bench_codec_lookup(const char *name, gs_codec_kind_t *kind_out);

/** Space-separated list of the codec names, for the usage text. */
const char *gs_bench_codec_names(void);

/** Rank @p rank's input of the --codec runs: element i is N(0, 1), from (rank, i) alone. */
void gs_bench_codec_fill(float *buf, size_t count, int rank);

/**
 * ||out - exact|| / ||exact||, where exact is the sum (or, with @p avg, the
 * average) over @p nranks ranks of gs_bench_codec_fill()'s inputs, computed
 * in f64 and rounded to f32 (the result an uncompressed all-reduce gives).
 */
double gs_bench_codec_relerr(const float *out, size_t count, int nranks, int avg);

#endif /* GRADSYNC_BENCH_GS_BENCH_CODEC_H */
