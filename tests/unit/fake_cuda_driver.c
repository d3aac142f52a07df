/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A stand-in for the CUDA driver (built as libcuda.so.1 in its own folder
 * and put first on LD_LIBRARY_PATH by test_memkind), so that the memory-kind
 * checks run on machines without a GPU. It answers cuPointerGetAttribute
 * for the ranges a test registers with gs_fake_cuda_add() and says
 * "not a CUDA pointer" (CUDA_ERROR_INVALID_VALUE) for everything else. It
 * has nothing else of the driver: the CUDA runtime cannot use it.
 */
#include <stddef.h>
#include <stdint.h>

#define FAKE_MAX 8
#define FAKE_INVALID_VALUE 1
#define FAKE_MEMORY_TYPE 2
#define FAKE_DEVICE_ORDINAL 9
#define FAKE_MEMORYTYPE_DEVICE 2

/* Exported for the test (default visibility; the names are the test's). */
int gs_fake_cuda_add(const void *base, size_t len, int device);
void gs_fake_cuda_clear(void);
int gs_fake_cuda_init_calls(void);
int cuInit(unsigned flags);
int cuPointerGetAttribute(void *data, int attribute, unsigned long long ptr);

static struct {
    uintptr_t base;
    size_t len;
    int device;
} fake_ranges[FAKE_MAX];
static int fake_n;
static int fake_inits;

int gs_fake_cuda_add(const void *base, size_t len, int device)
{
    if (fake_n == FAKE_MAX) {
        return -1;
    }
    fake_ranges[fake_n].base = (uintptr_t)base;
    fake_ranges[fake_n].len = len;
    fake_ranges[fake_n].device = device;
    fake_n++;
    return 0;
}

void gs_fake_cuda_clear(void)
{
    fake_n = 0;
}

int gs_fake_cuda_init_calls(void)
{
    return fake_inits;
}

int cuInit(unsigned flags)
{
    (void)flags;
    fake_inits++;
    return 0;
}

int cuPointerGetAttribute(void *data, int attribute, unsigned long long ptr)
{
    for (int i = 0; i < fake_n; i++) {
        if ((ptr >= fake_ranges[i].base) && (ptr < fake_ranges[i].base + fake_ranges[i].len)) {
            if (attribute == FAKE_MEMORY_TYPE) {
                *(unsigned int *)data = FAKE_MEMORYTYPE_DEVICE;
                return 0;
            }
            if (attribute == FAKE_DEVICE_ORDINAL) {
                *(int *)data = fake_ranges[i].device;
                return 0;
            }
            return FAKE_INVALID_VALUE;
        }
    }
    return FAKE_INVALID_VALUE;
}
