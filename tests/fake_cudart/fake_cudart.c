/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An interposed CUDA runtime for the device path's CPU tests: the cudart
 * calls gradsync makes, with the behaviour fake_cudart.h describes. The
 * test executable links this library ahead of libcudart.so (gradsync links
 * the shared runtime, CUDA::cudart), so the dynamic linker binds every
 * runtime call of gradsync's objects, and the kernel registration that
 * nvcc's code makes at load time, to these definitions. Calls it does not
 * define would reach the real runtime, which fails cleanly without a GPU.
 */
#include "fake_cudart.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#define FAKE_DEVICES 2
#define FAKE_ALIGN 256

/* What nvcc's generated code calls (crt/host_runtime.h and
 * crt/device_functions.h declare them for C++ only). */
void **__cudaRegisterFatBinary(void *fat_cubin);
void __cudaRegisterFatBinaryEnd(void **handle);
void __cudaUnregisterFatBinary(void **handle);
void __cudaRegisterFunction(void **handle, const char *host_fun, char *device_fun,
                            const char *device_name, int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *block_dim, dim3 *grid_dim, int *warp_size);
unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared, struct CUstream_st *s);
cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shared, void *stream);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *fun);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void **args,
                               size_t shared, cudaStream_t stream);

struct CUevent_st {
    int fresh; /* recorded, not queried since: the next query is "not ready" */
};

struct CUstream_st {
    unsigned flags;
};

static pthread_mutex_t fake_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int fake_counts[GS_FAKE_COUNTERS];
static atomic_int fake_hang;
static atomic_int fake_launch_error;
static atomic_int fake_nccl_async; /* fake_nccl.c's answer, kept here with the other state */
static atomic_int fake_context[FAKE_DEVICES];

static _Thread_local cudaError_t tl_last_error;
static _Thread_local int tl_device;
static _Thread_local struct {
    dim3 grid, block;
    size_t shared;
    cudaStream_t stream;
} tl_config;

/* ---------------------------------------------------------------------- */
/* Control (fake_cudart.h)                                                 */
/* ---------------------------------------------------------------------- */

void gs_fake_rt_reset(void)
{
    for (int i = 0; i < GS_FAKE_COUNTERS; i++) {
        atomic_store(&fake_counts[i], 0);
    }
    for (int d = 0; d < FAKE_DEVICES; d++) {
        atomic_store(&fake_context[d], 0);
    }
    atomic_store(&fake_hang, 0);
    atomic_store(&fake_launch_error, 0);
    atomic_store(&fake_nccl_async, 0);
}

void gs_fake_nccl_set_async_error(int result)
{
    atomic_store(&fake_nccl_async, result);
}

int gs_fake_nccl_async_error(void)
{
    return atomic_load(&fake_nccl_async);
}

void gs_fake_rt_set_hang(int on)
{
    atomic_store(&fake_hang, on);
}

void gs_fake_rt_fail_next_launch(int err)
{
    atomic_store(&fake_launch_error, err);
}

void gs_fake_rt_set_last_error(int err)
{
    tl_last_error = (cudaError_t)err;
}

int gs_fake_rt_count(gs_fake_rt_counter_t which)
{
    return atomic_load(&fake_counts[which]);
}

void gs_fake_rt_bump(gs_fake_rt_counter_t which)
{
    atomic_fetch_add(&fake_counts[which], 1);
}

int gs_fake_rt_has_context(int device)
{
    return ((device >= 0) && (device < FAKE_DEVICES)) ? atomic_load(&fake_context[device]) : 0;
}

/* ---------------------------------------------------------------------- */
/* Helpers                                                                 */
/* ---------------------------------------------------------------------- */

/* A call's result, written into the slot when it is an error. */
static cudaError_t fake_ret(cudaError_t err)
{
    if (err != cudaSuccess) {
        tl_last_error = err;
    }
    return err;
}

/* A call that needs a context: the current device's is made on first use. */
static void fake_touch(void)
{
    atomic_store(&fake_context[tl_device], 1);
}

/* The GPU never finishes while the hang lasts. */
static void fake_block(void)
{
    const struct timespec nap = {.tv_sec = 0, .tv_nsec = 1000000};

    gs_fake_rt_bump(GS_FAKE_UNBOUNDED_WAIT);
    while (atomic_load(&fake_hang)) {
        (void)nanosleep(&nap, NULL);
    }
}

