/* conv.h - what conv.c (nn.conv2d) shares with winograd.c: a convolution's geometry and the
 * Winograd entry point. Private to the fast convolution kernels. */
#ifndef RLY_KERNELS_FAST_CONV_H
#define RLY_KERNELS_FAST_CONV_H

#include "kernels/fast/gemm.h"

/* An NCHW / OIHW float32 convolution, checked: every extent positive where the output has
 * elements, cin == groups * cin_g, cout == groups * cout_g. */
typedef struct Conv {
    int64_t batch, cin, h, w; /* data */
    int64_t cout, groups, cin_g, cout_g;
    int64_t kh, kw, oh, ow; /* kernel and output extents */
    int64_t sh, sw, dh, dw; /* strides, dilations */
    int64_t pt, pl, pb, pr; /* padding: top, left, bottom, right */
    const float *x;
} Conv;

/* Whether conv_winograd takes c (3x3, stride 1, dilation 1, one group, enough channels and
 * tiles to pay, AVX-512). */
bool kern_conv_winograd_fits(const Conv *c);
/* c by Winograd F(4x4, 3x3) into output o (argument 1 of kc the OIHW weight, transformed once
 * through k_prepared when constant), with the call's fused tail applied per output plane. 0, or
 * -1 with the call's error set (out of memory). */
int kern_conv_winograd(KCall *kc, const Conv *c, const DLTensor *o);

/* Whether conv_direct takes c (AVX-512, 16 or more output channels per group). */
bool kern_conv_direct_fits(const Conv *c);
/* c as a direct convolution with output channels on the lanes (conv_direct.c) into output o
 * (argument 1 of kc the OIHW weight, packed once through k_prepared when constant), with the
 * call's fused tail. 0, or -1 with the call's error set (out of memory). */
int kern_conv_direct(KCall *kc, const Conv *c, const DLTensor *o);

#endif /* RLY_KERNELS_FAST_CONV_H */
