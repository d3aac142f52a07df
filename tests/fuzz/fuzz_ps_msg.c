/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the parameter server's 256-byte control message
 * (src/ps/ps_wire.c): gs__ps_msg_decode with a world of 4 ranks, and, when
 * the input is longer than a message, once more with the world size taken
 * from the byte after it; then gs__ps_msg_check_shard against the shard
 * the message itself names and against a fixed one, with and without a
 * codec. What decodes must satisfy the decoder's contract (known type and
 * flags, sender in the world, NUL-terminated text, a count that does not
 * overflow its offset) and re-encode to the same header and text. Built
 * with -fsanitize=fuzzer; regression_driver.c replays corpora/ps_msg/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ps/ps_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one(const uint8_t *data, size_t len, int nranks)
{
    gs__ps_msg_t m;
    uint8_t again[GS_PS_MSG_BYTES];
    char why[160];
    size_t tlen;

    if (gs__ps_msg_decode(data, len, nranks, &m, why, sizeof(why)) != GS_OK) {
        if (memchr(why, '\0', sizeof(why)) == NULL) {
            abort();
        }
        return;
    }
    if ((len != GS_PS_MSG_BYTES) || (m.type < GS_PS_MSG_PUSH) || (m.type > GS_PS_MSG_CTS) ||
        (m.src < 0) || (m.src >= nranks) || ((m.flags & ~GS_PS_MSGF_ALL) != 0) ||
        ((m.seq & ~GS_PS_SEQ_MASK) != 0)) {
        abort();
    }
    tlen = strnlen(m.text, sizeof(m.text));
    if (tlen >= sizeof(m.text)) {
        abort();
    }
    if (((m.type == GS_PS_MSG_PUSH) || (m.type == GS_PS_MSG_PULL) || (m.type == GS_PS_MSG_CTS)) &&
        ((m.count == 0) || (m.offset > UINT64_MAX - m.count) || (m.dtype >= GS_DTYPE_COUNT))) {
        abort();
    }
    gs__ps_msg_encode(&m, again);
    if ((memcmp(again, data, GS_PS_MSG_TEXT_OFF) != 0) ||
        (memcmp(again + GS_PS_MSG_TEXT_OFF, data + GS_PS_MSG_TEXT_OFF, tlen + 1) != 0)) {
        abort();
    }
    (void)gs__ps_msg_type_name(m.type);
    if ((m.type == GS_PS_MSG_PUSH) || (m.type == GS_PS_MSG_PULL) || (m.type == GS_PS_MSG_CTS)) {
        const size_t elem = 4;
        const size_t vb = (m.count <= SIZE_MAX / elem) ? (size_t)m.count * elem : SIZE_MAX;
        const gs__ps_shard_expect_t own = {.offset = m.offset,
                                           .count = m.count,
                                           .dtype = (gs_dtype_t)m.dtype,
                                           .value_bytes = vb,
                                           .max_encoded = 0};
        const gs__ps_shard_expect_t own_codec = {.offset = m.offset,
                                                 .count = m.count,
                                                 .dtype = (gs_dtype_t)m.dtype,
                                                 .value_bytes = vb,
                                                 .max_encoded = vb / 2 + 64};
        const gs__ps_shard_expect_t fixed = {.offset = 0,
                                             .count = 1024,
                                             .dtype = GS_DTYPE_F32,
                                             .value_bytes = 4096,
                                             .max_encoded = 2048};
        const gs__ps_shard_expect_t *e[3] = {&own, &own_codec, &fixed};

        for (int i = 0; i < 3; i++) {
            if (gs__ps_msg_check_shard(&m, e[i], why, sizeof(why)) != GS_OK) {
                continue;
            }
            if ((m.offset != e[i]->offset) || (m.count != e[i]->count) ||
                (m.dtype != (uint8_t)e[i]->dtype)) {
                abort();
            }
            if ((m.type == GS_PS_MSG_PUSH) && ((m.flags & GS_PS_MSGF_COMPRESSED) != 0)) {
                if ((e[i]->max_encoded == 0) || (m.nbytes > e[i]->max_encoded)) {
                    abort();
                }
            } else if (m.nbytes != e[i]->value_bytes) {
                abort();
            }
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    one(data, size, 4);
    if (size > GS_PS_MSG_BYTES) {
        one(data, GS_PS_MSG_BYTES, 1 + (int)data[GS_PS_MSG_BYTES]);
    }
    return 0;
}
