/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the NCCL engine (src/device) that need no GPU: the
 * dtype and op tables over every gradsync dtype and op, the status mapping
 * of every ncclResult_t value (status, NCCL's name in the sentence, the
 * "Duplicate GPU" sentence, asynchronous system errors as failed peers),
 * the argument checks made before any NCCL or CUDA call, and, on a machine
 * without a GPU, unique id and create failing cleanly and quickly. Tests
 * that need a GPU live in tests/gpu. Builds without NCCL compile one
 * skipped test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#ifdef GS_WITH_NCCL

#include "core/clock.h"
#include "core/error.h"
#include "gradsync/gradsync.h"
#include "device/nccl_engine.h"

#include <cuda_runtime.h>
#include <nccl.h>

#define ARRAY_LEN(_a) (sizeof(_a) / sizeof((_a)[0]))

static const int nccl_sentinel = -12345;

_Static_assert(GS_NCCL_ID_BYTES == sizeof(ncclUniqueId), "id size");

/* The expected table, written out independently of nccl_map.c. */
static const struct {
    gs_dtype_t dtype;
    ncclDataType_t nccl;
    int is_float;
} dtype_rows[] = {
    {GS_DTYPE_F32, ncclFloat32, 1}, {GS_DTYPE_F64, ncclFloat64, 1},
    {GS_DTYPE_F16, ncclFloat16, 1}, {GS_DTYPE_BF16, ncclBfloat16, 1},
    {GS_DTYPE_I8, ncclInt8, 0},     {GS_DTYPE_U8, ncclUint8, 0},
    {GS_DTYPE_I32, ncclInt32, 0},   {GS_DTYPE_I64, ncclInt64, 0},
};

static const struct {
    gs_op_t op;
    ncclRedOp_t nccl;
} op_rows[] = {
    {GS_OP_SUM, ncclSum},
    {GS_OP_PROD, ncclProd},
    {GS_OP_MIN, ncclMin},
    {GS_OP_MAX, ncclMax},
    {GS_OP_AVG, ncclAvg},
    /* NCCL has no bitwise ops: GS_ERR_UNSUPPORTED (the NCCL value is unused). */
    {GS_OP_BAND, ncclSum},
    {GS_OP_BOR, ncclSum},
    {GS_OP_BXOR, ncclSum},
};

static const struct {
    ncclResult_t result;
    const char *name;
    gs_status_t status;       /* as returned by a call */
    gs_status_t async_status; /* as read by ncclCommGetAsyncError */
} result_rows[] = {
    {ncclSuccess, "ncclSuccess", GS_OK, GS_OK},
    {ncclUnhandledCudaError, "ncclUnhandledCudaError", GS_ERR_CUDA, GS_ERR_CUDA},
    {ncclSystemError, "ncclSystemError", GS_ERR_SYSTEM, GS_ERR_PEER_FAILED},
    {ncclInternalError, "ncclInternalError", GS_ERR_INTERNAL, GS_ERR_INTERNAL},
    {ncclInvalidArgument, "ncclInvalidArgument", GS_ERR_INVALID_ARG, GS_ERR_INVALID_ARG},
    {ncclInvalidUsage, "ncclInvalidUsage", GS_ERR_INVALID_USAGE, GS_ERR_INVALID_USAGE},
    {ncclRemoteError, "ncclRemoteError", GS_ERR_PEER_FAILED, GS_ERR_PEER_FAILED},
    {ncclInProgress, "ncclInProgress", GS_INPROGRESS, GS_INPROGRESS},
};

static int machine_has_gpu(void)
{
    int count = 0;

    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return count > 0;
}

static void test_nccl_dtype_every_dtype_maps(void **state)
{
    (void)state;
    assert_int_equal(ARRAY_LEN(dtype_rows), GS_DTYPE_COUNT);
    for (size_t i = 0; i < ARRAY_LEN(dtype_rows); i++) {
        int out = nccl_sentinel;

        assert_int_equal(gs__nccl_dtype(dtype_rows[i].dtype, &out), GS_OK);
        assert_int_equal(out, (int)dtype_rows[i].nccl);
    }
}

