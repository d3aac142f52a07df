/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The codec parts of gs-bench (bench/gs_bench_codec.c): the `gs-bench codec`
 * subcommand, and the helpers behind `gs-bench allreduce|reduce_scatter|
 * allgather --codec NAME` (codec names, deterministic normal input, relative
 * error against the exact result). Public API only; nothing here
 * communicates.
 */
#ifndef GRADSYNC_BENCH_GS_BENCH_CODEC_H
#define GRADSYNC_BENCH_GS_BENCH_CODEC_H

#include <stddef.h>

#include "gradsync/compress.h"
#include "gradsync/gradsync.h"

/** `gs-bench codec ...` (argv[0] is "codec"); returns the exit status. */
int gs_bench_codec_main(int argc, char **argv);

/** The codec called @p name (GS_CODEC_MAP short names); 0, or -1 when unknown. */
int gs_bench_codec_lookup(const char *name, gs_codec_kind_t *kind_out);

/** Space-separated list of the codec names, for the usage text. */
const char *gs_bench_codec_names(void);

/** Rank @p rank's input of the --codec runs: element i is N(0, 1), from (rank, i) alone. */
void gs_bench_codec_fill(float *buf, size_t count, int rank);

/**
 * ||out - exact|| / ||exact|| for rank @p rank's output of collective @p coll
 * on gs_bench_codec_fill()'s inputs, @p count as the call's count argument
 * (elements per rank's block for the sharded shapes):
 * - GS_COLL_TYPE_ALLREDUCE: out[i] (i < count) is the sum over ranks of input i;
 * - GS_COLL_TYPE_REDUCE_SCATTER: out[i] (i < count) is the sum over ranks of
 *   input rank * count + i;
 * - GS_COLL_TYPE_ALLGATHER: out[q * count + j] (q < nranks) is rank q's input j.
 * Sums (or, with @p avg, averages) are computed in f64 and rounded to f32:
 * the result an uncompressed call gives.
 */
double gs_bench_codec_relerr(const float *out, gs_coll_type_t coll, size_t count, int nranks,
                             int rank, int avg);

/** Elements of one rank's input of collective @p coll with count argument @p count (the
 * send buffer: count * nranks for reduce-scatter, count otherwise). */
size_t gs_bench_codec_in_elems(gs_coll_type_t coll, size_t count, int nranks);

#endif /* GRADSYNC_BENCH_GS_BENCH_CODEC_H */
