/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the codec payload decoders (every codec, with and
 * without the zstd stage). The configuration and count are taken from the
 * input's own header fields (wire id, block size, param, count; the count
 * capped at 2^16), so that mutated bodies reach the codec, not only the
 * header check. Decoding must return GS_OK or GS_ERR_PROTOCOL, never read
 * or write out of bounds (ASan), and on GS_ERR_PROTOCOL leave the output
 * untouched. Built with -fsanitize=fuzzer; regression_driver.c replays
 * corpora/codec_decode/ without libFuzzer.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec.h"

#define MAX_COUNT (1u << 16)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gs_codec_config_t cfg = GS_CODEC_CONFIG_INIT;
    const gs_codec_ops_t *ops;
    size_t count = 7, scratch_size = 0, i;
    float *y;
    void *scratch = NULL;
    gs_status_t status;
    int pass;

    if (size >= GS_CODEC_HEADER_BYTES) {
        const uint32_t block = rd32(data + 8), param = rd32(data + 12);

        cfg.kind = (gs_codec_kind_t)(data[5] % GS_CODEC_KIND_COUNT);
        count = rd32(data + 16) % (MAX_COUNT + 1);
        ops = gs__codec_lookup(cfg.kind);
        if (((ops->flags & GS_CODEC_F_BLOCKED) != 0) && (block >= 1) &&
            (block <= GS_CODEC_MAX_BLOCK)) {
            cfg.block_size = (int)block;
        }
        if (((ops->flags & GS_CODEC_F_LEVELS) != 0) && (param >= 1) &&
            (param <= GS_CODEC_MAX_LEVELS)) {
            cfg.levels = (int)param;
        }
        if (((ops->flags & GS_CODEC_F_SPARSE) != 0) && (count > 0) && (param >= 1) &&
            (param <= count)) {
            cfg.ratio = (double)param / (double)count;
        }
        cfg.zstd = ((data[6] & GS_CODEC_WIRE_FLAG_ZSTD) != 0) ? GS_CODEC_ZSTD_AUTO
                                                               : GS_CODEC_ZSTD_OFF;
    }
    if (gs_codec_scratch_size(&cfg, count, GS_DTYPE_F32, &scratch_size) != GS_OK) {
        abort();
    }
    y = malloc((count > 0 ? count : 1) * sizeof(float));
    scratch = (scratch_size > 0) ? malloc(scratch_size) : NULL;
    if ((y == NULL) || ((scratch_size > 0) && (scratch == NULL))) {
        abort();
    }
    for (pass = 0; pass < 2; pass++) {
        for (i = 0; i < count; i++) {
            y[i] = 3.0f;
        }
        status = (pass == 0) ? gs_codec_decode(&cfg, data, size, count, GS_DTYPE_F32, scratch,
                                               scratch_size, y)
                             : gs_codec_decode_accumulate(&cfg, data, size, count, GS_DTYPE_F32,
                                                          scratch, scratch_size, y);
        if ((status != GS_OK) && (status != GS_ERR_PROTOCOL)) {
            abort();
        }
        if (status == GS_ERR_PROTOCOL) {
            for (i = 0; i < count; i++) {
                if (y[i] != 3.0f) {
                    abort();
                }
            }
        }
    }
    free(scratch);
    free(y);
    return 0;
}
