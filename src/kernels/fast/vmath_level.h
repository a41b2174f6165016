/* vmath_level.h - the vector layer of the elementwise and nn fast kernels (elem.c, nn.c): a
 * vector type VF of VL floats, its primitive operations and the f32 transcendentals (exp,
 * sigmoid, tanh, erf), for ONE instruction-set level chosen by FAST_LEVEL:
 *   2: AVX-512 (VL 16, FAST_AVX512), 1: AVX2+FMA (VL 8, FAST_AVX2), 0: portable C (VL 1).
 * A kernel file includes it once per level, each time followed by its level body (elem_level.h,
 * nn_level.h): there is deliberately no include guard, and every name it defines is either a
 * macro it #undefs first or a function named V(name) = name_<level> (vexp_avx512, ...). Every
 * function carries the level's target attribute (VATTR) so it inlines into the level's kernels;
 * nothing is compiled with -march=native.
 *
 * The portable level runs the same algorithms one float at a time (a*b + c without FMA), so the
 * three levels differ only by FMA rounding.
 *
 * vmax(a, b) / vmin(a, b) are x86's maxps/minps: a > b ? a : b and a < b ? a : b, so a NaN in a
 * yields b and a NaN in b yields b (kernels order operands for the NaN rule they need).
 *
 * Transcendentals (coefficients fitted for rly by weighted least squares toward minimax, see
 * docs/kernels_elem.md; max errors measured against libm in double over every float):
 *   vexp:     x = n ln2 + r, |r| <= ln2/2; e^r = 1 + r + r^2 P5(r); 2^n applied as two factors
 *             2^(n/2) 2^(n - n/2) so results down to the subnormals round once; x clamped to
 *             [-104, 88.8] (0 below, inf above), NaN kept;
 *   vsigmoid: e = exp(-|x|), s = 1 / (1 + e); x >= 0 ? s : e * s;
 *   vtanh:    |x| < 0.625: x + x^3 P4(x^2); else sign(x) (1 - 2 / (1 + exp(2|x|)));
 *   verf:     |x| < 1: x P6(x^2); else 1 - exp(-a^2) Q6(1 / (1 + a/2)) with a = min(|x|, 4)
 *             (erf is 1.0f from 3.92 on, and the formula gives 1.0f at 4); sign restored. */

#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "fast.h"

#undef VL
#undef VF
#undef VM
#undef VI
#undef VSUF
#undef VATTR
#undef V
#undef VCAT
#undef VCAT2

#define VCAT2(a, b) a##_##b
#define VCAT(a, b) VCAT2(a, b)
#define V(name) VCAT(name, VSUF)

#if FAST_LEVEL == 2
#define VL 16
#define VF __m512
#define VI __m512i
#define VM __mmask16
#define VSUF avx512
#define VATTR FAST_AVX512
#elif FAST_LEVEL == 1
#define VL 8
#define VF __m256
#define VI __m256i
#define VM __m256
#define VSUF avx2
#define VATTR FAST_AVX2
#elif FAST_LEVEL == 0
#define VL 1
#define VF float
#define VI int32_t
#define VM bool
#define VSUF scalar
#define VATTR
#else
#error "FAST_LEVEL must be 0, 1 or 2"
#endif

/* ---- primitives --------------------------------------------------------------------------- */

#if FAST_LEVEL == 2

