/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Little-endian loads and stores for the wire formats (the TCP frames and
 * handshakes, the MPI transport's message header, the rendezvous, the
 * codecs' payload headers, recovery messages): one definition, byte by byte, so that alignment and the host's
 * byte order never matter.
 */
#ifndef GS_CORE_LE_H
#define GS_CORE_LE_H

#include <stdint.h>

static inline void gs__put_le16(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void gs__put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline void gs__put_le64(uint8_t *p, uint64_t v)
{
    gs__put_le32(p, (uint32_t)v);
    gs__put_le32(p + 4, (uint32_t)(v >> 32));
}

static inline uint32_t gs__get_le16(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8);
}

static inline uint32_t gs__get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t gs__get_le64(const uint8_t *p)
{
    return (uint64_t)gs__get_le32(p) | ((uint64_t)gs__get_le32(p + 4) << 32);
}

#endif /* GS_CORE_LE_H */
