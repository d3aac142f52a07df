/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target for the diagnosis message (algo_diag.c): the 48-byte REPORT
 * or DESCRIBE a rank sends when collectives do not match. Decoding must
 * never crash or read out of bounds, must accept only whole messages with
 * the magic, and the words it makes of an accepted call must be a
 * terminated string that fits the buffer, whatever the numbers were.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "algo/diag/diag.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char words[64];
    char why[128];

    for (int nranks = 1; nranks <= 4096; nranks *= 64) {
        memset(words, 'x', sizeof(words));
        if (gs__algo_diag_decode(data, size, nranks, words, sizeof(words), why, sizeof(why)) ==
            GS_OK) {
            if ((size != 48) || (memcmp(data, "GDSG", 4) != 0) ||
                (memchr(words, '\0', sizeof(words)) == NULL)) {
                __builtin_trap();
            }
        }
    }
    return 0;
}
