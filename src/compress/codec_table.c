/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The table of built-in codecs, indexed by wire id. One row per entry of
 * GS_CODEC_MAP in gradsync/compress.h; the static assertion below keeps the
 * two in step. Codec selection policy (which codec a collective uses) is
 * not here: the caller names the codec.
 */
#include "compress/codec.h"

#include <string.h>

static const gs__codec_ops_t *const codec_table[] = {
    [GS_CODEC_NONE] = &gs__codec_none_ops,         [GS_CODEC_FP16] = &gs__codec_fp16_ops,
    [GS_CODEC_BF16] = &gs__codec_bf16_ops,         [GS_CODEC_INT8] = &gs__codec_int8_ops,
    [GS_CODEC_QSGD] = &gs__codec_qsgd_ops,         [GS_CODEC_SIGN] = &gs__codec_sign_ops,
    [GS_CODEC_TOPK] = &gs__codec_topk_ops,         [GS_CODEC_RANDK] = &gs__codec_randk_ops,
    [GS_CODEC_INT4] = &gs__codec_int4_ops,         [GS_CODEC_FP8_E4M3] = &gs__codec_fp8_e4m3_ops,
    [GS_CODEC_FP8_E5M2] = &gs__codec_fp8_e5m2_ops,
};

_Static_assert(sizeof(codec_table) / sizeof(codec_table[0]) == GS_CODEC_KIND_COUNT,
               "one codec per GS_CODEC_MAP row");

const gs__codec_ops_t *gs__codec_lookup(gs_codec_kind_t kind)
{
    if ((unsigned)kind >= (unsigned)GS_CODEC_KIND_COUNT) {
        return NULL;
    }
    return codec_table[kind];
}
