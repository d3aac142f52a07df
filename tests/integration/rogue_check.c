/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A rogue peer in a compressed all-reduce, reduce-scatter or all-gather: the rank started with
 * GS_COMP_TEST_CORRUPT flips one byte of every compressed payload it sends
 * (a header field, or the first top-k index). Every other rank must fail
 * the call with a clear error (GS_ERR_PROTOCOL from its own checks, or
 * GS_ERR_PEER_FAILED / GS_ERR_ABORTED when a peer's failure reached it
 * first), never read out of bounds (the ASan run) and never hang (bounded
 * by GS_TIMEOUT_MS, and gsrun's timeout); then the communicator is
 * destroyed. The rogue rank itself may fail or not.
 *   gsrun -n N rogue_check CODEC [RATIO [COLL]]   (CODEC: int8, sign, topk;
 *                                                COLL: allreduce (default), reduce_scatter,
 *                                                allgather)
 * Prints "rank R: STATUS: message" and exits 0 when the outcome is one of
 * those, 1 otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gradsync/compress.h>
#include <gradsync/gradsync.h>

#define COUNT 20011

int main(int argc, char **argv)
{
    gs_codec_config_t cc = GS_CODEC_CONFIG_INIT;
    gs_allreduce_opts_t opts = GS_ALLREDUCE_OPTS_INIT;
    gs_coll_opts_t copts = GS_COLL_OPTS_INIT;
    const char *coll = (argc > 3) ? argv[3] : "allreduce";
    int size = 1;
    const int rogue = getenv("GS_COMP_TEST_CORRUPT") != NULL;
    gs_comm_t comm = NULL;
    gs_status_t st;
    float *buf;
    int rank = -1, ok;

    if (argc < 2) {
        fprintf(stderr, "usage: rogue_check CODEC [RATIO [COLL]]\n");
        return 2;
    }
    if (strcmp(argv[1], "int8") == 0) {
        cc.kind = GS_CODEC_INT8;
    } else if (strcmp(argv[1], "sign") == 0) {
        cc.kind = GS_CODEC_SIGN;
    } else if (strcmp(argv[1], "topk") == 0) {
        cc.kind = GS_CODEC_TOPK;
    } else {
        fprintf(stderr, "rogue_check: unknown codec %s\n", argv[1]);
        return 2;
    }
    cc.ratio = (argc > 2) ? atof(argv[2]) : 0.01;
    buf = malloc(COUNT * sizeof(float));
    if ((buf == NULL) || (gs_comm_init_env(&comm, NULL) != GS_OK) ||
        (gs_comm_rank(comm, &rank) != GS_OK) || (gs_comm_size(comm, &size) != GS_OK)) {
        fprintf(stderr, "rank %d: setup failed: %s\n", rank, gs_last_error());
        return 1;
    }
    for (size_t i = 0; i < COUNT; i++) {
        buf[i] = (float)((i * 7919u + (unsigned)rank * 31u) % 1000u) * 0.001f - 0.5f;
    }
    opts.codec = &cc;
    copts.codec = &cc;
    if (strcmp(coll, "reduce_scatter") == 0) {
        /* COUNT / size elements per rank, in place (rank r's block lands at the start). */
        st = gs_reduce_scatter_ex(comm, buf, buf, COUNT / (size_t)size, GS_DTYPE_F32, GS_OP_SUM,
                                  &copts);
    } else if (strcmp(coll, "allgather") == 0) {
        const size_t blk = COUNT / (size_t)size;
        st = gs_allgather_ex(comm, buf + (size_t)rank * blk, buf, blk, GS_DTYPE_F32, &copts);
    } else {
        st = gs_allreduce_ex(comm, buf, buf, COUNT, GS_DTYPE_F32, GS_OP_SUM, &opts);
    }
    printf("rank %d%s: %s: %s\n", rank, rogue ? " (rogue)" : "", gs_status_name(st),
           (st == GS_OK) ? "" : gs_last_error());
    ok = rogue || (st == GS_ERR_PROTOCOL) || (st == GS_ERR_PEER_FAILED) || (st == GS_ERR_ABORTED);
    if (!ok) {
        printf("rank %d: FAIL: expected GS_ERR_PROTOCOL, GS_ERR_PEER_FAILED or GS_ERR_ABORTED\n",
               rank);
    }
    (void)gs_comm_destroy(comm);
    free(buf);
    return ok ? 0 : 1;
}
