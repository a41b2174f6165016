/* dtype.c - element types: names, sizes, classes, and half/bfloat16 conversions. */
#include <math.h>
#include <string.h>

#include "support/support.h"

static const struct {
    const char *name;
    uint8_t bits;
} dtypes[RLY_DTYPE_COUNT] = {
    [RLY_DTYPE_BOOL] = {"bool", 8},      [RLY_DTYPE_I8] = {"int8", 8},
    [RLY_DTYPE_I16] = {"int16", 16},     [RLY_DTYPE_I32] = {"int32", 32},
    [RLY_DTYPE_I64] = {"int64", 64},     [RLY_DTYPE_U8] = {"uint8", 8},
    [RLY_DTYPE_U16] = {"uint16", 16},    [RLY_DTYPE_U32] = {"uint32", 32},
    [RLY_DTYPE_U64] = {"uint64", 64},    [RLY_DTYPE_F16] = {"float16", 16},
    [RLY_DTYPE_F32] = {"float32", 32},   [RLY_DTYPE_F64] = {"float64", 64},
    [RLY_DTYPE_BF16] = {"bfloat16", 16},
};
_Static_assert(RLY_DTYPE_COUNT == 13, "update the dtype table");

int sup_dtype_bits(rly_dtype dt) { return dtypes[dt].bits; }
size_t sup_dtype_size(rly_dtype dt) { return dtypes[dt].bits / 8u; }
const char *sup_dtype_name(rly_dtype dt) {
    return (unsigned)dt < RLY_DTYPE_COUNT ? dtypes[dt].name : NULL;
}

/* TVM's String2DataType forms that name one of our dtypes: a bare kind means 32 bits ("int",
 * "uint", "float"), a 1-bit unsigned int is bool, and one lane ("float32x1") is the scalar. */
int sup_dtype_parse(const char *s, size_t n) {
    if (n > 2 && s[n - 2] == 'x' && s[n - 1] == '1') n -= 2; /* lanes = 1 */
    for (int i = 0; i < RLY_DTYPE_COUNT; i++)
        if (strlen(dtypes[i].name) == n && memcmp(dtypes[i].name, s, n) == 0) return i;
    static const struct {
        const char *name;
        rly_dtype dt;
    } shorthands[] = {{"int", RLY_DTYPE_I32},
                      {"uint", RLY_DTYPE_U32},
                      {"float", RLY_DTYPE_F32},
                      {"uint1", RLY_DTYPE_BOOL}};
    for (size_t i = 0; i < sizeof shorthands / sizeof shorthands[0]; i++)
        if (strlen(shorthands[i].name) == n && memcmp(shorthands[i].name, s, n) == 0)
            return (int)shorthands[i].dt;
    return -1;
}

bool sup_dtype_is_float(rly_dtype dt) {
    return dt == RLY_DTYPE_F16 || dt == RLY_DTYPE_F32 || dt == RLY_DTYPE_F64 ||
           dt == RLY_DTYPE_BF16;
}
bool sup_dtype_is_int(rly_dtype dt) { return dt >= RLY_DTYPE_I8 && dt <= RLY_DTYPE_I64; }
bool sup_dtype_is_uint(rly_dtype dt) { return dt >= RLY_DTYPE_U8 && dt <= RLY_DTYPE_U64; }

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t sup_f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xffu, mant = x & 0x7fffffu;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0)); /* inf / nan */
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u); /* overflow to inf */
    if (e <= 0) {                                   /* subnormal or zero */
        if (e < -10) return (uint16_t)sign;
        mant |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)e << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) half++; /* may carry into exp: ok */
    return (uint16_t)half;
}

float sup_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0) {
        if (mant == 0) return bits_f32(sign);
        float v = ldexpf((float)mant, -24);
        return sign ? -v : v;
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (mant << 13));
    return bits_f32(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t sup_f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* nan */
    uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)((x + rounding) >> 16);
}

float sup_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }
