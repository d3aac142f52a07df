/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The size of the last-level cache, as the kernel reports it in sysfs
 * (cpu0's index3, else index2: "32768K"). sysconf(_SC_LEVEL3_CACHE_SIZE)
 * reads cpuid, which a virtual machine may report as its host's (256 MiB on
 * the development VM against a real 32 MiB). One reader for the cost model's
 * cache term (algo_cost.c) and gs-bench's memory-floor buffers.
 */
#ifndef GS_CORE_LLC_H
#define GS_CORE_LLC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Bytes of the last-level cache, or 0 when sysfs does not say (or says
 * something outside 64 KiB .. 4 GiB). */
static inline uint64_t gs__llc_bytes(void)
{
    static const char *const paths[] = {"/sys/devices/system/cpu/cpu0/cache/index3/size",
                                        "/sys/devices/system/cpu/cpu0/cache/index2/size"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        FILE *f = fopen(paths[i], "r");
        unsigned long v = 0;
        char unit = 0;
        int got;

        if (f == NULL) {
            continue;
        }
        /* NOLINTNEXTLINE(cert-err34-c): a size the kernel wrote, not user input. */
        got = fscanf(f, "%lu%c", &v, &unit);
        fclose(f);
        if ((got >= 1) && (v > 0)) {
            const uint64_t bytes = (uint64_t)v << ((unit == 'K') ? 10 : (unit == 'M') ? 20 : 0);
            if ((bytes >= (64ull << 10)) && (bytes <= (4ull << 30))) {
                return bytes;
            }
        }
    }
    return 0;
}

#endif /* GS_CORE_LLC_H */
