/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gs-bench bucket` (bench/gs_bench_bucket.c): how much of the gradient
 * all-reduce a bucketer (gradsync/bucket.h) hides behind a simulated
 * backward pass over a real model's parameter list, against a plain
 * all-reduce of the same gradients after the pass. Public API only.
 */
#ifndef GRADSYNC_BENCH_GS_BENCH_BUCKET_H
#define GRADSYNC_BENCH_GS_BENCH_BUCKET_H

/** `gs-bench bucket ...` (argv[0] is "bucket"); returns the exit status. */
int gs_bench_bucket_main(int argc, char **argv);

#endif /* GRADSYNC_BENCH_GS_BENCH_BUCKET_H */
