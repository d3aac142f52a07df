/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The lossless zstd stage over a codec body. Compression and decompression
 * use libzstd's static contexts (ZSTD_initStaticCCtx / ZSTD_initStaticDCtx)
 * placed in the caller's scratch, so nothing here allocates, and the
 * workspace sizes come from the loaded libzstd itself. Decompression treats
 * the frame as hostile: it must decode to exactly the body size the header
 * implies, into a buffer of exactly that size (no bomb can grow past it).
 * The keep-or-drop policy (auto mode, >= 10%) is in codec_api.c.
 * Without libzstd (GS_WITH_ZSTD off) the stage is refused with
 * GS_ERR_UNSUPPORTED and a sentence naming the fix (the end of this file).
 */
#define ZSTD_STATIC_LINKING_ONLY
#include "compress/codec.h"

#include "core/error.h"

#include <stdio.h>
#ifdef GS_WITH_ZSTD
#include <zstd.h>
#endif

/* What a build without zstd tells the caller who asks for the stage. */
#define ZSTD_MISSING                                                                               \
    "this gradsync was built without zstd (libzstd was not found at configure time, or "           \
    "GS_WITH_ZSTD=OFF): install libzstd-dev (Debian, Ubuntu; libzstd-devel elsewhere) and "        \
    "rebuild, or leave the zstd stage off (cfg.zstd = GS_CODEC_ZSTD_OFF; every codec works "       \
    "without it)"

void gs__zstd_unsupported(const char *what)
{
    (void)gs__error_set(GS_ERR_UNSUPPORTED, "%s: %s", what, ZSTD_MISSING);
}

#ifdef GS_WITH_ZSTD

int gs__zstd_available(void)
{
    return 1;
}

void gs__zstd_summary(char *buf, size_t len)
{
    (void)snprintf(buf, len, "on (libzstd %s, headers %s)", ZSTD_versionString(),
                   ZSTD_VERSION_STRING);
}

size_t gs__zstd_bound(size_t raw)
{
    return ZSTD_compressBound(raw);
}

size_t gs__zstd_workspace(int level)
{
    const size_t c = ZSTD_estimateCCtxSize(level);
    const size_t d = ZSTD_estimateDCtxSize();

    return (c > d) ? c : d;
}

gs_status_t gs__zstd_compress(const void *src, size_t src_len, void *dst, size_t dst_cap, int level,
                              void *work, size_t work_len, size_t *len_out)
{
    ZSTD_CCtx *cctx = ZSTD_initStaticCCtx(work, work_len);
    size_t ret;

    if (cctx == NULL) {
        return gs__error_set(GS_ERR_INTERNAL,
                             "zstd: cannot place a compression context in %zu "
                             "bytes of scratch",
                             work_len);
    }
    ret = ZSTD_compressCCtx(cctx, dst, dst_cap, src, src_len, level);
    if (ZSTD_isError(ret)) {
        return gs__error_set(GS_ERR_INTERNAL, "zstd: compressing %zu bytes failed: %s", src_len,
                             ZSTD_getErrorName(ret));
    }
    *len_out = ret;
    return GS_OK;
}

gs_status_t gs__zstd_decompress(const void *src, size_t src_len, void *dst, size_t raw_len,
                                void *work, size_t work_len, char *why, size_t why_len)
{
    ZSTD_DCtx *dctx = ZSTD_initStaticDCtx(work, work_len);
    unsigned long long content;
    size_t ret;

    if (dctx == NULL) {
        snprintf(why, why_len, "cannot place a zstd decompression context in %zu bytes", work_len);
        return GS_ERR_INTERNAL;
    }
    content = ZSTD_getFrameContentSize(src, src_len);
    if ((content == ZSTD_CONTENTSIZE_ERROR) || (content == ZSTD_CONTENTSIZE_UNKNOWN) ||
        (content != (unsigned long long)raw_len)) {
        snprintf(why, why_len, "zstd frame does not declare the expected %zu bytes", raw_len);
        return GS_ERR_PROTOCOL;
    }
    ret = ZSTD_decompressDCtx(dctx, dst, raw_len, src, src_len);
    if (ZSTD_isError(ret)) {
        snprintf(why, why_len, "zstd frame is corrupt: %s", ZSTD_getErrorName(ret));
        return GS_ERR_PROTOCOL;
    }
    if (ret != raw_len) {
        snprintf(why, why_len, "zstd frame decoded to %zu bytes, expected %zu", ret, raw_len);
        return GS_ERR_PROTOCOL;
    }
    return GS_OK;
}

#else /* no zstd: the stage is refused in gs__codec_resolve; these are never reached */

int gs__zstd_available(void)
{
    return 0;
}

void gs__zstd_summary(char *buf, size_t len)
{
    (void)snprintf(buf, len,
                   "off (built without libzstd: the codecs' zstd stage returns "
                   "GS_ERR_UNSUPPORTED)");
}

size_t gs__zstd_bound(size_t raw)
{
    (void)raw;
    return 0;
}

size_t gs__zstd_workspace(int level)
{
    (void)level;
    return 0;
}

gs_status_t gs__zstd_compress(const void *src, size_t src_len, void *dst, size_t dst_cap, int level,
                              void *work, size_t work_len, size_t *len_out)
{
    (void)src;
    (void)src_len;
    (void)dst;
    (void)dst_cap;
    (void)level;
    (void)work;
    (void)work_len;
    (void)len_out;
    gs__zstd_unsupported("zstd compression");
    return GS_ERR_UNSUPPORTED;
}

gs_status_t gs__zstd_decompress(const void *src, size_t src_len, void *dst, size_t raw_len,
                                void *work, size_t work_len, char *why, size_t why_len)
{
    (void)src;
    (void)src_len;
    (void)dst;
    (void)raw_len;
    (void)work;
    (void)work_len;
    (void)snprintf(why, why_len, "a zstd frame arrived, but %s", ZSTD_MISSING);
    return GS_ERR_UNSUPPORTED;
}
#endif
