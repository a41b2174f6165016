/* fuzz_exec.c - libFuzzer target for the VM executable loader (src/runtime/exec_file.c), as a
 * round trip.
 *
 * Every input is decoded structurally (rt_exec_decode without validation), both from a copy at a
 * 64-byte aligned address (constants used in place) and from an odd address (constants copied):
 * - a failed decode must give a message "rlyx: ...", and both decodes must agree on failing;
 * - a decoded executable must equal the other decode field by field, encode again, decode to an
 *   equal executable, and encode to the same bytes (encoding is a fixpoint); the validator then
 *   runs over it (it must not crash, whatever it says).
 * Then the input goes through vm_exec_load_bytes (decode, vm_exec_validate, vm_exec_bind): it
 * must fail with a message or give an executable that vm_exec_free releases.
 *
 * Built as the libFuzzer binary `fuzz_exec` (RLY_FUZZ) and into `fuzz_replay_exec` (every
 * preset), which runs it over tests/fuzz/corpus/exec as a CTest test. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "runtime/exec_file.h"

bool fuzz_keep_going;
size_t fuzz_n_failures;

static void violated(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_exec: invariant violated: %s%s%s\n", what, detail ? ": " : "",
            detail ? detail : "");
    if (!fuzz_keep_going) abort();
    fuzz_n_failures++;
}

static bool is_message(const char *err) { return strncmp(err, "rlyx: ", 6) == 0 && err[6]; }

static void round_trip(const VmExec *x) {
    char err[512], why[256];
    StrBuf img = {0}, img2 = {0};
    if (!rt_exec_encode(x, &img, err, sizeof err)) {
        violated("a decoded executable does not encode", err);
        sb_free(&img);
        return;
    }
    VmExec *y = rt_exec_decode(img.data, img.len, 0, err, sizeof err);
    if (y == NULL) {
        violated("the re-encoded image does not decode", err);
    } else {
        if (!rt_exec_equal(x, y, why, sizeof why)) violated("the round trip changed it", why);
        if (!rt_exec_encode(y, &img2, err, sizeof err) || img.len != img2.len ||
            memcmp(img.data, img2.data, img.len) != 0)
            violated("encoding is not a fixpoint", NULL);
        rt_exec_release(y);
    }
    (void)vm_exec_validate(x, why, sizeof why);
    sb_free(&img);
    sb_free(&img2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512] = "", err2[512] = "", why[256];
    uint8_t *aligned = aligned_alloc(64, (size + 64) / 64 * 64);
    uint8_t *odd = malloc(size + 1);
    if (size) memcpy(aligned, data, size), memcpy(odd + 1, data, size);
    VmExec *x = rt_exec_decode(aligned, size, 0, err, sizeof err);
    VmExec *y = rt_exec_decode(odd + 1, size, 0, err2, sizeof err2);
    if (x == NULL && !is_message(err)) violated("a failed decode without a message", err);
    if ((x == NULL) != (y == NULL)) violated("the decodes at two addresses disagree", NULL);
    if (x != NULL && y != NULL) {
        if (!rt_exec_equal(x, y, why, sizeof why))
            violated("the decodes at two addresses differ", why);
        round_trip(x);
    }
    rt_exec_release(x);
    rt_exec_release(y);
    free(aligned);
    free(odd);

    err[0] = '\0';
    x = vm_exec_load_bytes(data, size, err, sizeof err);
    if (x == NULL && !is_message(err)) violated("vm_exec_load_bytes failed without a message", err);
    if (x != NULL) vm_exec_free(x);
    return 0;
}