static void test_nccl_dtype_invalid_is_refused(void **state)
{
    static const int bad[] = {-1, GS_DTYPE_COUNT, GS_DTYPE_COUNT + 1, 1000};
    int out = nccl_sentinel;

    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        assert_int_equal(gs__nccl_dtype((gs_dtype_t)bad[i], &out), GS_ERR_INVALID_ARG);
        assert_int_equal(out, nccl_sentinel); /* outputs are written only on success */
        assert_non_null(strstr(gs_last_error(), "dtype"));
    }
    assert_int_equal(gs__nccl_dtype(GS_DTYPE_F32, NULL), GS_ERR_INVALID_ARG);
}

static void test_nccl_op_every_op_and_dtype(void **state)
{
    (void)state;
    assert_int_equal(ARRAY_LEN(op_rows), GS_OP_COUNT);
    for (size_t o = 0; o < ARRAY_LEN(op_rows); o++) {
        for (size_t d = 0; d < ARRAY_LEN(dtype_rows); d++) {
            int out = nccl_sentinel;
            const gs_status_t status = gs__nccl_op(op_rows[o].op, dtype_rows[d].dtype, &out);

            if ((op_rows[o].op == GS_OP_BAND) || (op_rows[o].op == GS_OP_BOR) ||
                (op_rows[o].op == GS_OP_BXOR)) {
                assert_int_equal(status, GS_ERR_UNSUPPORTED);
                assert_int_equal(out, nccl_sentinel);
                assert_non_null(strstr(gs_last_error(), "bitwise"));
            } else if ((op_rows[o].op == GS_OP_AVG) && !dtype_rows[d].is_float) {
                assert_int_equal(status, GS_ERR_INVALID_ARG);
                assert_int_equal(out, nccl_sentinel);
                assert_non_null(strstr(gs_last_error(), "GS_OP_AVG"));
            } else {
                assert_int_equal(status, GS_OK);
                assert_int_equal(out, (int)op_rows[o].nccl);
            }
        }
    }
}

static void test_nccl_op_invalid_is_refused(void **state)
{
    static const int bad_ops[] = {-1, GS_OP_COUNT, 77};
    int out = nccl_sentinel;

    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(bad_ops); i++) {
        assert_int_equal(gs__nccl_op((gs_op_t)bad_ops[i], GS_DTYPE_F32, &out), GS_ERR_INVALID_ARG);
        assert_int_equal(out, nccl_sentinel);
    }
    /* A valid op with an unknown dtype. */
    assert_int_equal(gs__nccl_op(GS_OP_SUM, (gs_dtype_t)GS_DTYPE_COUNT, &out), GS_ERR_INVALID_ARG);
    assert_int_equal(out, nccl_sentinel);
    assert_int_equal(gs__nccl_op(GS_OP_SUM, GS_DTYPE_F32, NULL), GS_ERR_INVALID_ARG);
}

static void test_nccl_status_every_result(void **state)
{
    (void)state;
    assert_int_equal(ARRAY_LEN(result_rows), ncclNumResults);
    for (size_t i = 0; i < ARRAY_LEN(result_rows); i++) {
        for (int async = 0; async <= 1; async++) {
            const gs_status_t want = async ? result_rows[i].async_status : result_rows[i].status;
            gs_status_t got;

            gs__error_copy_in("untouched");
            got = gs__nccl_status_msg(result_rows[i].result, async, "rank 3: ncclAllReduce",
                                      "a line from NCCL");
            assert_int_equal(got, want);
            assert_string_equal(gs__nccl_result_name(result_rows[i].result), result_rows[i].name);
            if ((want == GS_OK) || (want == GS_INPROGRESS)) {
                assert_string_equal(gs_last_error(), "untouched");
                continue;
            }
            /* The call, NCCL's name, NCCL's description and NCCL's own text. */
            assert_non_null(strstr(gs_last_error(), "rank 3: ncclAllReduce"));
            assert_non_null(strstr(gs_last_error(), result_rows[i].name));
            assert_non_null(strstr(gs_last_error(), ncclGetErrorString(result_rows[i].result)));
            assert_non_null(strstr(gs_last_error(), "a line from NCCL"));
        }
        /* The real entry point (NCCL's last error as the text) maps alike. */
        gs__error_copy_in("untouched");
        assert_int_equal(gs__nccl_status(result_rows[i].result, "ncclSend"), result_rows[i].status);
        if (GS_IS_ERR(result_rows[i].status)) {
            assert_non_null(strstr(gs_last_error(), result_rows[i].name));
        } else {
            assert_string_equal(gs_last_error(), "untouched");
        }
    }
}

static void test_nccl_status_unknown_result_is_internal(void **state)
{
    static const int bad[] = {-1, ncclNumResults, ncclNumResults + 1, 4242};

    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        assert_int_equal(gs__nccl_status_msg(bad[i], 0, "ncclBroadcast", NULL), GS_ERR_INTERNAL);
        assert_non_null(strstr(gs_last_error(), "unknown NCCL result"));
        assert_int_equal(gs__nccl_status(bad[i], "ncclBroadcast"), GS_ERR_INTERNAL);
        assert_string_equal(gs__nccl_result_name(bad[i]), "unknown NCCL result");
    }
    /* No call name and no text still give a sentence. */
    assert_int_equal(gs__nccl_status_msg(ncclInternalError, 0, NULL, NULL), GS_ERR_INTERNAL);
    assert_non_null(strstr(gs_last_error(), "ncclInternalError"));
}

static void test_nccl_status_duplicate_gpu_sentence(void **state)
{
    static const char nccl_text[] =
        "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000";

    (void)state;
    for (int async = 0; async <= 1; async++) {
        assert_int_equal(
            gs__nccl_status_msg(ncclInvalidUsage, async, "rank 1 of 2: NCCL init", nccl_text),
            GS_ERR_INVALID_USAGE);
        assert_non_null(strstr(gs_last_error(), "rank 1 of 2: NCCL init"));
        assert_non_null(strstr(gs_last_error(), "one GPU per rank"));
        assert_non_null(strstr(gs_last_error(), "GS_CUDA_PATH=staged"));
        assert_non_null(strstr(gs_last_error(), "ncclInvalidUsage"));
        assert_non_null(strstr(gs_last_error(), "Duplicate GPU detected"));
    }
    /* Other invalid usage keeps the plain sentence. */
    assert_int_equal(gs__nccl_status_msg(ncclInvalidUsage, 0, "ncclSend", "something else"),
                     GS_ERR_INVALID_USAGE);
    assert_null(strstr(gs_last_error(), "one GPU per rank"));
    /* The same NCCL text under another code is not a duplicate GPU. */
    assert_int_equal(gs__nccl_status_msg(ncclSystemError, 0, "x", nccl_text), GS_ERR_SYSTEM);
    assert_null(strstr(gs_last_error(), "one GPU per rank"));
}

static void test_nccl_version_is_known(void **state)
{
    (void)state;
    /* ncclGetVersion needs no GPU; the build requires 2.18 or newer. */
    assert_true(gs__nccl_version() >= 21800);
}

static void test_nccl_create_checks_arguments_first(void **state)
{
    uint8_t id[GS_NCCL_ID_BYTES];
    gs__nccl_t *const sentinel = (gs__nccl_t *)(uintptr_t)0x5a5a;
    gs__nccl_t *out = sentinel;
    const uint64_t deadline = gs__now_ns() + 1000000000ull;

    (void)state;
    memset(id, 0, sizeof(id));
    assert_int_equal(gs__nccl_create(NULL, 0, 1, 0, deadline, &out), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__nccl_create(id, 0, 1, 0, deadline, NULL), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__nccl_create(id, 0, 0, 0, deadline, &out), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__nccl_create(id, 0, -3, 0, deadline, &out), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__nccl_create(id, -1, 2, 0, deadline, &out), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__nccl_create(id, 2, 2, 0, deadline, &out), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "rank 2 of 2"));
    assert_int_equal(gs__nccl_create(id, 0, 2, -1, deadline, &out), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "device -1"));
    assert_ptr_equal(out, sentinel);

    assert_int_equal(gs__nccl_split(NULL, 0, 0, deadline, &out), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__nccl_split(sentinel, 0, 0, deadline, NULL), GS_ERR_INVALID_ARG);
    assert_ptr_equal(out, sentinel);
    assert_int_equal(gs__nccl_unique_id(NULL), GS_ERR_INVALID_ARG);
}

