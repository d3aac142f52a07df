/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Memory kinds of a call's buffers, through the real detection code
 * (device/memkind.c loads libcuda.so.1) against a fake driver
 * (fake_cuda_driver.c, first on LD_LIBRARY_PATH; ctest sets it). Host
 * memory is host; a registered range is "device memory"; a call that
 * mixes the kinds, spans two devices, or hands device memory to a build
 * without CUDA fails with GS_ERR_INVALID_ARG naming the buffer and
 * changes nothing. Runs as one rank (no peers needed).
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "device/memkind.h"
#include "gradsync/gradsync.h"

typedef int (*fake_add_fn_t)(const void *base, size_t len, int device);
typedef void (*fake_clear_fn_t)(void);

static fake_add_fn_t fake_add;
static fake_clear_fn_t fake_clear;
static void *fake_lib; /* never closed: fake_add and fake_clear point into it */
static gs_comm_t comm;

static int setup(void **state)
{
    int probe = 0;
    void *lib;

    (void)state;
    /* The library loads the driver on first use; this finds the same copy. */
    (void)gs__mem_is_device(&probe, NULL);
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib == NULL) {
        return -1; /* the fake driver is not on the loader path */
    }
    fake_lib = lib;
    fake_add = (fake_add_fn_t)dlsym(lib, "gs_fake_cuda_add");
    fake_clear = (fake_clear_fn_t)dlsym(lib, "gs_fake_cuda_clear");
    if ((fake_add == NULL) || (fake_clear == NULL)) {
        return -1; /* a real driver came first: this test needs the fake */
    }
    unsetenv("GS_RANK");
    unsetenv("GS_WORLD_SIZE");
    return (gs_comm_init_env(&comm, NULL) == GS_OK) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return (gs_comm_destroy(comm) == GS_OK) ? 0 : -1;
}

static void test_memkind_detects_registered_ranges(void **state)
{
    float *host = malloc(64 * sizeof(float));
    float *dev = malloc(64 * sizeof(float));
    int ordinal = -1;

    (void)state;
    assert_true(gs__mem_driver_loaded());
    assert_int_equal(gs__mem_is_device(NULL, NULL), 0);
    assert_int_equal(gs__mem_is_device(host, &ordinal), 0);
    assert_int_equal(ordinal, -1); /* untouched for host memory */
    assert_int_equal(fake_add(dev, 64 * sizeof(float), 3), 0);
    assert_int_equal(gs__mem_is_device(dev, &ordinal), 1);
    assert_int_equal(ordinal, 3);
    assert_int_equal(gs__mem_is_device(dev + 63, NULL), 1);
    assert_int_equal(gs__mem_is_device(dev + 64, NULL), 0); /* one past the range */
    fake_clear();
    assert_int_equal(gs__mem_is_device(dev, NULL), 0);
    free(host);
    free(dev);
}

/* A refused call leaves recvbuf as it was. */
static void assert_untouched(const float *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        assert_true(buf[i] == 7.0f);
    }
}

static void test_memkind_mixed_kinds_rejected(void **state)
{
    enum { N = 100 };
    float *host = malloc(N * sizeof(float));
    float *dev = malloc(N * sizeof(float));
    float *dev2 = malloc(N * sizeof(float));

    (void)state;
    for (size_t i = 0; i < N; i++) {
        host[i] = 7.0f;
        dev[i] = 1.0f;
        dev2[i] = 7.0f;
    }
    assert_int_equal(fake_add(dev, N * sizeof(float), 0), 0);
    assert_int_equal(gs_allreduce(comm, dev, host, N, GS_DTYPE_F32, GS_OP_SUM), GS_ERR_INVALID_ARG);
#ifdef GS_WITH_CUDA
    assert_non_null(strstr(gs_last_error(), "sendbuf is CUDA device memory (device 0)"));
    assert_non_null(strstr(gs_last_error(), "recvbuf is host memory"));
#else
    assert_non_null(strstr(gs_last_error(), "sendbuf is CUDA device memory"));
    assert_non_null(strstr(gs_last_error(), "built without CUDA"));
#endif
    assert_untouched(host, N);

    /* The same check on every call with buffers, blocking or not. */
    {
        gs_request_t req = GS_REQUEST_NULL;
        const gs_coll_opts_t opts = GS_COLL_OPTS_INIT;

        assert_int_equal(gs_iallgather(comm, host, dev, N, GS_DTYPE_F32, &req), GS_ERR_INVALID_ARG);
        assert_null(req);
        assert_int_equal(gs_reduce_scatter_ex(comm, dev, host, N, GS_DTYPE_F32, GS_OP_SUM, &opts),
                         GS_ERR_INVALID_ARG);
        assert_untouched(host, N);
        assert_int_equal(gs_alltoall_ex(comm, host, dev, N, GS_DTYPE_F32, NULL),
                         GS_ERR_INVALID_ARG);
    }
#ifdef GS_WITH_CUDA
    /* Two devices in one call. */
    assert_int_equal(fake_add(dev2, N * sizeof(float), 1), 0);
    assert_int_equal(gs_allreduce(comm, dev, dev2, N, GS_DTYPE_F32, GS_OP_SUM), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "on CUDA device 0 but recvbuf on device 1"));
    assert_untouched(dev2, N);