static cudaError_t fake_launch(void)
{
    const int err = atomic_exchange(&fake_launch_error, 0);

    fake_touch();
    gs_fake_rt_bump(GS_FAKE_LAUNCH);
    return fake_ret((cudaError_t)err);
}

static void *fake_alloc(size_t bytes)
{
    const size_t n = (bytes + FAKE_ALIGN - 1) / FAKE_ALIGN * FAKE_ALIGN;

    return aligned_alloc(FAKE_ALIGN, (n > 0) ? n : FAKE_ALIGN);
}

/* ---------------------------------------------------------------------- */
/* Errors                                                                  */
/* ---------------------------------------------------------------------- */

cudaError_t cudaGetLastError(void)
{
    const cudaError_t err = tl_last_error;

    tl_last_error = cudaSuccess;
    return err;
}

cudaError_t cudaPeekAtLastError(void)
{
    return tl_last_error;
}

const char *cudaGetErrorName(cudaError_t error)
{
    switch (error) {
    case cudaSuccess:
        return "cudaSuccess";
    case cudaErrorInvalidValue:
        return "cudaErrorInvalidValue";
    case cudaErrorInvalidDevice:
        return "cudaErrorInvalidDevice";
    case cudaErrorNotReady:
        return "cudaErrorNotReady";
    case cudaErrorLaunchOutOfResources:
        return "cudaErrorLaunchOutOfResources";
    default:
        return "cudaErrorFake";
    }
}

const char *cudaGetErrorString(cudaError_t error)
{
    switch (error) {
    case cudaSuccess:
        return "no error";
    case cudaErrorNotReady:
        return "device not ready";
    case cudaErrorLaunchOutOfResources:
        return "too many resources requested for launch";
    default:
        return "an error of the fake CUDA runtime";
    }
}

/* ---------------------------------------------------------------------- */
/* Devices and contexts                                                    */
/* ---------------------------------------------------------------------- */

cudaError_t cudaGetDeviceCount(int *count)
{
    *count = FAKE_DEVICES;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    *device = tl_device;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    gs_fake_rt_bump(GS_FAKE_SET_DEVICE);
    if ((device < 0) || (device >= FAKE_DEVICES)) {
        return fake_ret(cudaErrorInvalidDevice);
    }
    tl_device = device;
    fake_touch(); /* CUDA 12: cudaSetDevice initialises the primary context */
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if ((device < 0) || (device >= FAKE_DEVICES)) {
        return fake_ret(cudaErrorInvalidDevice);
    }
    memset(prop, 0, sizeof(*prop));
    (void)strcpy(prop->name, "fake GPU");
    prop->uuid.bytes[0] = (char)(0x40 + device);
    prop->major = 9;
    return cudaSuccess;
}

/* cuDevicePrimaryCtxGetState: CUresult (0: CUDA_SUCCESS). */
static int fake_primary_ctx_get_state(int device, unsigned int *flags, int *active)
{
    if ((device < 0) || (device >= FAKE_DEVICES)) {
        return 101; /* CUDA_ERROR_INVALID_DEVICE */
    }
    *flags = 0;
    *active = atomic_load(&fake_context[device]);
    return 0;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
                                             unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *status)
{
    int (*state)(int, unsigned int *, int *) = fake_primary_ctx_get_state;

    (void)version;
    (void)flags;
    *fn = NULL;
    if (status != NULL) {
        *status = cudaDriverEntryPointSymbolNotFound;
    }
    if (strcmp(symbol, "cuDevicePrimaryCtxGetState") == 0) {
        memcpy(fn, &state, sizeof(state));
        if (status != NULL) {
            *status = cudaDriverEntryPointSuccess;
        }
    }
    return cudaSuccess;
}