static inline VATTR VF V(vset)(float f) { return _mm512_set1_ps(f); }
static inline VATTR VF V(vload)(const float *p) { return _mm512_loadu_ps(p); }
static inline VATTR void V(vstore)(float *p, VF v) { _mm512_storeu_ps(p, v); }
static inline VATTR VF V(vadd)(VF a, VF b) { return _mm512_add_ps(a, b); }
static inline VATTR VF V(vsub)(VF a, VF b) { return _mm512_sub_ps(a, b); }
static inline VATTR VF V(vmul)(VF a, VF b) { return _mm512_mul_ps(a, b); }
static inline VATTR VF V(vdiv)(VF a, VF b) { return _mm512_div_ps(a, b); }
static inline VATTR VF V(vfma)(VF a, VF b, VF c) { return _mm512_fmadd_ps(a, b, c); }
static inline VATTR VF V(vmax)(VF a, VF b) { return _mm512_max_ps(a, b); }
static inline VATTR VF V(vmin)(VF a, VF b) { return _mm512_min_ps(a, b); }
static inline VATTR VF V(vsqrt)(VF a) { return _mm512_sqrt_ps(a); }
static inline VATTR VI V(vbits)(VF a) { return _mm512_castps_si512(a); }
static inline VATTR VF V(vfrombits)(VI a) { return _mm512_castsi512_ps(a); }
static inline VATTR VI V(viadd)(VI a, VI b) { return _mm512_add_epi32(a, b); }
static inline VATTR VI V(visub)(VI a, VI b) { return _mm512_sub_epi32(a, b); }
static inline VATTR VI V(viand)(VI a, VI b) { return _mm512_and_si512(a, b); }
static inline VATTR VI V(vixor)(VI a, VI b) { return _mm512_xor_si512(a, b); }
static inline VATTR VI V(viset)(int32_t i) { return _mm512_set1_epi32(i); }
static inline VATTR VI V(vishl23)(VI a) { return _mm512_slli_epi32(a, 23); }
static inline VATTR VI V(vihalf)(VI a) { return _mm512_srai_epi32(a, 1); }
static inline VATTR VM V(vlt)(VF a, VF b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
static inline VATTR VM V(vnan)(VF a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
static inline VATTR VM V(vmor)(VM a, VM b) { return (VM)(a | b); }
static inline VATTR bool V(vmany)(VM a) { return a != 0; }
static inline VATTR VM V(vmnone)(void) { return 0; }
/* t where m, else f */
static inline VATTR VF V(vsel)(VM m, VF t, VF f) { return _mm512_mask_blend_ps(m, f, t); }
static inline VATTR bool V(vall)(VM m) { return m == (VM)0xffff; }
static inline VATTR float V(vhsum)(VF a) { return _mm512_reduce_add_ps(a); }

#elif FAST_LEVEL == 1

static inline VATTR VF V(vset)(float f) { return _mm256_set1_ps(f); }
static inline VATTR VF V(vload)(const float *p) { return _mm256_loadu_ps(p); }
static inline VATTR void V(vstore)(float *p, VF v) { _mm256_storeu_ps(p, v); }
static inline VATTR VF V(vadd)(VF a, VF b) { return _mm256_add_ps(a, b); }
static inline VATTR VF V(vsub)(VF a, VF b) { return _mm256_sub_ps(a, b); }
static inline VATTR VF V(vmul)(VF a, VF b) { return _mm256_mul_ps(a, b); }
static inline VATTR VF V(vdiv)(VF a, VF b) { return _mm256_div_ps(a, b); }
static inline VATTR VF V(vfma)(VF a, VF b, VF c) { return _mm256_fmadd_ps(a, b, c); }
static inline VATTR VF V(vmax)(VF a, VF b) { return _mm256_max_ps(a, b); }
static inline VATTR VF V(vmin)(VF a, VF b) { return _mm256_min_ps(a, b); }
static inline VATTR VF V(vsqrt)(VF a) { return _mm256_sqrt_ps(a); }
static inline VATTR VI V(vbits)(VF a) { return _mm256_castps_si256(a); }
static inline VATTR VF V(vfrombits)(VI a) { return _mm256_castsi256_ps(a); }
static inline VATTR VI V(viadd)(VI a, VI b) { return _mm256_add_epi32(a, b); }
static inline VATTR VI V(visub)(VI a, VI b) { return _mm256_sub_epi32(a, b); }
static inline VATTR VI V(viand)(VI a, VI b) { return _mm256_and_si256(a, b); }
static inline VATTR VI V(vixor)(VI a, VI b) { return _mm256_xor_si256(a, b); }
static inline VATTR VI V(viset)(int32_t i) { return _mm256_set1_epi32(i); }
static inline VATTR VI V(vishl23)(VI a) { return _mm256_slli_epi32(a, 23); }
static inline VATTR VI V(vihalf)(VI a) { return _mm256_srai_epi32(a, 1); }
static inline VATTR VM V(vlt)(VF a, VF b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
static inline VATTR VM V(vnan)(VF a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
static inline VATTR VM V(vmor)(VM a, VM b) { return _mm256_or_ps(a, b); }
static inline VATTR bool V(vmany)(VM a) { return _mm256_movemask_ps(a) != 0; }
static inline VATTR VM V(vmnone)(void) { return _mm256_setzero_ps(); }
static inline VATTR VF V(vsel)(VM m, VF t, VF f) { return _mm256_blendv_ps(f, t, m); }
static inline VATTR bool V(vall)(VM m) { return _mm256_movemask_ps(m) == 0xff; }
static inline VATTR float V(vhsum)(VF a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#else /* portable C, one float */

static inline VF V(vset)(float f) { return f; }
static inline VF V(vload)(const float *p) { return *p; }
static inline void V(vstore)(float *p, VF v) { *p = v; }
static inline VF V(vadd)(VF a, VF b) { return a + b; }
static inline VF V(vsub)(VF a, VF b) { return a - b; }
static inline VF V(vmul)(VF a, VF b) { return a * b; }
static inline VF V(vdiv)(VF a, VF b) { return a / b; }
static inline VF V(vfma)(VF a, VF b, VF c) { return a * b + c; }
static inline VF V(vmax)(VF a, VF b) { return a > b ? a : b; }
static inline VF V(vmin)(VF a, VF b) { return a < b ? a : b; }
static inline VF V(vsqrt)(VF a) { return sqrtf(a); }
static inline VI V(vbits)(VF a) {
    VI i;
    memcpy(&i, &a, sizeof i);
    return i;
}
static inline VF V(vfrombits)(VI a) {
    VF f;
    memcpy(&f, &a, sizeof f);
    return f;
}
/* Integer lanes wrap as the vector instructions do (no signed overflow in C). */
static inline VI V(viadd)(VI a, VI b) { return (VI)((uint32_t)a + (uint32_t)b); }
static inline VI V(visub)(VI a, VI b) { return (VI)((uint32_t)a - (uint32_t)b); }
static inline VI V(viand)(VI a, VI b) { return a & b; }
static inline VI V(vixor)(VI a, VI b) { return a ^ b; }
static inline VI V(viset)(int32_t i) { return i; }
static inline VI V(vishl23)(VI a) { return (VI)((uint32_t)a << 23); }
static inline VI V(vihalf)(VI a) { return a / 2; } /* any split of n into two halves works */
static inline VM V(vlt)(VF a, VF b) { return a < b; }
static inline VM V(vnan)(VF a) { return a != a; }
static inline VM V(vmor)(VM a, VM b) { return a || b; }
static inline bool V(vmany)(VM a) { return a; }
static inline VM V(vmnone)(void) { return false; }
static inline VF V(vsel)(VM m, VF t, VF f) { return m ? t : f; }
static inline bool V(vall)(VM m) { return m; }
static inline float V(vhsum)(VF a) { return a; }

#endif

static inline VATTR VF V(vzero)(void) { return V(vset)(0.0f); }
static inline VATTR VF V(vabs)(VF a) {
    return V(vfrombits)(V(viand)(V(vbits)(a), V(viset)(0x7fffffff)));
}
static inline VATTR VF V(vneg)(VF a) {
    return V(vfrombits)(V(vixor)(V(vbits)(a), V(viset)((int32_t)0x80000000u)));
}
/* |mag| with the sign of s (mag's sign bit must be clear) */
static inline VATTR VF V(vwithsign)(VF mag, VF s) {
    VI sign = V(viand)(V(vbits)(s), V(viset)((int32_t)0x80000000u));
    return V(vfrombits)(V(vixor)(V(vbits)(mag), sign));
}
/* The largest lane, lanes compared with a > b ? a : b from lane 0 up (NaN lanes skipped unless
 * lane 0 is one). */
static inline VATTR float V(vhmax)(VF a) {
    float l[VL];
    V(vstore)(l, a);
    float m = l[0];
    for (int i = 1; i < VL; i++)
        m = l[i] > m ? l[i] : m;
    return m;
}

/* r (0 <= r < VL) floats at p (the rest 0) / the first r lanes of v to p; a tail never reads or
 * writes past the tensor: masked loads and stores at AVX-512 and AVX2 (the masked-off lanes do
 * not fault), a stack buffer in portable C. Through the buffer at every level (before), the
 * memcpy was 25% of a global average pool over 1000 x 13 x 13 (45 us, onnxruntime 18). */
#if FAST_LEVEL == 1
/* lanes l < r set (AVX2 masked loads and stores) */
static inline VATTR __m256i V(lanes)(int64_t r) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#endif
static inline VATTR VF V(vloadn)(const float *p, int64_t r) {
#if FAST_LEVEL == 2
    return _mm512_maskz_loadu_ps((__mmask16)((1u << r) - 1), p);
#elif FAST_LEVEL == 1
    return _mm256_maskload_ps(p, V(lanes)(r));
#else
    float b[VL] = {0};
    memcpy(b, p, (size_t)r * sizeof(float));
    return V(vload)(b);
#endif
}
static inline VATTR void V(vstoren)(float *p, VF v, int64_t r) {
#if FAST_LEVEL == 2
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << r) - 1), v);
#elif FAST_LEVEL == 1
    _mm256_maskstore_ps(p, V(lanes)(r), v);
#else
    float b[VL];
    V(vstore)(b, v);
    memcpy(p, b, (size_t)r * sizeof(float));
#endif
}

/* ---- transcendentals ---------------------------------------------------------------------- */

/* e^x (see the file comment). */
static inline VATTR VF V(vexp)(VF x) {
    const VF magic = V(vset)(12582912.0f); /* 1.5 * 2^23: adding it rounds to an integer */
    x = V(vmax)(V(vset)(-104.0f), V(vmin)(V(vset)(88.8f), x)); /* NaN stays NaN */
    VF t = V(vfma)(x, V(vset)(1.44269504088896341f), magic);
    VF n = V(vsub)(t, magic);
    VF r = V(vfma)(n, V(vset)(-0.693359375f), x);        /* ln 2, high 9 bits: n ln2_hi exact */
    r = V(vfma)(n, V(vset)(2.12194440054690583e-4f), r); /* ln 2 - ln2_hi, negated */
    VF p = V(vset)(1.985776358e-4f);
    p = V(vfma)(p, r, V(vset)(1.393359794e-3f));
    p = V(vfma)(p, r, V(vset)(8.333360769e-3f));
    p = V(vfma)(p, r, V(vset)(4.166646552e-2f));
    p = V(vfma)(p, r, V(vset)(1.666666653e-1f));
    p = V(vfma)(p, r, V(vset)(5.000000013e-1f));
    VF e = V(vadd)(V(vfma)(p, V(vmul)(r, r), r), V(vset)(1.0f));
    VI ni = V(visub)(V(vbits)(t), V(vbits)(magic)); /* n as an integer, |n| <= 150 */
    VI n1 = V(vihalf)(ni), n2 = V(visub)(ni, n1);
    VF s1 = V(vfrombits)(V(vishl23)(V(viadd)(n1, V(viset)(127))));
    VF s2 = V(vfrombits)(V(vishl23)(V(viadd)(n2, V(viset)(127))));
    return V(vmul)(V(vmul)(e, s1), s2);
}

static inline VATTR VF V(vsigmoid)(VF x) {
    VF e = V(vexp)(V(vneg)(V(vabs)(x)));
    VF s = V(vdiv)(V(vset)(1.0f), V(vadd)(V(vset)(1.0f), e));
    return V(vsel)(V(vlt)(x, V(vzero)()), V(vmul)(e, s), s);
}

static inline VATTR VF V(vtanh)(VF x) {
    VF a = V(vabs)(x);
    VF z = V(vmul)(x, x);
    VF p = V(vset)(-6.097521807e-3f);
    p = V(vfma)(p, z, V(vset)(2.099786849e-2f));
    p = V(vfma)(p, z, V(vset)(-5.385110315e-2f));
    p = V(vfma)(p, z, V(vset)(1.333277170e-1f));
    p = V(vfma)(p, z, V(vset)(-3.333332899e-1f));
    /* with the sign of x: at x = -0, x^3 P + x is +0 */
    VF small = V(vwithsign)(V(vabs)(V(vfma)(V(vmul)(p, z), x, x)), x);
    VM is_small = V(vlt)(a, V(vset)(0.625f));
    if (V(vall)(is_small)) return small; /* every lane: no exp, no division */
    VF e = V(vexp)(V(vadd)(a, a));
    VF big = V(vsub)(V(vset)(1.0f), V(vdiv)(V(vset)(2.0f), V(vadd)(e, V(vset)(1.0f))));
    big = V(vwithsign)(big, x);
    return V(vsel)(is_small, small, big);
}

static inline VATTR VF V(verf)(VF x) {
    VF a = V(vabs)(x);
    VF z = V(vmul)(x, x);
    VF p = V(vset)(7.854394436e-05f);
    p = V(vfma)(p, z, V(vset)(-8.010367926e-04f));
    p = V(vfma)(p, z, V(vset)(5.188349603e-03f));
    p = V(vfma)(p, z, V(vset)(-2.685382516e-02f));
    p = V(vfma)(p, z, V(vset)(1.128358554e-01f));
    p = V(vfma)(p, z, V(vset)(-3.761262587e-01f));
    p = V(vfma)(p, z, V(vset)(1.128379166e+00f));
    VF small = V(vmul)(x, p);
    VM is_small = V(vlt)(a, V(vset)(1.0f)); /* NaN: not small */
    if (V(vall)(is_small)) return small;    /* every lane: no exp, no division */
    /* capped at 4, where the formula rounds to 1.0f; min(4, NaN) is NaN, which `big` keeps */
    VF ac = V(vmin)(V(vset)(4.0f), a);
    VF t = V(vdiv)(V(vset)(1.0f), V(vfma)(ac, V(vset)(0.5f), V(vset)(1.0f)));
    VF q = V(vset)(-5.908626224e-02f);
    q = V(vfma)(q, t, V(vset)(-4.081164181e-02f));
    q = V(vfma)(q, t, V(vset)(3.835465488e-01f));
    q = V(vfma)(q, t, V(vset)(1.144020575e-01f));
    q = V(vfma)(q, t, V(vset)(3.261154883e-01f));
    q = V(vfma)(q, t, V(vset)(2.745139588e-01f));
    q = V(vfma)(q, t, V(vset)(5.364985682e-04f));
    VF erfc = V(vmul)(V(vexp)(V(vneg)(V(vmul)(ac, ac))), q);
    VF big = V(vwithsign)(V(vsub)(V(vset)(1.0f), erfc), x);
    return V(vsel)(is_small, small, big);
}
