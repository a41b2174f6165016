/* npy.h - NumPy .npy arrays and .npz archives, read and written without numpy.
 *
 * .npy: a magic string, a version (1.0, 2.0 and 3.0 are read; 1.0 is written), a Python dict
 * literal {'descr', 'fortran_order', 'shape'} and the raw elements. .npz: a zip archive whose
 * members are NAME.npy; members stored (method 0) or deflated (method 8, as
 * numpy.savez_compressed writes) are read, with ZIP64 records, and CRC-32 is checked.
 *
 * Decisions, for files that numpy can express and rly cannot, or the reverse:
 * - bfloat16 has no numpy dtype. It is written with descr '<V2', which is exactly what numpy
 *   writes for an ml_dtypes.bfloat16 array; plain numpy loads it as void 'V2' (view it as
 *   uint16 for the bits, or as ml_dtypes.bfloat16). Any 2-byte void descr ('<V2', '|V2') is
 *   read as bfloat16; other void sizes are rejected.
 * - Byte order: '<', '|' and '=' (and none) are read as little-endian; big-endian '>' data is
 *   byte-swapped on load. Everything is written little-endian. (rly runs on little-endian hosts
 *   only; npy.c refuses to compile elsewhere.)
 * - 'fortran_order': True arrays are transposed into C (row-major) order on load. Everything
 *   is written in C order with 'fortran_order': False.
 * - bool elements are normalized to 0/1 on load.
 * - Unsupported dtypes (complex, object, strings, datetimes, structured) are errors.
 * - .npz members whose name does not end in ".npy" (and directory entries) are skipped, as
 *   numpy's own NpzFile tolerates them; a duplicate array name is an error. Encrypted members
 *   and compression methods other than 0 and 8 are errors.
 * - Trailing bytes after the elements of a .npy are an error (a sign of a corrupt file).
 *
 * Loading never trusts a length: every size is checked against the bytes actually present
 * before anything is allocated, so a hostile file fails with a message instead of crashing or
 * allocating more than its content can fill (a deflated member may claim at most deflate's
 * largest expansion ratio of its compressed size, and members may not overlap). Allocations
 * sized by input report out-of-memory as an error; the small fixed bookkeeping goes through
 * sup_malloc. Errors are written to err (errlen bytes, NUL-terminated, truncated if needed). */
#ifndef RLY_RUNTIME_NPY_H
#define RLY_RUNTIME_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rly/rly.h"
#include "support/support.h"

#define RT_NPY_MAX_DIMS 32 /* numpy 1.x's NPY_MAXDIMS; more is rejected on load and save */
#define RT_NPY_ALIGN 64    /* alignment of NpyArray.data after a load or rt_npy_alloc */

/* A dense array, row-major (C order), elements little-endian. */
typedef struct NpyArray {
    rly_dtype dtype;
    uint32_t ndim;                  /* 0 for a scalar (0-d) array */
    int64_t shape[RT_NPY_MAX_DIMS]; /* shape[0..ndim) >= 0; the rest is 0 */
    void *data;                     /* owned when loaded or from rt_npy_alloc: never NULL then,
                                       RT_NPY_ALIGN-aligned, free with rt_npy_free */
    size_t nbytes;                  /* product(shape) * sup_dtype_size(dtype) */
} NpyArray;

typedef struct NpzEntry {
    char *name; /* member name without the ".npy" suffix (may contain '/'), NUL-terminated */
    NpyArray arr;
} NpzEntry;

/* An archive: entries in member order. After rt_npz_load everything is owned (free with
 * rt_npz_free); for saving, the caller builds it and keeps ownership. */
typedef struct Npz {
    NpzEntry *items;
    size_t n;
} Npz;

/* Flags of rt_npz_encode. */
enum {
    RT_NPZ_COMPRESS = 1u, /* deflate members (numpy.savez_compressed); otherwise stored */
    RT_NPZ_ZIP64 = 2u,    /* write ZIP64 records even where 32-bit fields would do (as numpy's
                             force_zip64); they are written anyway where needed */
};

