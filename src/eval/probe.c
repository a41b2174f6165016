/* probe.c - the interpreter's side of `rly run --check-numerics` and `--profile` (eval.h
 * "probes", runtime/probe.h): what happens after each operator call while a probe is on. */
#include <stdio.h>
#include <string.h>

#include "eval/eval.h"
#include "runtime/probe.h"

/* "file:line:col" of span into out (nothing for a span without a file). */
static void span_text(Ctx *ctx, Span sp, StrBuf *out) {
    const SourceFile *f = diags_file(&ctx->diags, sp.file);
    if (f == NULL) return;
    uint32_t line, col;
    diags_line_col(&ctx->diags, sp.file, sp.lo, &line, &col);
    sb_printf(out, "%s:%u:%u", f->name, line, col);
}

static void record(const EvProbe *pr, Ctx *ctx, Call *c, const char *op, Value *const *args,
                   uint32_t n, const Value *r, uint64_t t0, uint64_t t1) {
    StrBuf sb = {0}, tmp = {0};
    span_text(ctx, c->base.span, &tmp);
    if (tmp.len) rt_profile_arg(&sb, "loc", sb_cstr(&tmp));
    tmp.len = 0;
    for (uint32_t a = 0; a < n; a++) {
        if (a) sb_puts(&tmp, ", ");
        rt_value_shape_text(args[a], &tmp);
    }
    rt_profile_arg(&sb, "inputs", sb_cstr(&tmp));
    tmp.len = 0;
    rt_value_shape_text(r, &tmp);
    rt_profile_arg(&sb, "output", sb_cstr(&tmp));
    RtProfile *p = pr->prof;
    rt_profile_add(p, rt_profile_intern(p, op, strlen(op)), rt_profile_intern(p, "operator", 8),
                   rt_profile_intern(p, sb_cstr(&sb), sb.len), t0, t1);
    sb_free(&sb);
    sb_free(&tmp);
}

bool ev_probe_op(const EvProbe *pr, Ctx *ctx, Call *c, const char *op, Value *const *args,
                 uint32_t n, const Value *r, uint64_t t0, uint64_t t1) {
    if (pr->prof != NULL) record(pr, ctx, c, op, args, n, r, t0, t1);
    if (!pr->check_numerics || !rt_value_nonfinite(r)) return true;
    for (uint32_t a = 0; a < n; a++)
        if (rt_value_nonfinite(args[a])) return true; /* carried in, not made here */
    StrBuf sb = {0};
    for (uint32_t a = 0; a < n; a++) {
        char label[32];
        snprintf(label, sizeof label, "input %u", a);
        rt_value_stats_text(args[a], "  ", label, &sb);
    }
    rt_value_stats_text(r, "  ", "result", &sb);
    if (sb.len && sb.data[sb.len - 1] == '\n') sb.data[--sb.len] = '\0';
    StrBuf what = {0};
    rt_nonfinite_text(r, &what);
    diag_error(&ctx->diags, c->base.span, "check-numerics: %s made %s from finite inputs\n%s", op,
               sb_cstr(&what), sb_cstr(&sb));
    sb_free(&what);
    sb_free(&sb);
    return false;
}

void ev_probe_quote(Ctx *ctx, const char *msg, StrBuf *out) {
    /* the first line is "NAME:LINE:COL: error: ..."; NAME may hold ':' */
    const char *err = strstr(msg, ": error: ");
    const char *nl = strchr(msg, '\n');
    sb_puts(out, msg);
    if (err == NULL || (nl != NULL && err > nl)) return;
    /* NAME:LINE:COL before err */
    const char *p = err;
    unsigned long line = 0, col = 0, scale = 1;
    while (p > msg && p[-1] >= '0' && p[-1] <= '9')
        col += (unsigned long)(*--p - '0') * scale, scale *= 10;
    if (p == err || p == msg || p[-1] != ':') return;
    const char *q = --p;
    scale = 1;
    while (p > msg && p[-1] >= '0' && p[-1] <= '9')
        line += (unsigned long)(*--p - '0') * scale, scale *= 10;
    if (p == q || p == msg || p[-1] != ':' || line == 0) return;
    size_t name_len = (size_t)(p - 1 - msg);
    for (uint32_t fi = 1; fi < ctx->diags.files.len; fi++) {
        const SourceFile *f = diags_file(&ctx->diags, fi);
        if (f == NULL || strlen(f->name) != name_len || strncmp(f->name, msg, name_len) != 0)
            continue;
        uint32_t l0, c0;
        diags_line_col(&ctx->diags, fi, 0, &l0, &c0); /* computes the line table */
        if (line > f->n_lines) return;
        uint32_t start = f->line_starts[line - 1], end = start;
        while (end < f->len && f->text[end] != '\n' && end - start < 200)
            end++;
        if (out->len && out->data[out->len - 1] != '\n') sb_putc(out, '\n');
        sb_puts(out, "  ");
        for (uint32_t i = start; i < end; i++) {
            unsigned char ch = (unsigned char)f->text[i];
            sb_putc(out, (ch < 0x20 || ch == 0x7f) ? ' ' : (char)ch);
        }
        sb_putc(out, '\n');
        (void)col;
        return;
    }
}
