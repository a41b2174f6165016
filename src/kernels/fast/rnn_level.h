/* rnn_level.h - the gate loop of the LSTM cell kernel (rnn.c) for the level that vmath_level.h
 * was last included for: rnn.c includes the pair once per level. */

/* Units [u0, u1) of an LSTM step: with x_k = gp[k H + u] + xp[k H + u] for the four gates of
 * unit u (gate[0..4) = the fields of i, f, g, o), c2 = sigmoid(x_f) c + sigmoid(x_i) tanh(x_g),
 * h2 = sigmoid(x_o) tanh(c2): the step's operators in its order, each rounded to float. */
static VATTR void V(lstm_gates)(const float *gp, const float *xp, const float *c, int64_t h,
                                const int64_t *gate, int64_t u0, int64_t u1, float *h2, float *c2) {
    const float *gi = gp + gate[0] * h, *gf = gp + gate[1] * h, *gg = gp + gate[2] * h,
                *go = gp + gate[3] * h;
    const float *xi = xp + gate[0] * h, *xf = xp + gate[1] * h, *xg = xp + gate[2] * h,
                *xo = xp + gate[3] * h;
    for (int64_t u = u0; u < u1; u += VL) {
        int64_t r = u1 - u < VL ? u1 - u : VL;
#define LD(p) (r == VL ? V(vload)(p) : V(vloadn)(p, r))
        VF vi = V(vsigmoid)(V(vadd)(LD(xi + u), LD(gi + u)));
        VF vf = V(vsigmoid)(V(vadd)(LD(xf + u), LD(gf + u)));
        VF vg = V(vtanh)(V(vadd)(LD(xg + u), LD(gg + u)));
        VF vo = V(vsigmoid)(V(vadd)(LD(xo + u), LD(go + u)));
        VF cn = V(vadd)(V(vmul)(vf, LD(c + u)), V(vmul)(vi, vg));
#undef LD
        VF hn = V(vmul)(vo, V(vtanh)(cn));
        if (r == VL) {
            V(vstore)(c2 + u, cn);
            V(vstore)(h2 + u, hn);
        } else {
            V(vstoren)(c2 + u, cn, r);
            V(vstoren)(h2 + u, hn, r);
        }
    }
}

/* Units [u0, u1) of a GRU step (linear_before_reset): with the fields Z, R, N of gate[0..3),
 * z = sigmoid(x_Z + g_Z), r = sigmoid(x_R + g_R), n = tanh(x_N + r (g_N + bn)) (bn NULL: none),
 * h2 = (1 - z) n + z h: the step's operators in its order, each rounded to float. */
static VATTR void V(gru_gates)(const float *gp, const float *xp, const float *bn, const float *h,
                               int64_t H, const int64_t *gate, int64_t u0, int64_t u1, float *h2) {
    const float *gz = gp + gate[0] * H, *gr = gp + gate[1] * H, *gn = gp + gate[2] * H;
    const float *xz = xp + gate[0] * H, *xr = xp + gate[1] * H, *xn = xp + gate[2] * H;
    for (int64_t u = u0; u < u1; u += VL) {
        int64_t r = u1 - u < VL ? u1 - u : VL;
#define LD(p) (r == VL ? V(vload)(p) : V(vloadn)(p, r))
        VF vz = V(vsigmoid)(V(vadd)(LD(xz + u), LD(gz + u)));
        VF vr = V(vsigmoid)(V(vadd)(LD(xr + u), LD(gr + u)));
        VF hn = bn != NULL ? V(vadd)(LD(gn + u), LD(bn + u)) : LD(gn + u);
        VF vn = V(vtanh)(V(vadd)(LD(xn + u), V(vmul)(vr, hn)));
        VF out = V(vadd)(V(vmul)(V(vsub)(V(vset)(1.0f), vz), vn), V(vmul)(vz, LD(h + u)));
#undef LD
        if (r == VL)
            V(vstore)(h2 + u, out);
        else
            V(vstoren)(h2 + u, out, r);
    }
}
