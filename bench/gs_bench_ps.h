/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gs-bench ps` (bench/gs_bench_ps.c): latency of small pushes and pulls,
 * and one BSP iteration over a whole model against an all-reduce of the
 * same bytes, through the parameter server's public API.
 */
#ifndef GRADSYNC_BENCH_GS_BENCH_PS_H
#define GRADSYNC_BENCH_GS_BENCH_PS_H

/** `gs-bench ps ...` (argv[0] is "ps"); returns the exit status. */
int gs_bench_ps_main(int argc, char **argv);

#endif /* GRADSYNC_BENCH_GS_BENCH_PS_H */
