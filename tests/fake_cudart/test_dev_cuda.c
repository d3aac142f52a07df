/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The device path's control flow on the CPU: the real library (staged and
 * NCCL paths, plain and compressed all-reduce, the kernel launchers, the
 * device guard) against an interposed CUDA runtime and NCCL (fake_cudart.c,
 * fake_nccl.c, linked ahead of libcudart and libnccl; fake_cudart.h says
 * what they model) and the fake driver of test_memkind (libcuda.so.1 first
 * on LD_LIBRARY_PATH; ctest sets it), which makes registered host buffers
 * "device memory" of a chosen device. One rank, so the payloads never
 * move; the kernels do not run (their arithmetic is test_kernel_*'s).
 *
 * What it holds the library to (docs/gpu.md, "Fixed without a GPU"):
 * - a "not ready" answer of an event poll never fails a later launch
 *   (the first compressed all-reduce after a plain one), and no launch
 *   counts an error an earlier call left in the thread's error slot;
 * - no device wait is unbounded: with GPU work that never completes, every
 *   call ends with GS_ERR_TIMEOUT at GS_TIMEOUT_MS (aborting NCCL), and an
 *   NCCL asynchronous error ends it with that error;
 * - the calling thread's current device is what it was before the call,
 *   and no thread gets a context on a device it never used.
 * A watchdog fails the run when a call hangs (what the old waits did);
 * GS_TEST_FILTER=<case> runs one case.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <cuda_runtime_api.h>
#ifdef GS_WITH_NCCL
#include <nccl.h>

#include "device/nccl_lib.h"
#endif

#include "codec_kernels.h"
#include "fake_cudart.h"
#include "gradsync/compress.h"
#include "gradsync/gradsync.h"
#include "reduce_kernels.h"
#include "tc_clock.h"

#define COUNT 4096
#define TIMEOUT_MS 300
#define WATCHDOG_S 30

typedef int (*fake_add_fn_t)(const void *base, size_t len, int device);
typedef void (*fake_clear_fn_t)(void);

static fake_add_fn_t fake_add;
static fake_clear_fn_t fake_clear;
static const char *watch_what = "";

/* ---------------------------------------------------------------------- */
/* Helpers                                                                 */
/* ---------------------------------------------------------------------- */

static void watchdog_fire(int sig)
{
    static const char head[] = "test_dev_cuda: hung for 30 s in ";
    static const char tail[] = ": a device wait without a deadline\n";

    (void)sig;
    (void)!write(2, head, sizeof(head) - 1);
    (void)!write(2, watch_what, strlen(watch_what));
    (void)!write(2, tail, sizeof(tail) - 1);
    _exit(1);
}

static void watch(const char *what)
{
    watch_what = what;
    (void)alarm(WATCHDOG_S);
}

static void unwatch(void)
{
    (void)alarm(0);
}

/* Host memory the fake driver calls device memory of @p device. */
static float *dev_buf(int device)
{
    float *p = aligned_alloc(256, COUNT * sizeof(float));

    assert_non_null(p);
    for (int i = 0; i < COUNT; i++) {
        p[i] = (float)(i % 13) * 0.25f;
    }
    assert_int_equal(fake_add(p, COUNT * sizeof(float), device), 0);
    return p;
}

/* A one-rank communicator; @p path is GS_CUDA_PATH ("staged", or "auto":
 * NCCL, the fake one). */
static gs_comm_t comm_open(const char *path, int timeout_ms)
{
    char ms[16];
    gs_comm_t comm = GS_COMM_NULL;

    (void)snprintf(ms, sizeof(ms), "%d", timeout_ms);
    unsetenv("GS_RANK");
    unsetenv("GS_WORLD_SIZE");
    setenv("GS_CUDA_PATH", path, 1);
    setenv("GS_TIMEOUT_MS", ms, 1);
    assert_int_equal(gs_comm_init_env(&comm, NULL), GS_OK);
    return comm;
}

static gs_status_t plain(gs_comm_t comm, const float *send, float *recv)
{
    return gs_allreduce(comm, send, recv, COUNT, GS_DTYPE_F32, GS_OP_SUM);
}

static gs_status_t compressed(gs_comm_t comm, const float *send, float *recv, gs_ef_t ef)
{
    gs_codec_config_t codec = GS_CODEC_CONFIG_INIT;
    gs_allreduce_opts_t opts = GS_ALLREDUCE_OPTS_INIT;

    codec.kind = GS_CODEC_FP16;
    opts.codec = &codec;
    opts.ef = ef;
    return gs_allreduce_ex(comm, send, recv, COUNT, GS_DTYPE_F32, GS_OP_AVG, &opts);
}

static int current_device(void)
{
    int device = -1;

    assert_int_equal(cudaGetDevice(&device), cudaSuccess);
    return device;
}

static int setup(void **state)
{
    void *lib;

    (void)state;
    if (signal(SIGALRM, watchdog_fire) == SIG_ERR) {
        return -1;
    }
    /* The library loads the driver with dlopen on first use; the same copy. */
    lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (lib == NULL) {
        return -1; /* the fake driver is not on the loader path */
    }
    fake_add = (fake_add_fn_t)dlsym(lib, "gs_fake_cuda_add");
    fake_clear = (fake_clear_fn_t)dlsym(lib, "gs_fake_cuda_clear");
    if ((fake_add == NULL) || (fake_clear == NULL)) {
        return -1; /* a real driver came first: this test needs the fake */
    }
    return 0;
}

static int each_setup(void **state)
{
    (void)state;
    gs_fake_rt_reset();
    (void)cudaGetLastError();
    return 0;
}

static int each_teardown(void **state)
{
    (void)state;
    unwatch();
    gs_fake_rt_set_hang(0);
    fake_clear();
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Defect 1: the last-error slot                                           */
/* ---------------------------------------------------------------------- */

/* A launcher reports its launch's own error: neither an error an earlier
 * call left in the slot (it stays for its owner) nor nothing when the
 * launch itself fails (then the slot is handed back clean). */
static void test_launch_counts_only_its_own_error(void **state)
{
    float *buf = aligned_alloc(256, COUNT * sizeof(float));
    uint8_t *body = aligned_alloc(256, COUNT * sizeof(uint16_t));
    gs__k_codec_params_t kp = {.count = COUNT, .block = 0, .param = 0, .seed = 0};

    (void)state;
    assert_non_null(buf);
    assert_non_null(body);
    gs_fake_rt_set_last_error(cudaErrorNotReady); /* a poll left it */
    assert_int_equal(gs_k_mul_f32(buf, COUNT, 0.5f, NULL), cudaSuccess);
    assert_int_equal(gs_k_reduce(buf, buf, buf, COUNT, GS_DTYPE_F32, GS_OP_SUM, 0, NULL),
                     cudaSuccess);
    assert_int_equal(gs_k_scale(buf, COUNT, GS_DTYPE_F32, 2, NULL), cudaSuccess);
    assert_int_equal(gs_k_codec_encode(GS_CODEC_FP16, &kp, buf, body, NULL, 0, NULL), cudaSuccess);
    assert_int_equal(
        gs_k_codec_decode(GS_CODEC_FP16, &kp, body, buf, GS_K_CODEC_ADD, 1.0f, NULL, NULL),
        cudaSuccess);
    assert_true(gs_fake_rt_count(GS_FAKE_LAUNCH) >= 5);
    assert_int_equal(cudaPeekAtLastError(), cudaErrorNotReady); /* not ours to clear */
    (void)cudaGetLastError();

    gs_fake_rt_fail_next_launch(cudaErrorLaunchOutOfResources);
    assert_int_equal(gs_k_mul_f32(buf, COUNT, 0.5f, NULL), cudaErrorLaunchOutOfResources);
    assert_int_equal(cudaPeekAtLastError(), cudaSuccess); /* reported once, by the return */
    gs_fake_rt_fail_next_launch(cudaErrorLaunchOutOfResources);
    assert_int_equal(gs_k_codec_encode(GS_CODEC_FP16, &kp, buf, body, NULL, 0, NULL),
                     cudaErrorLaunchOutOfResources);
    assert_int_equal(cudaPeekAtLastError(), cudaSuccess);
    free(buf);
    free(body);
}

/* The case: a plain device all-reduce polls an event that answers
 * "not ready" first; the compressed all-reduce after it launches kernels.
 * Both succeed, no unbounded wait is made, and the slot is clean. */
static void compressed_after_plain(const char *path)
{
    gs_comm_t comm = comm_open(path, 60000);
    float *send = dev_buf(0);
    float *recv = dev_buf(0);
    gs_ef_t ef = GS_EF_NULL;
    int launches;

    watch(path);
    assert_int_equal(plain(comm, send, recv), GS_OK);
    assert_true(gs_fake_rt_count(GS_FAKE_NOT_READY) > 0);
    assert_memory_equal(send, recv, COUNT * sizeof(float)); /* one rank: the sum is the input */
    assert_int_equal(cudaPeekAtLastError(), cudaSuccess);
    assert_int_equal(compressed(comm, send, recv, GS_EF_NULL), GS_OK);
    launches = gs_fake_rt_count(GS_FAKE_LAUNCH);
    assert_true(launches >= 3); /* encode, decode-accumulate, average, encode, decode */
    assert_int_equal(gs_ef_create(COUNT, GS_DTYPE_F32, &ef), GS_OK);
    assert_int_equal(compressed(comm, send, recv, ef), GS_OK); /* the fused-EF launches */
    assert_true(gs_fake_rt_count(GS_FAKE_LAUNCH) > launches);
    assert_int_equal(plain(comm, send, recv), GS_OK);
    assert_int_equal(compressed(comm, send, recv, ef), GS_OK);
    assert_int_equal(cudaPeekAtLastError(), cudaSuccess);
    assert_int_equal(gs_fake_rt_count(GS_FAKE_UNBOUNDED_WAIT), 0);
    unwatch();
    assert_int_equal(gs_ef_destroy(ef), GS_OK);
    assert_int_equal(gs_comm_destroy(comm), GS_OK);
    free(send);
    free(recv);
}

/* gs_ef_reset with a device residual makes no device call: a memset on the
 * legacy default stream (as it did) is not ordered with the work of a
 * non-blocking stream. The next compressed call uploads the zeroed host
 * copy on its own stream and succeeds. */
static void test_ef_reset_uses_no_legacy_stream(void **state)
{
    gs_comm_t comm = comm_open("staged", 60000);
    float *send = dev_buf(0);
    float *recv = dev_buf(0);
    gs_ef_t ef = GS_EF_NULL;
    int memsets;

    (void)state;
    watch("ef_reset");
    assert_int_equal(gs_ef_create(COUNT, GS_DTYPE_F32, &ef), GS_OK);
    assert_int_equal(compressed(comm, send, recv, ef), GS_OK); /* the device residual */
    memsets = gs_fake_rt_count(GS_FAKE_LEGACY_MEMSET);
    assert_int_equal(gs_ef_reset(ef), GS_OK);
    assert_int_equal(gs_fake_rt_count(GS_FAKE_LEGACY_MEMSET), memsets);
    assert_int_equal(compressed(comm, send, recv, ef), GS_OK);
    assert_int_equal(cudaPeekAtLastError(), cudaSuccess);
    unwatch();
    assert_int_equal(gs_ef_destroy(ef), GS_OK);
    assert_int_equal(gs_comm_destroy(comm), GS_OK);
    free(send);
    free(recv);
}

/* The compressed reduce-scatter (with error feedback) and all-gather on
 * device buffers launch the codec kernels (the block-wise schemes of
 * algo_comp_dev_cuda.c), wait with a deadline, leave the error slot clean,
 * and a plain call after them still works. */
static void compressed_shard(const char *path)
{
    gs_comm_t comm = comm_open(path, 60000);
    float *send = dev_buf(0);
    float *recv = dev_buf(0);
    gs_codec_config_t codec = GS_CODEC_CONFIG_INIT;
    gs_coll_opts_t opts = GS_COLL_OPTS_INIT;
    gs_ef_t ef = GS_EF_NULL;
    int launches;

    watch("compressed_shard");
    codec.kind = GS_CODEC_INT8;
    opts.codec = &codec;
    assert_int_equal(gs_ef_create(COUNT, GS_DTYPE_F32, &ef), GS_OK); /* one rank: one block */
    opts.ef = ef;
    launches = gs_fake_rt_count(GS_FAKE_LAUNCH);
    assert_int_equal(gs_reduce_scatter_ex(comm, send, recv, COUNT, GS_DTYPE_F32, GS_OP_SUM, &opts),
                     GS_OK);
    assert_true(gs_fake_rt_count(GS_FAKE_LAUNCH) > launches); /* the sum kernel */
    opts.ef = NULL;
    launches = gs_fake_rt_count(GS_FAKE_LAUNCH);
    assert_int_equal(gs_allgather_ex(comm, send, recv, COUNT, GS_DTYPE_F32, &opts), GS_OK);
    assert_true(gs_fake_rt_count(GS_FAKE_LAUNCH) > launches); /* the encode kernel */
    assert_int_equal(plain(comm, send, recv), GS_OK);
    assert_int_equal(cudaPeekAtLastError(), cudaSuccess);
    assert_int_equal(gs_fake_rt_count(GS_FAKE_UNBOUNDED_WAIT), 0);
    unwatch();
    assert_int_equal(gs_ef_destroy(ef), GS_OK);
    assert_int_equal(gs_comm_destroy(comm), GS_OK);
    free(send);
    free(recv);
}

static void test_compressed_shard_staged(void **state)
{
    (void)state;
    compressed_shard("staged");
}

#ifdef GS_WITH_NCCL
static void test_compressed_shard_nccl(void **state)
{
    (void)state;
    compressed_shard("auto");
}
#endif

static void test_compressed_after_plain_staged(void **state)
{
    (void)state;
    compressed_after_plain("staged");
    assert_int_equal(gs_fake_rt_count(GS_FAKE_NCCL_COLL), 0);
}

#ifdef GS_WITH_NCCL
static void test_compressed_after_plain_nccl(void **state)
{
    (void)state;
    compressed_after_plain("auto");
    assert_true(gs_fake_rt_count(GS_FAKE_NCCL_COLL) >= 2); /* the plain calls went to NCCL */
}
#endif

/* A launch that fails is reported as GS_ERR_CUDA naming the kernel, not
 * sticky, and the next call works. */
static void test_launch_failure_reported(void **state)
{
    gs_comm_t comm = comm_open("staged", 60000);
    float *send = dev_buf(0);
    float *recv = dev_buf(0);

    (void)state;
    watch("a failed launch");
    gs_fake_rt_fail_next_launch(cudaErrorLaunchOutOfResources);
    assert_int_equal(compressed(comm, send, recv, GS_EF_NULL), GS_ERR_CUDA);
    assert_non_null(strstr(gs_last_error(), "encode kernel"));
    assert_non_null(strstr(gs_last_error(), "cudaErrorLaunchOutOfResources"));
    assert_int_equal(cudaPeekAtLastError(), cudaSuccess);
    assert_int_equal(compressed(comm, send, recv, GS_EF_NULL), GS_OK);
    unwatch();
    assert_int_equal(gs_comm_destroy(comm), GS_OK);
    free(send);
    free(recv);
}

/* ---------------------------------------------------------------------- */
/* Defect 2: every device wait has the deadline                            */
/* ---------------------------------------------------------------------- */

/* GPU work that never completes: the call ends with GS_ERR_TIMEOUT near
 * GS_TIMEOUT_MS, naming what it waited for and the knob. */
static void timeout_case(const char *path, int compress, const char *names)
{
    gs_comm_t comm = comm_open(path, TIMEOUT_MS);
    float *send = dev_buf(0);
    float *recv = dev_buf(0);
    double t0, dt;
    gs_status_t status;

    watch(names);
    gs_fake_rt_set_hang(1);
    t0 = tc_now_s();
    status = compress ? compressed(comm, send, recv, GS_EF_NULL) : plain(comm, send, recv);
    dt = tc_now_s() - t0;
    gs_fake_rt_set_hang(0);
    unwatch();
    assert_int_equal(status, GS_ERR_TIMEOUT);
    assert_true(dt >= 0.9 * TIMEOUT_MS / 1000.0);
    assert_true(dt < 10.0);
    assert_non_null(strstr(gs_last_error(), names));
    assert_non_null(strstr(gs_last_error(), "GS_TIMEOUT_MS"));
    assert_int_equal(cudaPeekAtLastError(), cudaSuccess);
    (void)gs_comm_destroy(comm); /* failed (sticky): destroy reports it */
    free(send);
    free(recv);
}

static void test_compressed_wait_times_out_staged(void **state)
{
    (void)state;
    timeout_case("staged", 1, "device workspace");
    assert_int_equal(gs_fake_rt_count(GS_FAKE_NCCL_ABORT), 0);
}

static void test_plain_wait_times_out_staged(void **state)
{
    (void)state;
    timeout_case("staged", 0, "staging");
}

#ifdef GS_WITH_NCCL
static void test_compressed_wait_times_out_nccl(void **state)
{
    (void)state;
    timeout_case("auto", 1, "device workspace");
    assert_int_equal(gs_fake_rt_count(GS_FAKE_NCCL_ABORT), 1);
}

static void test_plain_wait_times_out_nccl(void **state)
{
    (void)state;
    timeout_case("auto", 0, "NCCL's allreduce");
    assert_int_equal(gs_fake_rt_count(GS_FAKE_NCCL_ABORT), 1);
}

/* An NCCL asynchronous error (a dead peer) ends a compressed call's wait
 * with GS_ERR_PEER_FAILED and aborts NCCL. */
static void test_async_error_ends_compressed_wait(void **state)
{
    gs_comm_t comm = comm_open("auto", 60000);
    float *send = dev_buf(0);
    float *recv = dev_buf(0);

    (void)state;
    watch("an NCCL error");
    assert_int_equal(plain(comm, send, recv), GS_OK); /* NCCL set up */
    gs_fake_nccl_set_async_error(ncclRemoteError);
    assert_int_equal(compressed(comm, send, recv, GS_EF_NULL), GS_ERR_PEER_FAILED);
    assert_int_equal(gs_fake_rt_count(GS_FAKE_NCCL_ABORT), 1);
    unwatch();
    (void)gs_comm_destroy(comm);
    free(send);
    free(recv);
}

/* NCCL is loaded on first use (src/device/nccl_lib.c): a file that is not
 * there, or is not NCCL, is refused with a sentence that names it and the
 * fix, and nothing is loaded from it. */
static void test_nccl_missing_is_explained(void **state)
{
    static const char missing[] = "/nonexistent/gradsync-test/libnccl.so.2";
    gs__nccl_api_t api;
    char why[512];

    (void)state;
    memset(&api, 0x5a, sizeof(api));
    why[0] = '\0';
    assert_int_equal(gs__nccl_lib_open(missing, &api, why, sizeof(why)), GS_ERR_NO_RESOURCE);
    assert_non_null(strstr(why, "NCCL was not found"));
    assert_non_null(strstr(why, missing));
    assert_non_null(strstr(why, "LD_LIBRARY_PATH"));
    assert_non_null(strstr(why, "GS_CUDA_PATH=staged"));
    for (size_t i = 0; i < sizeof(api); i++) {
        assert_int_equal(((const unsigned char *)&api)[i], 0x5a); /* written only on success */
    }
    /* A library without NCCL's functions: the fake runtime's. */
    why[0] = '\0';
    assert_int_equal(gs__nccl_lib_open(GS_FAKE_CUDART_FILE, &api, why, sizeof(why)),
                     GS_ERR_NO_RESOURCE);
    assert_non_null(strstr(why, "has no function ncclGetVersion"));
    assert_int_equal(gs__nccl_lib_open(NULL, &api, NULL, 0), GS_ERR_INVALID_ARG);
}

/* GS_NCCL_LIBRARY names the NCCL to load instead of libnccl.so.2. Pointed
 * at a file that is not there: GS_CUDA_PATH=auto stages (no NCCL call, and
 * nothing loaded), GS_CUDA_PATH=nccl fails the first device call with a
 * sentence naming the file and the variable. Runs before any case that
 * loads NCCL (a load is kept for the process). */
static void test_nccl_library_missing(void **state)
{
    static const char missing[] = "/nonexistent/gradsync-test/libnccl-elsewhere.so.2";
    gs_comm_t comm;
    float *send = dev_buf(1);
    float *recv = dev_buf(1);

    (void)state;
    assert_null(gs__nccl_api()); /* nothing loaded NCCL before this case */
    setenv("GS_NCCL_LIBRARY", missing, 1);
    watch("GS_NCCL_LIBRARY missing");
    comm = comm_open("auto", 60000);
    assert_int_equal(plain(comm, send, recv), GS_OK);
    assert_int_equal(plain(comm, send, recv), GS_OK);
    assert_int_equal(gs_fake_rt_count(GS_FAKE_NCCL_COLL), 0); /* staged */
    assert_null(gs__nccl_api());
    assert_int_equal(gs_comm_destroy(comm), GS_OK);

    comm = comm_open("nccl", 60000);
    assert_int_equal(plain(comm, send, recv), GS_ERR_NO_RESOURCE);
    assert_non_null(strstr(gs_last_error(), "NCCL was not found"));
    assert_non_null(strstr(gs_last_error(), missing));
    assert_non_null(strstr(gs_last_error(), "(GS_NCCL_LIBRARY)"));
    assert_int_equal(gs_fake_rt_count(GS_FAKE_NCCL_COLL), 0);
    assert_null(gs__nccl_api());
    (void)gs_comm_destroy(comm);
    unwatch();

    /* The variable is read at each try until one succeeds: unset, the
     * loader finds libnccl.so.2 (this test's fake). */
    assert_int_equal(gs__nccl_load("test"), GS_ERR_NO_RESOURCE);
    unsetenv("GS_NCCL_LIBRARY");
    assert_int_equal(gs__nccl_load("test"), GS_OK);
    assert_non_null(gs__nccl_api());
    free(send);
    free(recv);
}

/* The engine's NCCL is the one the loader found under libnccl.so.2: this
 * test's fake (linked, so already loaded under that name), not a second
 * copy, and every function of the table is there. */
static void test_nccl_loaded_by_name(void **state)
{
    gs__nccl_api_t api;
    int version = 0;

    (void)state;
    assert_int_equal(gs__nccl_load("test"), GS_OK);
    assert_non_null(gs__nccl_api());
    assert_int_equal(gs__nccl_api()->ncclGetVersion(&version), ncclSuccess);
    assert_int_equal(version, 22809); /* fake_nccl.c's */
    assert_ptr_equal((void *)gs__nccl_api()->ncclAllReduce, (void *)&ncclAllReduce);
    assert_int_equal(gs__nccl_lib_open(GS_NCCL_LIB_FILE, &api, NULL, 0), GS_OK);
    assert_ptr_equal((void *)api.ncclCommAbort, (void *)&ncclCommAbort);
}
#endif /* GS_WITH_NCCL */

/* ---------------------------------------------------------------------- */
/* Defect 3: the caller's current device                                   */
/* ---------------------------------------------------------------------- */

static void device_kept(const char *path)
{
    gs_comm_t comm = comm_open(path, 60000);
    gs_comm_t child = GS_COMM_NULL;
    float *send = dev_buf(1);
    float *recv = dev_buf(1);
    gs_request_t req = GS_REQUEST_NULL;
    gs_ef_t ef = GS_EF_NULL;

    watch(path);
    assert_int_equal(cudaSetDevice(0), cudaSuccess);  /* the application's device */
    assert_int_equal(plain(comm, send, recv), GS_OK); /* setup, on device 1 */
    assert_int_equal(current_device(), 0);
    assert_int_equal(plain(comm, send, recv), GS_OK);
    assert_int_equal(current_device(), 0);
    assert_int_equal(gs_ef_create(COUNT, GS_DTYPE_F32, &ef), GS_OK);
    assert_int_equal(compressed(comm, send, recv, ef), GS_OK);
    assert_int_equal(current_device(), 0);
    assert_int_equal(gs_ef_reset(ef), GS_OK); /* the device residual's hook */
    assert_int_equal(current_device(), 0);
    assert_int_equal(gs_iallreduce(comm, send, recv, COUNT, GS_DTYPE_F32, GS_OP_SUM, &req), GS_OK);
    assert_int_equal(gs_wait(&req), GS_OK);
    assert_int_equal(current_device(), 0);
    assert_int_equal(gs_comm_split(comm, 0, 0, &child), GS_OK);
    assert_int_equal(current_device(), 0);
    assert_non_null(child);
    assert_int_equal(plain(child, send, recv), GS_OK);
    assert_int_equal(current_device(), 0);
    assert_int_equal(gs_comm_destroy(child), GS_OK);
    assert_int_equal(current_device(), 0);
    assert_int_equal(gs_ef_destroy(ef), GS_OK);
    assert_int_equal(current_device(), 0);
    assert_int_equal(gs_comm_destroy(comm), GS_OK);
    assert_int_equal(current_device(), 0);
    unwatch();
    free(send);
    free(recv);
}

static void test_device_kept_staged(void **state)
{
    (void)state;
    device_kept("staged");
}

#ifdef GS_WITH_NCCL
static void test_device_kept_nccl(void **state)
{
    (void)state;
    device_kept("auto");
}
#endif

typedef struct fresh_thread {
    gs_comm_t comm;
    float *send, *recv;
    gs_status_t status[3];
} fresh_thread_t;

static void *fresh_main(void *arg)
{
    fresh_thread_t *t = arg;
    gs_request_t req = GS_REQUEST_NULL;

    t->status[0] = plain(t->comm, t->send, t->recv);
    t->status[1] = gs_iallreduce(t->comm, t->send, t->recv, COUNT, GS_DTYPE_F32, GS_OP_SUM, &req);
    t->status[2] = (t->status[1] == GS_OK) ? gs_wait(&req) : t->status[1];
    return NULL;
}

/* A thread that never chose a device (cudaGetDevice says 0, device 0 has no
 * context), and the communicator's worker thread: going back to device 0
 * would make a context there. Neither does. */
static void test_no_context_on_an_unused_device(void **state)
{
    fresh_thread_t t;
    pthread_t th;

    (void)state;
    memset(&t, 0, sizeof(t));
    t.comm = comm_open("auto", 60000);
    t.send = dev_buf(1);
    t.recv = dev_buf(1);
    watch("a fresh thread");
    assert_int_equal(pthread_create(&th, NULL, fresh_main, &t), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    unwatch();
    assert_int_equal(t.status[0], GS_OK);
    assert_int_equal(t.status[1], GS_OK);
    assert_int_equal(t.status[2], GS_OK);
    assert_true(gs_fake_rt_has_context(1));
    assert_false(gs_fake_rt_has_context(0));
    assert_int_equal(gs_comm_destroy(t.comm), GS_OK);
    assert_false(gs_fake_rt_has_context(0));
    free(t.send);
    free(t.recv);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, each_setup, each_teardown)
    const struct CMUnitTest tests[] = {
#ifdef GS_WITH_NCCL
        T(test_nccl_library_missing), /* first: before any case loads NCCL */
#endif
        T(test_launch_counts_only_its_own_error),
        T(test_compressed_after_plain_staged),
        T(test_compressed_shard_staged),
        T(test_launch_failure_reported),
        T(test_compressed_wait_times_out_staged),
        T(test_plain_wait_times_out_staged),
        T(test_no_context_on_an_unused_device),
        T(test_device_kept_staged),
        T(test_ef_reset_uses_no_legacy_stream),
#ifdef GS_WITH_NCCL
        T(test_compressed_after_plain_nccl),
        T(test_compressed_shard_nccl),
        T(test_compressed_wait_times_out_nccl),
        T(test_plain_wait_times_out_nccl),
        T(test_async_error_ends_compressed_wait),
        T(test_device_kept_nccl),
        T(test_nccl_missing_is_explained),
        T(test_nccl_loaded_by_name),
#endif
    };
#undef T

    /* GS_TEST_FILTER=test_name runs one case (a hang ends the whole run). */
    if (getenv("GS_TEST_FILTER") != NULL) {
        cmocka_set_test_filter(getenv("GS_TEST_FILTER"));
    }
    return cmocka_run_group_tests(tests, setup, NULL);
}
