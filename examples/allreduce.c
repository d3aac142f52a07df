/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The smallest complete gradsync program: every rank fills a "gradient"
 * with its rank number, averages it across all ranks in place and checks
 * the result. Run it with the local launcher:
 *
 *     gsrun -n 4 ./allreduce [count]
 */
#include <stdio.h>
#include <stdlib.h>

#include <gradsync/gradsync.h>

int main(int argc, char **argv)
{
    size_t n = (argc > 1) ? strtoull(argv[1], NULL, 10) : 1000000;
    gs_comm_t comm;
    int rank, size;
    float *grad;
    size_t wrong = 0;

    if (gs_comm_init_env(&comm, NULL) != GS_OK) {
        fprintf(stderr, "%s\n", gs_last_error());
        return 1;
    }
    gs_comm_rank(comm, &rank);
    gs_comm_size(comm, &size);

    grad = malloc(n * sizeof(float));
    if (grad == NULL) {
        fprintf(stderr, "out of memory\n");
        gs_comm_destroy(comm);
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        grad[i] = (float)rank;
    }

    if (gs_allreduce(comm, grad, grad, n, GS_DTYPE_F32, GS_OP_AVG) != GS_OK) { /* in place */
        fprintf(stderr, "allreduce failed: %s\n", gs_last_error());
        gs_comm_destroy(comm);
        free(grad);
        return 1;
    }

    /* The average of 0, 1, ..., size-1. */
    const float expect = (float)(size - 1) / 2.0f;
    for (size_t i = 0; i < n; i++) {
        wrong += (grad[i] != expect);
    }
    printf("rank %d of %d: averaged %zu floats, %zu wrong (expected %.1f everywhere)\n", rank, size,
           n, wrong, (double)expect);

    free(grad);
    gs_comm_destroy(comm);
    return wrong == 0 ? 0 : 1;
}
