/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Staging sizes and budgets of the parameter server (ps_limits.h has the
 * bounds and why). Pure.
 */
#include "ps/ps_limits.h"

#include "ps/ps_wire.h"

size_t gs__ps_stage_cap(size_t need, size_t shard_cap)
{
    size_t cap = GS_PS_STAGE_MIN;

    if (need > shard_cap) {
        return need;
    }
    if (need >= shard_cap - shard_cap / 2) {
        return shard_cap;
    }
    while (cap < need) {
        cap *= 2; /* need < shard_cap / 2 + 1: no overflow */
    }
    return cap;
}

size_t gs__ps_stage_budget(size_t served_wire)
{
    const size_t twice = (served_wire > ((size_t)-1) / 2) ? (size_t)-1 : 2 * served_wire;

    return (twice < GS_PS_EAGER_BYTES) ? GS_PS_EAGER_BYTES : twice;
}

int gs__ps_stage_admit(size_t ops, size_t bytes, size_t charge, size_t budget)
{
    return (ops < GS_PS_STAGE_OPS) && (bytes <= budget) && (charge <= budget - bytes);
}
