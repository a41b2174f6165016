/* fuzz.h - what the fuzz targets share with replay.c, which runs them over a corpus without
 * libFuzzer. A target checks its invariants on one input; a violated invariant aborts (so that
 * libFuzzer saves the input), unless fuzz_keep_going is set, in which case it is counted in
 * fuzz_n_failures and the target returns normally (replay.c reports `N passed, N failed`). */
#ifndef RLY_FUZZ_H
#define RLY_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

extern bool fuzz_keep_going;   /* set by replay.c; false under libFuzzer */
extern size_t fuzz_n_failures; /* invariant violations seen so far (only with fuzz_keep_going) */

#endif