/* ---------------------------------------------------------------------- */
/* Streams and events                                                      */
/* ---------------------------------------------------------------------- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags)
{
    struct CUstream_st *s = calloc(1, sizeof(*s));

    if (s == NULL) {
        return fake_ret(cudaErrorMemoryAllocation);
    }
    fake_touch();
    s->flags = flags;
    *stream = s;
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    free(stream);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    (void)stream;
    fake_block();
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    fake_block();
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    (void)stream;
    (void)event;
    (void)flags;
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    struct CUevent_st *e = calloc(1, sizeof(*e));

    (void)flags;
    if (e == NULL) {
        return fake_ret(cudaErrorMemoryAllocation);
    }
    fake_touch();
    *event = e;
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    free(event);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    (void)stream;
    if (event == NULL) {
        return fake_ret(cudaErrorInvalidValue);
    }
    fake_touch();
    pthread_mutex_lock(&fake_mu);
    event->fresh = 1;
    pthread_mutex_unlock(&fake_mu);
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
    int ready;

    if (event == NULL) {
        return fake_ret(cudaErrorInvalidValue);
    }
    pthread_mutex_lock(&fake_mu);
    ready = !event->fresh && !atomic_load(&fake_hang);
    event->fresh = 0;
    pthread_mutex_unlock(&fake_mu);
    if (ready) {
        return cudaSuccess;
    }
    gs_fake_rt_bump(GS_FAKE_NOT_READY);
    return fake_ret(cudaErrorNotReady);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    (void)event;
    fake_block();
    return cudaSuccess;
}

/* ---------------------------------------------------------------------- */
/* Memory ("device" memory is host memory)                                 */
/* ---------------------------------------------------------------------- */

cudaError_t cudaMalloc(void **ptr, size_t size)
{
    fake_touch();
    *ptr = fake_alloc(size);
    return (*ptr != NULL) ? cudaSuccess : fake_ret(cudaErrorMemoryAllocation);
}

cudaError_t cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream)
{
    (void)stream;
    return cudaMalloc(ptr, size);
}

cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    (void)flags;
    return cudaMalloc(ptr, size);
}

cudaError_t cudaFree(void *ptr)
{
    free(ptr);
    return cudaSuccess;
}

cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream)
{
    (void)stream;
    free(ptr);
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *ptr)
{
    free(ptr);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    (void)kind;
    fake_touch();
    memmove(dst, src, count);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    (void)stream;
    return cudaMemcpy(dst, src, count, kind);
}

static cudaError_t fake_memset(void *ptr, int value, size_t count)
{
    fake_touch();
    memset(ptr, value, count);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *ptr, int value, size_t count)
{
    gs_fake_rt_bump(GS_FAKE_LEGACY_MEMSET);
    return fake_memset(ptr, value, count);
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, cudaStream_t stream)
{
    if (stream == NULL) {
        gs_fake_rt_bump(GS_FAKE_LEGACY_MEMSET);
    }
    return fake_memset(ptr, value, count);
}

/* ---------------------------------------------------------------------- */
/* Kernels: registration at load time, launches                            */
/* ---------------------------------------------------------------------- */

void **__cudaRegisterFatBinary(void *fat_cubin)
{
    static void *handle[1];

    (void)fat_cubin;
    return handle;
}

void __cudaRegisterFatBinaryEnd(void **handle)
{
    (void)handle;
}

void __cudaUnregisterFatBinary(void **handle)
{
    (void)handle;
}

void __cudaRegisterFunction(void **handle, const char *host_fun, char *device_fun,
                            const char *device_name, int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *block_dim, dim3 *grid_dim, int *warp_size)
{
    (void)handle;
    (void)host_fun;
    (void)device_fun;
    (void)device_name;
    (void)thread_limit;
    (void)tid;
    (void)bid;
    (void)block_dim;
    (void)grid_dim;
    (void)warp_size;
}

unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared, struct CUstream_st *s)
{
    tl_config.grid = grid;
    tl_config.block = block;
    tl_config.shared = shared;
    tl_config.stream = s;
    return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shared, void *stream)
{
    *grid = tl_config.grid;
    *block = tl_config.block;
    *shared = tl_config.shared;
    memcpy(stream, &tl_config.stream, sizeof(tl_config.stream));
    return cudaSuccess;
}

cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *fun)
{
    *kernel = (cudaKernel_t)(uintptr_t)fun;
    return cudaSuccess;
}

/* What <<< >>> lowers to (CUDA 13): its result is discarded by the caller. */
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void **args,
                               size_t shared, cudaStream_t stream)
{
    (void)kernel;
    (void)grid;
    (void)block;
    (void)args;
    (void)shared;
    (void)stream;
    return fake_launch();
}

cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shared,
                             cudaStream_t stream)
{
    (void)func;
    (void)grid;
    (void)block;
    (void)args;
    (void)shared;
    (void)stream;
    return fake_launch();
}

/* What cudaLaunchKernelEx (the C++ template) calls. */
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args)
{
    (void)config;
    (void)func;
    (void)args;
    return fake_launch();
}