static void test_nccl_calls_on_null_handle(void **state)
{
    char buf[64] = {0};

    (void)state;
    assert_int_equal(gs__nccl_allreduce(NULL, buf, buf, 4, GS_DTYPE_F32, GS_OP_SUM, NULL),
                     GS_ERR_INVALID_ARG);
    assert_int_equal(gs__nccl_broadcast(NULL, buf, 4, GS_DTYPE_F32, 0, NULL), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__nccl_reduce(NULL, buf, buf, 4, GS_DTYPE_F32, GS_OP_SUM, 0, NULL),
                     GS_ERR_INVALID_ARG);
    assert_int_equal(gs__nccl_allgather(NULL, buf, buf, 4, GS_DTYPE_F32, NULL), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__nccl_reduce_scatter(NULL, buf, buf, 4, GS_DTYPE_F32, GS_OP_SUM, NULL),
                     GS_ERR_INVALID_ARG);
    assert_int_equal(gs__nccl_alltoall(NULL, buf, buf, 4, GS_DTYPE_F32, NULL), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__nccl_send(NULL, buf, 4, GS_DTYPE_U8, 1, NULL), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__nccl_recv(NULL, buf, 4, GS_DTYPE_U8, 1, NULL), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "NULL handle"));

    assert_int_equal(gs__nccl_poll(NULL), GS_ERR_INVALID_ARG);
    gs__nccl_fail(NULL, "a NULL handle is ignored"); /* the device wait's abort: no crash */
    assert_int_equal(gs__nccl_abort(NULL), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__nccl_set_timeout(NULL, 1), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__nccl_destroy(NULL), GS_OK);
    assert_int_equal(gs__nccl_rank(NULL), -1);
    assert_int_equal(gs__nccl_size(NULL), 0);
    assert_int_equal(gs__nccl_device(NULL), -1);
}

static void test_nccl_group_end_without_start(void **state)
{
    (void)state;
    assert_int_equal(gs__nccl_group_depth(), 0);
    assert_int_equal(gs__nccl_group_end(NULL), GS_ERR_INVALID_USAGE);
    assert_non_null(strstr(gs_last_error(), "without an open group"));
    assert_int_equal(gs__nccl_group_depth(), 0);
}

static void assert_no_gpu_error(gs_status_t status, uint64_t start)
{
    /* Either class is clean; the sentence must say what is missing. */
    assert_true((status == GS_ERR_NO_RESOURCE) || (status == GS_ERR_CUDA));
    assert_true((strstr(gs_last_error(), "no GPU") != NULL) ||
                (strstr(gs_last_error(), "driver") != NULL));
    /* Refused at once, long before the 2 s deadline. */
    assert_true(gs__now_ns() - start < 1500000000ull);
}

static void test_nccl_without_gpu_fails_cleanly(void **state)
{
    uint8_t id[GS_NCCL_ID_BYTES];
    gs__nccl_t *const sentinel = (gs__nccl_t *)(uintptr_t)0x5a5a;
    gs__nccl_t *out = sentinel;
    uint64_t start;

    (void)state;
    if (machine_has_gpu()) {
        skip(); /* tests/gpu covers machines with a GPU */
    }
    memset(id, 0xab, sizeof(id));
    start = gs__now_ns();
    assert_no_gpu_error(gs__nccl_unique_id(id), start);
    for (size_t i = 0; i < sizeof(id); i++) {
        assert_int_equal(id[i], 0xab); /* untouched on failure */
    }

    start = gs__now_ns();
    assert_no_gpu_error(gs__nccl_create(id, 0, 2, 0, start + 2000000000ull, &out), start);
    assert_non_null(strstr(gs_last_error(), "rank 0 of 2"));
    assert_ptr_equal(out, sentinel);

    /* Twice in a row: nothing is left half-made by the first failure. */
    start = gs__now_ns();
    assert_no_gpu_error(gs__nccl_create(id, 1, 2, 0, start + 2000000000ull, &out), start);
    assert_ptr_equal(out, sentinel);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nccl_dtype_every_dtype_maps),
        cmocka_unit_test(test_nccl_dtype_invalid_is_refused),
        cmocka_unit_test(test_nccl_op_every_op_and_dtype),
        cmocka_unit_test(test_nccl_op_invalid_is_refused),
        cmocka_unit_test(test_nccl_status_every_result),
        cmocka_unit_test(test_nccl_status_unknown_result_is_internal),
        cmocka_unit_test(test_nccl_status_duplicate_gpu_sentence),
        cmocka_unit_test(test_nccl_version_is_known),
        cmocka_unit_test(test_nccl_create_checks_arguments_first),
        cmocka_unit_test(test_nccl_calls_on_null_handle),
        cmocka_unit_test(test_nccl_group_end_without_start),
        cmocka_unit_test(test_nccl_without_gpu_fails_cleanly),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* !GS_WITH_NCCL */

static void test_nccl_not_built(void **state)
{
    (void)state;
    skip(); /* this build has no NCCL: src/device is not compiled */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nccl_not_built),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif /* GS_WITH_NCCL */