#else
    /* Device buffers alone are refused too, naming the buffer. */
    assert_int_equal(fake_add(dev2, N * sizeof(float), 1), 0);
    assert_int_equal(gs_broadcast(comm, dev2, N, GS_DTYPE_F32, 0), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "gs_broadcast: buf is CUDA device memory (device 1)"));
    assert_untouched(dev2, N);
#endif
#ifdef GS_WITH_CUDA
    /* Device buffers of one device pass the checks and reach the device
     * layer, which here meets a driver the CUDA runtime cannot use: a
     * clean GS_ERR_CUDA naming the call, then the communicator still works
     * for host buffers. */
    {
        float *dev3 = malloc(N * sizeof(float));
        gs_status_t st;

        assert_int_equal(fake_add(dev3, N * sizeof(float), 0), 0);
        st = gs_allreduce(comm, dev, dev3, N, GS_DTYPE_F32, GS_OP_SUM);
        assert_int_equal(st, GS_ERR_CUDA);
        assert_non_null(strstr(gs_last_error(), "gs_allreduce: cuda"));
        free(dev3);
    }
#endif
    /* Count 0 touches no buffer: nothing to check, nothing refused. */
    assert_int_equal(gs_allreduce(comm, dev, host, 0, GS_DTYPE_F32, GS_OP_SUM), GS_OK);
    /* Host buffers still work on the same communicator. */
    assert_int_equal(gs_allreduce(comm, host, host, N, GS_DTYPE_F32, GS_OP_SUM), GS_OK);
    fake_clear();
    free(host);
    free(dev);
    free(dev2);
}

/* The options structs: NULL, the INIT values and an older (smaller) size
 * all run; a forced algorithm the collective lacks is refused before
 * anything runs. */
static void test_memkind_options_plumbing(void **state)
{
    enum { N = 10 };
    float buf[N];
    gs_coll_opts_t opts = GS_COLL_OPTS_INIT;
    gs_allreduce_opts_t aopts = GS_ALLREDUCE_OPTS_INIT;
    gs_request_t req = GS_REQUEST_NULL;

    (void)state;
    for (int i = 0; i < N; i++) {
        buf[i] = (float)i;
    }
    assert_int_equal(opts.size, sizeof(gs_coll_opts_t));
    assert_null(opts.stream);
    assert_int_equal(opts.flags, 0u);
    assert_int_equal(aopts.size, sizeof(gs_allreduce_opts_t));
    assert_null(aopts.stream);
    /* A stream and the stream-ordered flag mean nothing for host buffers. */
    opts.stream = (void *)(uintptr_t)0x1234;
    opts.flags = GS_COLL_F_STREAM_ORDERED;
    aopts.stream = opts.stream;
    aopts.flags = opts.flags;
    assert_int_equal(gs_broadcast_ex(comm, buf, N, GS_DTYPE_F32, 0, &opts), GS_OK);
    assert_int_equal(gs_allreduce_ex(comm, buf, buf, N, GS_DTYPE_F32, GS_OP_SUM, &aopts), GS_OK);
    assert_int_equal(gs_iallreduce_ex(comm, buf, buf, N, GS_DTYPE_F32, GS_OP_MAX, &aopts, &req),
                     GS_OK);
    assert_int_equal(gs_wait(&req), GS_OK);
    assert_int_equal(gs_ireduce_ex(comm, buf, buf, N, GS_DTYPE_F32, GS_OP_MIN, 0, &opts, &req),
                     GS_OK);
    assert_int_equal(gs_wait(&req), GS_OK);
    for (int i = 0; i < N; i++) {
        assert_true(buf[i] == (float)i); /* one rank: every reduction is the identity */
    }
    /* An options struct from an older header: only algo fits. */
    opts.size = offsetof(gs_coll_opts_t, stream);
    opts.algo = GS_ALGO_BINOMIAL;
    assert_int_equal(gs_broadcast_ex(comm, buf, N, GS_DTYPE_F32, 0, &opts), GS_OK);
    opts.algo = GS_ALGO_RING; /* broadcast has no ring */
    assert_int_equal(gs_broadcast_ex(comm, buf, N, GS_DTYPE_F32, 0, &opts), GS_ERR_UNSUPPORTED);
    assert_int_equal(gs_ibroadcast_ex(comm, buf, N, GS_DTYPE_F32, 0, &opts, &req),
                     GS_ERR_UNSUPPORTED);
    assert_null(req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memkind_detects_registered_ranges),
        cmocka_unit_test(test_memkind_mixed_kinds_rejected),
        cmocka_unit_test(test_memkind_options_plumbing),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