/* Allocate a zero-filled array of the given dtype and shape into *out (ndim <= RT_NPY_MAX_DIMS,
 * dims >= 0). False with a message for a bad dtype or shape, a size overflow or out of memory. */
bool rt_npy_alloc(NpyArray *out, rly_dtype dtype, uint32_t ndim, const int64_t *shape, char *err,
                  size_t errlen);
/* Free the array's data and zero it. NULL or an already freed array is a no-op. */
void rt_npy_free(NpyArray *a);

/* Check that an array is well formed: known dtype, ndim <= RT_NPY_MAX_DIMS, dims >= 0, nbytes
 * consistent with the shape, data non-NULL when nbytes > 0. */
bool rt_npy_validate(const NpyArray *a, char *err, size_t errlen);

/* Decode a whole .npy image. On success *out owns a new array; on failure *out is zeroed and
 * err says why. buf is not modified and need not be aligned. */
bool rt_npy_decode(const void *buf, size_t len, NpyArray *out, char *err, size_t errlen);
/* Append the .npy image of a (version 1.0, C order, little-endian, header padded so that the
 * data starts at a multiple of 64) to out. `a` must pass rt_npy_validate (checked: a bug
 * otherwise). */
void rt_npy_encode(const NpyArray *a, StrBuf *out);

/* Read / write a .npy file. Saving writes a temporary file and renames it, so a failure leaves
 * no partial file. Messages name the path. */
bool rt_npy_load(const char *path, NpyArray *out, char *err, size_t errlen);
bool rt_npy_save(const char *path, const NpyArray *a, char *err, size_t errlen);

/* Decode a whole .npz image into *out (owned; free with rt_npz_free). On failure *out is
 * empty and err says why; nothing is leaked. */
bool rt_npz_decode(const void *buf, size_t len, Npz *out, char *err, size_t errlen);
/* Append the zip image of z to out. Every array must pass rt_npy_validate and names must be
 * non-empty, unique and short enough for a zip member name; false with a message otherwise
 * (out may then hold a partial image). Output is deterministic: fixed 1980-01-01 timestamps. */
bool rt_npz_encode(const Npz *z, unsigned flags, StrBuf *out, char *err, size_t errlen);

/* Read / write a .npz file (saving is atomic, as rt_npy_save). compress selects deflate. */
bool rt_npz_load(const char *path, Npz *out, char *err, size_t errlen);
bool rt_npz_save(const char *path, const Npz *z, bool compress, char *err, size_t errlen);

/* Lazy reading, for inputs: open a file, look at every array's name, dtype and shape, and decode
 * only the arrays wanted, straight into the caller's memory. The file is mapped, not read (stdin
 * and pipes are read). Opening an .npz lists and checks its directory (as rt_npz_decode does)
 * without inflating anything; a header costs inflating only the member's first bytes; reading
 * inflates into `dst` directly (a Fortran-ordered array goes through one temporary for the
 * transpose) and checks the CRC-32 and the member's end. With `single`, the file is one .npy
 * image, member 0, named "". Messages name the path and the member. */
typedef struct NpzReader NpzReader;
bool rt_npz_open(const char *path, bool single, NpzReader **out, char *err, size_t errlen);
size_t rt_npz_count(const NpzReader *r);
const char *rt_npz_name(const NpzReader *r, size_t i); /* without ".npy" */
/* Member i's dtype, ndim, shape and nbytes; hdr->data is NULL. */
bool rt_npz_header(NpzReader *r, size_t i, NpyArray *hdr, char *err, size_t errlen);
/* Member i's elements into dst, which holds exactly `nbytes` (its header's nbytes). */
bool rt_npz_read(NpzReader *r, size_t i, void *dst, size_t nbytes, char *err, size_t errlen);
void rt_npz_close(NpzReader *r); /* NULL is a no-op */

/* The entry called `name` (without ".npy"), or NULL. */
const NpyArray *rt_npz_find(const Npz *z, const char *name);
/* Free every name and array and the item vector, and zero *z. NULL is a no-op. */
void rt_npz_free(Npz *z);

#endif /* RLY_RUNTIME_NPY_H */
