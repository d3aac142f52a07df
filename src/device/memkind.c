/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Memory kind of a pointer through the CUDA driver API, loaded with
 * dlopen: cuInit once, then cuPointerGetAttribute(MEMORY_TYPE) per
 * buffer. The driver API, not cudaPointerGetAttributes: it answers the
 * same question without linking the runtime, so the build without CUDA
 * refuses device pointers with the same code. It does not allocate,
 * copy or synchronise anything.
 */
#include "device/memkind.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>

#include "core/log.h"

/* The driver API's values we use (cuda.h; stable since CUDA 4). */
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define CU_MEMORYTYPE_DEVICE 2
#define CU_MEMORYTYPE_UNIFIED 4

typedef int (*cu_init_fn_t)(unsigned flags);
typedef int (*cu_pointer_get_attribute_fn_t)(void *data, int attribute, unsigned long long ptr);

static pthread_once_t memkind_once = PTHREAD_ONCE_INIT;
static cu_pointer_get_attribute_fn_t memkind_get_attr;
static void *memkind_lib; /* never closed: memkind_get_attr points into it */

static void memkind_load(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    cu_init_fn_t init;
    int ret;

    if (lib == NULL) {
        return; /* no driver: no device memory in this process */
    }
    memkind_lib = lib;
    init = (cu_init_fn_t)dlsym(lib, "cuInit");
    memkind_get_attr = (cu_pointer_get_attribute_fn_t)dlsym(lib, "cuPointerGetAttribute");
    if ((init == NULL) || (memkind_get_attr == NULL)) {
        GS_WARN("libcuda.so.1 lacks cuInit or cuPointerGetAttribute: device buffers will not "
                "be recognised");
        memkind_get_attr = NULL;
        return;
    }
    ret = init(0);
    if (ret != 0) {
        /* A driver with no usable GPU, or the toolkit's link-time libcuda
         * (which fails every call): no device memory in this process. */
        GS_INFO(INIT, "CUDA driver found but cuInit failed (error %d): no device buffers", ret);
        memkind_get_attr = NULL;
    }
}

int gs__mem_is_device(const void *ptr, int *device_out)
{
    unsigned int type = 0;
    int ordinal = 0;

    if (ptr == NULL) {
        return 0;
    }
    pthread_once(&memkind_once, memkind_load);
    if (memkind_get_attr == NULL) {
        return 0;
    }
    /* Host memory the driver never saw answers CUDA_ERROR_INVALID_VALUE. */
    if (memkind_get_attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                         (unsigned long long)(uintptr_t)ptr) != 0) {
        return 0;
    }
    if ((type != CU_MEMORYTYPE_DEVICE) && (type != CU_MEMORYTYPE_UNIFIED)) {
        return 0;
    }
    if (device_out != NULL) {
        if (memkind_get_attr(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                             (unsigned long long)(uintptr_t)ptr) != 0) {
            ordinal = 0;
        }
        *device_out = ordinal;
    }
    return 1;
}

int gs__mem_driver_loaded(void)
{
    pthread_once(&memkind_once, memkind_load);
    return memkind_get_attr != NULL;
}

const char *gs__device_summary(void)
{
#if defined(GS_WITH_CUDA) && defined(GS_WITH_NCCL)
#define MEMKIND_BUILD "CUDA on, NCCL on"
#elif defined(GS_WITH_CUDA)
#define MEMKIND_BUILD "CUDA on, NCCL off"
#else
#define MEMKIND_BUILD "CUDA off (device buffers are refused)"
#endif
    return gs__mem_driver_loaded() ? MEMKIND_BUILD "; CUDA driver found"
                                   : MEMKIND_BUILD "; no usable CUDA driver";
#undef MEMKIND_BUILD
}
