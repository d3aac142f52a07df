/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Error-feedback state (gs_ef_t): an f32 residual per tensor element and a
 * step counter. gs_codec_encode() adds the input to the residual, encodes
 * the sum, and subtracts what the payload decodes to, so that over steps
 * the sum of the decoded payloads tracks the sum of the inputs and the
 * residual stays bounded (Seide et al., 2014; Karimireddy et al., 2019).
 * The encode-side logic is in codec_api.c; this file owns the object.
 */
#include "compress/codec.h"

#include "core/dtype.h"
#include "core/error.h"

#include <stdlib.h>
#include <string.h>

gs_status_t gs_ef_create(size_t count, gs_dtype_t dtype, gs_ef_t *ef_out)
{
    gs_ef_t ef;

    if (ef_out == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_ef_create: ef_out is NULL");
    }
    if (((unsigned)dtype >= (unsigned)GS_DTYPE_COUNT) || !gs__dtype_is_float(dtype)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_ef_create: dtype %d is not f32, f64, f16 or bf16", (int)dtype);
    }
    if (count > GS_CODEC_MAX_COUNT) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_ef_create: count %zu is too large", count);
    }
    ef = calloc(1, sizeof(*ef));
    if (ef == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "gs_ef_create: out of memory");
    }
    ef->residual = calloc((count > 0) ? count : 1, sizeof(float));
    if (ef->residual == NULL) {
        free(ef);
        return gs__error_set(GS_ERR_NO_MEMORY,
                             "gs_ef_create: no memory for a residual of %zu elements", count);
    }
    ef->count = count;
    ef->dtype = dtype;
    ef->step = 0;
    *ef_out = ef;
    return GS_OK;
}

gs_status_t gs_ef_reset(gs_ef_t ef)
{
    if (ef == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_ef_reset: ef is GS_EF_NULL");
    }
    if (ef->count > 0) {
        memset(ef->residual, 0, ef->count * sizeof(float));
    }
    /* The host copy is the residual now: the next device call uploads it on
     * its own stream, ordered after what that stream did before. (Zeroing
     * the device copy here could only use the legacy default stream, which
     * a non-blocking stream's work is not ordered with.) */
    ef->dev_current = 0;
    ef->step = 0;
    if (ef->server != NULL) {
        return gs_ef_reset(ef->server);
    }
    return GS_OK;
}

gs_status_t gs_ef_destroy(gs_ef_t ef)
{
    if (ef != NULL) {
        gs_ef_destroy(ef->server);
        if (ef->dev != NULL) {
            ef->dev->release(ef->dev);
        }
        free(ef->residual);
        free(ef);
    }
    return GS_OK;
}

gs_status_t gs__ef_sync_host(gs_ef_t ef)
{
    gs_status_t status = GS_OK;

    if (ef == NULL) {
        return GS_OK;
    }
    if (ef->dev_current && (ef->dev != NULL)) {
        status = ef->dev->to_host(ef->dev, ef->residual);
        if (status != GS_OK) {
            return status;
        }
        ef->dev_current = 0;
    }
    return gs__ef_sync_host(ef->server);
}

volatile const float gs__codec_minus_one = -1.0f;

GS_CODEC_CLONES
void gs__ef_add_f32(float *r, const float *x, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        r[i] += x[i];
    }
}

void gs__ef_add_input(gs_ef_t ef, const void *src)
{
    size_t i;

    switch (ef->dtype) {
    case GS_DTYPE_F32:
        gs__ef_add_f32(ef->residual, (const float *)src, ef->count);
        break;
    case GS_DTYPE_F64:
        for (i = 0; i < ef->count; i++) {
            ef->residual[i] += (float)((const double *)src)[i];
        }
        break;
    case GS_DTYPE_F16:
        for (i = 0; i < ef->count; i++) {
            ef->residual[i] += gs__f16_to_f32(((const uint16_t *)src)[i]);
        }
        break;
    default: /* GS_DTYPE_BF16 (checked at create) */
        for (i = 0; i < ef->count; i++) {
            ef->residual[i] += gs__bf16_to_f32(((const uint16_t *)src)[i]);
        }
        break;
    }
}
