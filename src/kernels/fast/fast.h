/* fast.h - the fast kernels (issue 16): f32 kernels for x86 at three instruction-set levels
 * (AVX-512, AVX2+FMA, portable C), chosen per call by sup_isa() (support.h, "CPU features"),
 * threaded through the call's pool (k_parallel) and reading weights the kernel prepared once
 * (k_prepared). Each has the KernelFn interface of kernel.h and the semantics of its operator's
 * reference kernel: a call it does not cover (another dtype, layout or attribute combination)
 * it hands to the reference kernel, so it can be bound wherever the reference kernel is.
 *
 * Level code lives in functions with __attribute__((target(...))) (FAST_AVX512, FAST_AVX2);
 * nothing is compiled with -march=native. Results differ from the reference kernels only by
 * float reassociation (documented per kernel in docs/kernels.md). */
#ifndef RLY_KERNELS_FAST_H
#define RLY_KERNELS_FAST_H

#include "kernels/kernel.h"

#define FAST_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,fma,avx2")))
#define FAST_AVX2 __attribute__((target("avx2,fma")))

/* The fast kernel of operator id `op`, or NULL when there is none. Fast kernels are off (NULL
 * for every op) when the environment has RLY_KERNELS=ref. */
KernelFn kern_fast_lookup(uint32_t op);
/* Whether fast kernels and fused programs are on (RLY_KERNELS is not "ref"). */
bool kern_fast_enabled(void);

/* Per-file tables (src/kernels/fast/<file>.c), each terminated by a row with fn NULL. */
extern const KernelDef kern_fast_gemm[], kern_fast_elem[], kern_fast_nn[], kern_fast_transform[];

#endif /* RLY_KERNELS_FAST_H */
