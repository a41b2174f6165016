/* cpu.c - the instruction-set level of the fast kernels (support.h, "CPU features"). */
#define _DEFAULT_SOURCE /* syscall (arch_prctl) */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "support.h"

static SupIsa detected = SUP_ISA_SCALAR, in_force = SUP_ISA_SCALAR;
static bool amx_detected, amx_in_force;
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

/* AMX with bf16 (CPUID.(7,0):EDX bits 22 and 24), the tile state enabled by the OS (XCR0 bits 17
 * and 18) and granted to this process (Linux: arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA, once
 * for every thread of the process). */
static bool detect_amx(void) {
#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__)
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if (!(d & (1u << 22)) || !(d & (1u << 24))) return false;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false; /* OSXSAVE */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return false;
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
#else
    return false;
#endif
}

static void init(void) {
    detected = in_force = detect();
    amx_detected = amx_in_force = detected == SUP_ISA_AVX512 && detect_amx();
    const char *e = getenv("RLY_ISA");
    if (e == NULL || e[0] == '\0') return;
    SupIsa want = in_force;
    if (strcmp(e, "scalar") == 0)
        want = SUP_ISA_SCALAR;
    else if (strcmp(e, "avx2") == 0)
        want = SUP_ISA_AVX2;
    else if (strcmp(e, "avx512") == 0)
        want = SUP_ISA_AVX512;
    else
        return;           /* amx (the top level: as detected), or not a level (ignored) */
    amx_in_force = false; /* a level below amx */
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

bool sup_amx(void) {
    pthread_once(&once, init);
    return __atomic_load_n(&amx_in_force, __ATOMIC_RELAXED) &&
           __atomic_load_n(&in_force, __ATOMIC_RELAXED) == SUP_ISA_AVX512;
}

bool sup_amx_detected(void) {
    pthread_once(&once, init);
    return amx_detected;
}

bool sup_amx_force(bool on) {
    pthread_once(&once, init);
    on = on && amx_detected;
    __atomic_store_n(&amx_in_force, on, __ATOMIC_RELAXED);
    return on;
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
