/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target for the rendezvous wire format: the hello that rank 0 reads
 * from any connection to the master port, and the table header every other
 * rank reads back, with its per-rank entries (address length and host id),
 * and the authentication records (AUTH from rank 0, PROOF from a client).
 * Decoding must never crash, read out of bounds, or accept an address
 * length that would overflow the address buffer.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/bootstrap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gs__boot_hello_t h;
    gs__boot_table_hdr_t t;
    uint32_t alen;
    uint64_t host;
    uint8_t nonce[16];
    uint8_t mac[32];

    if (gs__boot_hello_decode(data, size, &h) == GS_OK) {
        /* An accepted hello always describes a sane, bounded address. */
        if ((h.addr_len == 0) || (h.addr_len >= GS_SOCK_ADDR_MAX) || (h.rank >= h.world)) {
            __builtin_trap();
        }
    }
    if (gs__boot_table_hdr_decode(data, size, &t) == GS_OK) {
        if ((t.msg_len >= GS_BOOT_MSG_MAX) || (t.status > 0)) {
            __builtin_trap();
        }
    }
    /* A table entry, wherever it starts: at the input or after a header. */
    for (size_t off = 0; off <= GS_BOOT_TABLE_HDR_BYTES; off += GS_BOOT_TABLE_HDR_BYTES) {
        if ((size >= off) &&
            (gs__boot_entry_decode(data + off, size - off, &alen, &host) == GS_OK)) {
            if ((alen == 0) || (alen >= GS_SOCK_ADDR_MAX) || (host == 0)) {
                __builtin_trap();
            }
        }
    }
    /* The bootstrap ring's hello and rows. */
    {
        gs__boot_ring_hello_t rh;
        uint32_t rank;

        if ((gs__boot_ring_hello_decode(data, size, &rh) == GS_OK) &&
            ((size < GS_BOOT_RING_HELLO_BYTES) || (memcmp(data, "GSBR", 4) != 0))) {
            __builtin_trap();
        }
        if ((gs__boot_row_decode(data, size, &rank, &alen, &host) == GS_OK) &&
            ((alen == 0) || (alen >= GS_SOCK_ADDR_MAX) || (host == 0))) {
            __builtin_trap();
        }
    }
    /* Authentication records: accepted only whole, with their magic. */
    if ((gs__boot_auth_decode(data, size, nonce, mac) == GS_OK) &&
        ((size < GS_BOOT_AUTH_BYTES) || (memcmp(data, "GSBA", 4) != 0))) {
        __builtin_trap();
    }
    if ((gs__boot_proof_decode(data, size, mac) == GS_OK) &&
        ((size < GS_BOOT_PROOF_BYTES) || (memcmp(data, "GSBP", 4) != 0))) {
        __builtin_trap();
    }
    return 0;
}
