/* SPDX-License-Identifier: Apache-2.0 */
/*
 * BSP and SSP readiness over clocks, and what a BSP server does with a push
 * (ps_consistency.h has the rules). Pure.
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

gs__ps_bsp_push_t gs__ps_bsp_push_kind(int64_t clock, int64_t round, int pushed, unsigned kept,
                                       int kept_same)
{
    if ((clock < round) || ((clock == round) && pushed) || ((clock > round) && kept_same)) {
        return GS_PS_BSP_TWICE;
    }
    if (clock == round) {
        return GS_PS_BSP_ADD;
    }
    return (kept < GS_PS_BSP_MAX_AHEAD) ? GS_PS_BSP_KEEP : GS_PS_BSP_AHEAD;
}
