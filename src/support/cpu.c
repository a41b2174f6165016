/* cpu.c - the instruction-set level of the fast kernels (support.h, "CPU features"). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

static SupIsa detected = SUP_ISA_SCALAR, in_force = SUP_ISA_SCALAR;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static SupIsa detect(void) {
#if defined(__GNUC__) && defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("fma"))
        return SUP_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return SUP_ISA_AVX2;
#endif
    return SUP_ISA_SCALAR;
}

static void init(void) {
    detected = in_force = detect();
    const char *e = getenv("RLY_ISA");
    if (e == NULL || e[0] == '\0') return;
    SupIsa want = in_force;
    if (strcmp(e, "scalar") == 0)
        want = SUP_ISA_SCALAR;
    else if (strcmp(e, "avx2") == 0)
        want = SUP_ISA_AVX2;
    else if (strcmp(e, "avx512") == 0)
        want = SUP_ISA_AVX512;
    if (want < in_force) in_force = want;
}

SupIsa sup_isa(void) {
    pthread_once(&once, init);
    return __atomic_load_n(&in_force, __ATOMIC_RELAXED);
}

SupIsa sup_isa_detected(void) {
    pthread_once(&once, init);
    return detected;
}

SupIsa sup_isa_force(SupIsa isa) {
    pthread_once(&once, init);
    if (isa > detected) isa = detected;
    __atomic_store_n(&in_force, isa, __ATOMIC_RELAXED);
    return isa;
}

const char *sup_isa_name(SupIsa isa) {
    switch (isa) {
    case SUP_ISA_SCALAR: return "scalar";
    case SUP_ISA_AVX2: return "avx2";
    case SUP_ISA_AVX512: return "avx512";
    }
    return "?";
}
