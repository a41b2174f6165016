/* rnn_level.h - the gate loop of the LSTM cell kernel (rnn.c) for the level that vmath_level.h
 * was last included for: rnn.c includes the pair once per level. */

/* Units [u0, u1) of an LSTM step: with x_k = gp[k H + u] + xp[k H + u] for the four gates of
 * unit u (gate[0..4) = the fields of i, f, g, o), c2 = sigmoid(x_f) c + sigmoid(x_i) tanh(x_g),
 * h2 = sigmoid(x_o) tanh(c2): the step's operators in its order, each rounded to float. */
static VATTR void V(lstm_gates)(const float *gp, const float *xp, const float *c, int64_t h,
                                const int64_t *gate, int64_t u0, int64_t u1, float *h2,
                                float *c2) {
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
