/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where a buffer lives, asked of the CUDA driver. The driver library
 * (libcuda.so.1) is loaded on first use with dlopen, in every build: a
 * build without CUDA must still recognise a device pointer to refuse it,
 * and a process without a driver has no device memory at all. One code
 * path serves both builds, and the tests exercise it without a GPU by
 * putting a fake driver first on the loader path.
 */
#ifndef GS_DEVICE_MEMKIND_H
#define GS_DEVICE_MEMKIND_H

/* 1 when @p ptr is CUDA device or managed memory (and *device_out, when
 * not NULL, its device ordinal), 0 for host memory of any kind (pageable,
 * pinned, registered) and whenever no CUDA driver is loaded. NULL is host.
 * Thread-safe; about a microsecond per call once the driver is loaded. */
int gs__mem_is_device(const void *ptr, int *device_out);

/* 1 when a CUDA driver was found and initialised (for logs and gs_info). */
int gs__mem_driver_loaded(void);

/* What this build and process can do with device buffers, for gs_info:
 * "CUDA on, NCCL on; CUDA driver found" and the like. Never NULL. */
const char *gs__device_summary(void);

#endif /* GS_DEVICE_MEMKIND_H */
