/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GS_MAX_MESSAGE_BYTES (env_table.h): the longest message a transport
 * accepts from a peer. A peer announcing a longer one is failed with
 * GS_ERR_PROTOCOL naming it and the limit, before anything is allocated or
 * read for it, so a hostile or broken peer cannot make this process
 * allocate without bound. config.c validates the knob with the parser
 * below (a bad value fails gs_comm_init); comm.c hands the value to the
 * transport (gs__tp_params_t.max_message_bytes).
 */
#ifndef GS_CORE_MSG_LIMIT_H
#define GS_CORE_MSG_LIMIT_H

#include <stdint.h>

/* The default: 64 GiB. */
#define GS_MAX_MESSAGE_BYTES_DEFAULT (64ull << 30)
/* The range a value must fall in: 1 KiB .. 16 TiB (the TCP wire's own bound). */
#define GS_MAX_MESSAGE_BYTES_MIN (1ull << 10)
#define GS_MAX_MESSAGE_BYTES_MAX (1ull << 44)

/*
 * Parse @p text: decimal bytes, optionally followed by one of K, M, G, T
 * (binary: 2^10 .. 2^40, either case, an optional trailing "iB" or "B").
 * Returns 0 and sets *out for a value within [@p lo, @p hi], -1 otherwise
 * (*out untouched). Pure. Every size knob parses with it.
 */
static inline int gs__size_parse(const char *text, uint64_t lo, uint64_t hi, uint64_t *out)
{
    uint64_t v = 0;
    unsigned shift = 0;
    const char *p = text;

    if ((p == NULL) || (*p < '0') || (*p > '9')) {
        return -1;
    }
    for (; (*p >= '0') && (*p <= '9'); p++) {
        if (v > (UINT64_MAX - 9u) / 10u) {
            return -1;
        }
        v = v * 10u + (uint64_t)(*p - '0');
    }
    switch (*p) {
    case 'k':
    case 'K':
        shift = 10;
        p++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        p++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        p++;
        break;
    case 't':
    case 'T':
        shift = 40;
        p++;
        break;
    default:
        break;
    }
    if ((shift != 0) && (p[0] == 'i') && (p[1] == 'B')) {
        p += 2;
    } else if ((shift != 0) && (p[0] == 'B')) {
        p++;
    }
    if ((*p != '\0') || (v > (hi >> shift))) {
        return -1;
    }
    v <<= shift;
    if ((v < lo) || (v > hi)) {
        return -1;
    }
    *out = v;
    return 0;
}

/* GS_MAX_MESSAGE_BYTES: gs__size_parse within [MIN, MAX]. */
static inline int gs__max_message_parse(const char *text, uint64_t *out)
{
    return gs__size_parse(text, GS_MAX_MESSAGE_BYTES_MIN, GS_MAX_MESSAGE_BYTES_MAX, out);
}

#endif /* GS_CORE_MSG_LIMIT_H */
