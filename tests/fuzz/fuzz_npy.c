/* fuzz_npy.c - libFuzzer target for the .npy and .npz loaders (the files `rly run --inputs`
 * and `--input` read), as round trips.
 *
 * Every input is decoded both as a .npy image and as a .npz archive:
 * - a failed decode must leave an empty result and a non-empty message;
 * - a decoded array must pass rt_npy_validate; encoded again (.npy 1.0), it must decode to the
 *   same dtype, shape and bytes, and encode to the same image (encoding is a fixpoint);
 * - a decoded archive's arrays must validate; encoded again (stored, then deflated), each image
 *   must decode to the same names, dtypes, shapes and bytes.
 *
 * Built as the libFuzzer binary `fuzz_npy` (the `fuzz` preset) and into `fuzz_replay_npy` (every
 * preset), which runs it over tests/fuzz/corpus/npy as a CTest test. */
#include <stdio.h>
#include <string.h>

#include "fuzz.h"
#include "runtime/npy.h"

bool fuzz_keep_going;
size_t fuzz_n_failures;

static void violated(const char *what) {
    fprintf(stderr, "fuzz_npy: invariant violated: %s\n", what);
    if (!fuzz_keep_going) abort();
    fuzz_n_failures++;
}

static bool same_array(const NpyArray *a, const NpyArray *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim || a->nbytes != b->nbytes) return false;
    for (uint32_t d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0;
}

static void check_npy(const uint8_t *data, size_t size) {
    NpyArray a;
    char err[512] = "";
    if (!rt_npy_decode(data, size, &a, err, sizeof err)) {
        if (err[0] == '\0') violated("npy: a failed decode without a message");
        if (a.data != NULL || a.ndim != 0) violated("npy: a failed decode left a result");
        return;
    }
    if (!rt_npy_validate(&a, err, sizeof err)) violated("npy: a decoded array does not validate");
    StrBuf img = {0}, img2 = {0};
    rt_npy_encode(&a, &img);
    NpyArray b;
    if (!rt_npy_decode(img.data, img.len, &b, err, sizeof err)) {
        violated("npy: the re-encoded image does not decode");
    } else {
        if (!same_array(&a, &b)) violated("npy: the round trip changed the array");
        rt_npy_encode(&b, &img2);
        if (img.len != img2.len || memcmp(img.data, img2.data, img.len) != 0)
            violated("npy: encoding is not a fixpoint");
        rt_npy_free(&b);
    }
    sb_free(&img);
    sb_free(&img2);
    rt_npy_free(&a);
}

static void check_npz(const uint8_t *data, size_t size) {
    Npz z;
    char err[512] = "";
    if (!rt_npz_decode(data, size, &z, err, sizeof err)) {
        if (err[0] == '\0') violated("npz: a failed decode without a message");
        if (z.n != 0 || z.items != NULL) violated("npz: a failed decode left a result");
        return;
    }
    for (size_t i = 0; i < z.n; i++)
        if (!rt_npy_validate(&z.items[i].arr, err, sizeof err))
            violated("npz: a decoded array does not validate");
    for (unsigned flags = 0; flags <= RT_NPZ_COMPRESS; flags += RT_NPZ_COMPRESS) {
        StrBuf img = {0};
        Npz y;
        if (!rt_npz_encode(&z, flags, &img, err, sizeof err)) {
            /* names that cannot be written back (too long for a member) are the only excuse */
            sb_free(&img);
            continue;
        }
        if (!rt_npz_decode(img.data, img.len, &y, err, sizeof err)) {
            violated("npz: the re-encoded archive does not decode");
        } else {
            bool same = y.n == z.n;
            for (size_t i = 0; same && i < z.n; i++)
                same = strcmp(y.items[i].name, z.items[i].name) == 0 &&
                       same_array(&y.items[i].arr, &z.items[i].arr);
            if (!same) violated("npz: the round trip changed the archive");
            rt_npz_free(&y);
        }
        sb_free(&img);
    }
    rt_npz_free(&z);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_npy(data, size);
    check_npz(data, size);
    return 0;
}
