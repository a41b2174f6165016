/* pb.h - the protobuf wire format, as the ONNX reader (onnx.c) needs it: a zero-copy field
 * reader over a byte range and a few encoders. Nothing here knows ONNX's messages.
 *
 * A message is a sequence of fields, each a tag varint (field number << 3 | wire type) and a
 * value: a varint (wire 0), 8 bytes (1), a length varint and that many bytes (2), a group up to
 * the matching end-group tag (3 and 4; deprecated, only skipped) or 4 bytes (5). pb_next reads
 * one field and checks it against the end of the enclosing range: a length past the end, a varint
 * longer than 10 bytes or wider than 64 bits, field number 0, wire types 6 and 7, a stray end-group
 * tag and an unterminated group are errors. Length-delimited values are slices of the input
 * (never copied). Little-endian hosts only (fixed-width values are read with memcpy). */
#ifndef RLY_ONNX_PB_H
#define RLY_ONNX_PB_H

#include "support/support.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the ONNX reader assumes a little-endian host"
#endif

enum { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2, PB_SGROUP = 3, PB_EGROUP = 4, PB_I32 = 5 };

#define PB_MAX_GROUP_DEPTH 64 /* nesting of (skipped) groups */

typedef struct PbReader {
    const uint8_t *base; /* start of the whole buffer (for byte offsets in messages) */
    const uint8_t *p;    /* next tag */
    const uint8_t *end;  /* end of the enclosing message */
} PbReader;

typedef struct PbField {
    uint32_t num;        /* field number, >= 1 */
    uint8_t wire;        /* PB_*; PB_SGROUP for a skipped group (no value) */
    uint64_t v;          /* PB_VARINT, PB_I64, PB_I32: the value (fixed-width bits zero-extended) */
    const uint8_t *data; /* PB_LEN: the payload (a slice of the input) */
    size_t len;          /* PB_LEN: its length */
    size_t off;          /* byte offset of the tag from base */
} PbField;

static inline PbReader pb_reader(const uint8_t *base, const uint8_t *p, size_t n) {
    return (PbReader){base, p, p + n};
}

/* Read the next field of r into f. Returns 1 for a field, 0 at the end of the range, -1 on
 * malformed input with *why (a static message) and *err_off (its byte offset from base) set. */
int pb_next(PbReader *r, PbField *f, const char **why, size_t *err_off);

/* Decode one varint at *p (< end); advances *p. NULL on success, else a static message. */
const char *pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *v);

/* The number of elements in a packed payload of elements with wire type elem_wire (PB_VARINT,
 * PB_I32 or PB_I64); NULL on success, else a static message (a truncated varint, a length that
 * is not a multiple of the element size). */
const char *pb_packed_count(const uint8_t *p, size_t n, int elem_wire, size_t *count);

/* Iterate the elements of one occurrence of a repeated scalar field: packed (PB_LEN, already
 * checked with pb_packed_count) or unpacked (one value). */
typedef struct PbRep {
    const uint8_t *p, *end;
    int elem_wire;
    bool single; /* an unpacked occurrence not yet returned */
    uint64_t v;
} PbRep;
void pb_rep_begin(PbRep *it, const PbField *f, int elem_wire);
bool pb_rep_next(PbRep *it, uint64_t *v);

/* ---- encoding ----------------------------------------------------------------------------- */

void pb_put_varint(StrBuf *sb, uint64_t v);
void pb_put_tag(StrBuf *sb, uint32_t num, int wire);
void pb_put_bytes(StrBuf *sb, uint32_t num, const void *p, size_t n); /* a PB_LEN field */

#endif /* RLY_ONNX_PB_H */
