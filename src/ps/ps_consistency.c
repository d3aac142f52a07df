/* SPDX-License-Identifier: Apache-2.0 */
/*
 * BSP and SSP readiness over clocks (ps_consistency.h has the rules). Pure.
 */
#include "ps/ps_consistency.h"

#include <stddef.h>

int gs__ps_ssp_blocker(const int64_t *pushed_clock, const int64_t *wclock, int nworkers,
                       int64_t need)
{
    if (need < 0) {
        return -1;
    }
    for (int w = 0; w < nworkers; w++) {
        if (!gs__ps_worker_done(pushed_clock[w], wclock[w], need)) {
            return w;
        }
    }
    return -1;
}

int gs__ps_bsp_blocker(const uint8_t *pushed, const int64_t *wclock, int nworkers, int64_t round)
{
    for (int w = 0; w < nworkers; w++) {
        if ((pushed[w] == 0) && (wclock[w] <= round)) {
            return w;
        }
    }
    return -1;
}
