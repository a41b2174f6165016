/* pb.c - the protobuf wire format: the field reader and the encoders of pb.h. Every read is
 * checked against the end of the enclosing range before it happens, so a truncated or lying
 * input ends in an error message, never in a read past the buffer. */
#include "frontend/onnx/pb.h"

const char *pb_varint(const uint8_t **pp, const uint8_t *end, uint64_t *v) {
    const uint8_t *p = *pp;
    uint64_t x = 0;
    for (int i = 0; i < 10; i++) {
        if (p == end) return "truncated varint";
        uint8_t b = *p++;
        if (i == 9 && (b & 0x80)) return "varint longer than 10 bytes";
        if (i == 9 && b > 1) return "varint wider than 64 bits";
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if ((b & 0x80) == 0) {
            *pp = p;
            *v = x;
            return NULL;
        }
    }
    RLY_UNREACHABLE();
}

static uint64_t load_le(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    memcpy(&v, p, n); /* little-endian host (pb.h) */
    return v;
}

/* Skip the value of a field with wire type `wire` whose tag ended at *pp. */
static const char *skip_value(const uint8_t **pp, const uint8_t *end, int wire) {
    uint64_t v;
    const char *why;
    switch (wire) {
    case PB_VARINT: return pb_varint(pp, end, &v);
    case PB_I64:
        if ((size_t)(end - *pp) < 8) return "truncated 64-bit value";
        *pp += 8;
        return NULL;
    case PB_I32:
        if ((size_t)(end - *pp) < 4) return "truncated 32-bit value";
        *pp += 4;
        return NULL;
    case PB_LEN:
        if ((why = pb_varint(pp, end, &v)) != NULL) return why;
        if (v > (uint64_t)(end - *pp)) return "length past the end of the enclosing message";
        *pp += v;
        return NULL;
    default: return "invalid wire type";
    }
}

/* Skip a group whose start tag (field `num`) ended at *pp, up to its matching end tag; nested
 * groups are tracked on a small stack (no recursion). */
static const char *skip_group(const uint8_t **pp, const uint8_t *end, uint32_t num) {
    uint32_t stack[PB_MAX_GROUP_DEPTH];
    int depth = 0;
    stack[depth++] = num;
    while (depth > 0) {
        uint64_t tag;
        const char *why = pb_varint(pp, end, &tag);
        if (why != NULL) return *pp == end ? "unterminated group" : why;
        if (tag > UINT32_MAX || (tag >> 3) == 0) return "invalid field number";
        uint32_t n = (uint32_t)(tag >> 3);
        int wire = (int)(tag & 7);
        if (wire == PB_SGROUP) {
            if (depth == PB_MAX_GROUP_DEPTH) return "groups nested too deeply";
            stack[depth++] = n;
        } else if (wire == PB_EGROUP) {
            if (stack[depth - 1] != n) return "end-group tag does not match its start-group tag";
            depth--;
        } else if ((why = skip_value(pp, end, wire)) != NULL) {
            return why;
        }
    }
    return NULL;
}

int pb_next(PbReader *r, PbField *f, const char **why, size_t *err_off) {
    if (r->p >= r->end) return 0;
    const uint8_t *p = r->p;
    uint64_t tag;
    const char *msg;
    memset(f, 0, sizeof *f);
    f->off = (size_t)(p - r->base);
    if ((msg = pb_varint(&p, r->end, &tag)) != NULL) goto fail;
    if (tag > UINT32_MAX || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff) {
        msg = "invalid field number";
        goto fail;
    }
    f->num = (uint32_t)(tag >> 3);
    f->wire = (uint8_t)(tag & 7);
    switch (f->wire) {
    case PB_VARINT: msg = pb_varint(&p, r->end, &f->v); break;
    case PB_I64:
    case PB_I32: {
        size_t n = f->wire == PB_I64 ? 8 : 4;
        if ((size_t)(r->end - p) < n) {
            msg = n == 8 ? "truncated 64-bit value" : "truncated 32-bit value";
            break;
        }
        f->v = load_le(p, n);
        p += n;
        break;
    }
    case PB_LEN: {
        uint64_t n;
        if ((msg = pb_varint(&p, r->end, &n)) != NULL) break;
        if (n > (uint64_t)(r->end - p)) {
            msg = "length past the end of the enclosing message";
            break;
        }
        f->data = p;
        f->len = (size_t)n;
        p += n;
        break;
    }
    case PB_SGROUP: msg = skip_group(&p, r->end, f->num); break;
    case PB_EGROUP: msg = "end-group tag without a start-group tag"; break;
    default: msg = "invalid wire type (6 or 7)"; break;
    }
    if (msg != NULL) goto fail;
    r->p = p;
    return 1;
fail:
    *why = msg;
    *err_off = f->off;
    return -1;
}

const char *pb_packed_count(const uint8_t *p, size_t n, int elem_wire, size_t *count) {
    if (elem_wire == PB_I32 || elem_wire == PB_I64) {
        size_t w = elem_wire == PB_I32 ? 4 : 8;
        if (n % w != 0)
            return w == 4 ? "packed 32-bit values: length not a multiple of 4"
                          : "packed 64-bit values: length not a multiple of 8";
        *count = n / w;
        return NULL;
    }
    const uint8_t *end = p + n;
    size_t c = 0;
    while (p < end) {
        uint64_t v;
        const char *why = pb_varint(&p, end, &v);
        if (why != NULL) return why;
        c++;
    }
    *count = c;
    return NULL;
}

void pb_rep_begin(PbRep *it, const PbField *f, int elem_wire) {
    memset(it, 0, sizeof *it);
    it->elem_wire = elem_wire;
    if (f->wire == PB_LEN) {
        it->p = f->data;
        it->end = f->data + f->len;
    } else {
        it->single = true;
        it->v = f->v;
    }
}

bool pb_rep_next(PbRep *it, uint64_t *v) {
    if (it->single) {
        it->single = false;
        *v = it->v;
        return true;
    }
    if (it->p == NULL || it->p >= it->end) return false;
    if (it->elem_wire == PB_VARINT) {
        /* checked by pb_packed_count; a failure here would be a bug */
        RLY_CHECK(pb_varint(&it->p, it->end, v) == NULL, "packed varints not validated");
        return true;
    }
    size_t w = it->elem_wire == PB_I32 ? 4 : 8;
    RLY_CHECK((size_t)(it->end - it->p) >= w, "packed values not validated");
    *v = load_le(it->p, w);
    it->p += w;
    return true;
}

void pb_put_varint(StrBuf *sb, uint64_t v) {
    char buf[10];
    size_t n = 0;
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        buf[n++] = (char)(b | (v ? 0x80 : 0));
    } while (v);
    sb_putn(sb, buf, n);
}

void pb_put_tag(StrBuf *sb, uint32_t num, int wire) {
    pb_put_varint(sb, ((uint64_t)num << 3) | (uint64_t)wire);
}

void pb_put_bytes(StrBuf *sb, uint32_t num, const void *p, size_t n) {
    pb_put_tag(sb, num, PB_LEN);
    pb_put_varint(sb, n);
    if (n) sb_putn(sb, p, n);
}
