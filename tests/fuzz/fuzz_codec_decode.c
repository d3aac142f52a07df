/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the codec payload decoders (every codec, with and
 * without the zstd stage). The configuration and count are taken from the
 * input's own header fields (wire id, block size, param, count; the count
 * capped at 2^16), so that mutated bodies reach the codec, not only the
 * header check; the output dtype (f32, f64, f16, bf16: the conversion after
 * the codec) from the input length's low two bits. Every codec of
 * GS_CODEC_MAP is reached (the wire id is taken modulo the codec count, and
 * the corpus holds a payload of each). Decoding must return GS_OK or
 * GS_ERR_PROTOCOL, never read or write out of bounds (ASan), and on
 * GS_ERR_PROTOCOL leave the output untouched. Built with -fsanitize=fuzzer; regression_driver.c replays
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
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const gs_dtype_t dts[4] = {GS_DTYPE_F32, GS_DTYPE_F64, GS_DTYPE_F16, GS_DTYPE_BF16};
    static const size_t dt_bytes[4] = {4, 8, 2, 2};
    gs_codec_config_t cfg = GS_CODEC_CONFIG_INIT;
    const gs__codec_ops_t *ops;
    const gs_dtype_t dt = dts[size & 3u];
    const size_t esize = dt_bytes[size & 3u];
    size_t count = 7, scratch_size = 0, ybytes;
    uint8_t *y, *ref;
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
        cfg.zstd =
            ((data[6] & GS_CODEC_WIRE_FLAG_ZSTD) != 0) ? GS_CODEC_ZSTD_AUTO : GS_CODEC_ZSTD_OFF;
    }
    status = gs_codec_scratch_size(&cfg, count, dt, &scratch_size);
    if ((status == GS_ERR_UNSUPPORTED) && (cfg.zstd != GS_CODEC_ZSTD_OFF)) {
        /* A build without zstd: decode with the stage off, so a payload
         * that says it is a zstd frame must be refused (GS_ERR_PROTOCOL). */
        cfg.zstd = GS_CODEC_ZSTD_OFF;
        status = gs_codec_scratch_size(&cfg, count, dt, &scratch_size);
    }
    if (status != GS_OK) {
        abort();
    }
    ybytes = (count > 0 ? count : 1) * esize;
    y = malloc(ybytes);
    ref = malloc(ybytes);
    scratch = (scratch_size > 0) ? malloc(scratch_size) : NULL;
    if ((y == NULL) || (ref == NULL) || ((scratch_size > 0) && (scratch == NULL))) {
        abort();
    }
    memset(ref, 0x3c, ybytes); /* a finite value in every float dtype */
    for (pass = 0; pass < 2; pass++) {
        memcpy(y, ref, ybytes);
        status =
            (pass == 0)
                ? gs_codec_decode(&cfg, data, size, count, dt, scratch, scratch_size, y)
                : gs_codec_decode_accumulate(&cfg, data, size, count, dt, scratch, scratch_size, y);
        if ((status != GS_OK) && (status != GS_ERR_PROTOCOL)) {
            abort();
        }
        if ((status == GS_ERR_PROTOCOL) && (memcmp(y, ref, count * esize) != 0)) {
            abort();
        }
    }
    free(scratch);
    free(ref);
    free(y);
    return 0;
}
