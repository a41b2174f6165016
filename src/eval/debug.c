/* debug.c - the step debugger over the reference interpreter (debug.h; `rly debug`).
 *
 * Where it stops: at "stop points", expressions that do work (calls, lets, ifs, matches,
 * tuples, projections, references; not variables, constants or function literals) in the
 * program's file, and only when the evaluation arrives at a new source line. The line last
 * seen is saved on each non-tail call and restored on its return, so `next` over a line that
 * calls a function twice stops once. A tail call replaces its caller's frame, as the
 * interpreter does, so stepping over a tail call arrives in the callee.
 *
 * Modes after a command: step (the next new line anywhere), next (the next new line in this
 * frame or a caller: depth <= the depth at the command), finish (when the frame returns),
 * continue (breakpoints only). Breakpoints on a line hit at a new line; on a global, at the
 * first stop point after its function is entered. */
#include "eval/debug.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel.h"

typedef enum { BP_LINE, BP_GLOBAL } BpKind;

typedef struct Breakpoint {
    uint32_t id;
    BpKind kind;
    uint32_t line;      /* BP_LINE */
    const Function *fn; /* BP_GLOBAL */
    const char *name;   /* BP_GLOBAL: the global's name */
    uint64_t hits;
} Breakpoint;

typedef enum { MODE_STEP, MODE_NEXT, MODE_FINISH, MODE_CONTINUE } Mode;

struct EvDebugger {
    EvObserver ob;
    Module *m;
    uint32_t file;       /* the program's source file */
    const char *src;     /* its text */
    size_t src_len;      /* its length */
    Vec(uint32_t) lines; /* byte offset of each line start */
    Vec(uint8_t) code;   /* per line (1-based): 1 when a stop point starts there */
    EvReadLine read_line;
    void *read_state;
    FILE *out, *err;
    Vec(Breakpoint) bps;
    uint32_t next_bp;
    Mode mode;
    uint64_t mode_depth;       /* depth when next/finish was given */
    uint32_t last_line;        /* line of the last stop point seen (0: none in this frame) */
    Vec(uint32_t) saved_lines; /* last_line of each caller, pushed on non-tail calls */
    uint32_t pending;          /* id of a global breakpoint whose function was just entered */
    uint32_t sel; /* the frame `print` and `list` look at (frame N, up, down); 0 at each stop */
    bool quit;
};

/* ---- source lines ------------------------------------------------------------------------ */

static uint32_t line_of(const EvDebugger *d, uint32_t off) {
    uint32_t lo = 0, hi = (uint32_t)d->lines.len; /* the last line start <= off */
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (d->lines.data[mid] <= off)
            lo = mid;
        else
            hi = mid;
    }
    return lo + 1;
}

/* The text of line n (1-based) without its newline, into buf. */
static const char *line_text(const EvDebugger *d, uint32_t n, char *buf, size_t cap) {
    buf[0] = '\0';
    if (n == 0 || n > d->lines.len) return buf;
    uint32_t lo = d->lines.data[n - 1];
    uint32_t hi = n < d->lines.len ? d->lines.data[n] : (uint32_t)d->src_len;
    while (hi > lo && (d->src[hi - 1] == '\n' || d->src[hi - 1] == '\r'))
        hi--;
    size_t len = hi - lo < cap - 1 ? hi - lo : cap - 1;
    memcpy(buf, d->src + lo, len);
    buf[len] = '\0';
    return buf;
}

static bool stop_point(const Expr *e) {
    switch (e->kind) {
    case EXPR_VAR:
    case EXPR_CONSTANT:
    case EXPR_OP:
    case EXPR_GLOBAL_VAR:
    case EXPR_CONSTRUCTOR:
    case EXPR_FUNCTION: return false;
    default: return true;
    }
}

/* The line of e in the program's file, or 0 when e is elsewhere (the prelude) or unlocated. */
static uint32_t expr_line(const EvDebugger *d, const Expr *e) {
    if (e == NULL || e->span.file != d->file) return 0;
    return line_of(d, e->span.lo);
}

static VisitResult mark_code(Visitor *v, Expr *e) {
    EvDebugger *d = v->state;
    uint32_t l = expr_line(d, e);
    if (l > 0 && stop_point(e)) d->code.data[l] = 1;
    return VISIT_CONTINUE;
}

/* ---- printing values ----------------------------------------------------------------------- */

enum { SMALL_TENSOR = 32 }; /* tensors up to this many elements print whole */

static void tensor_summary(const RtTensor *t, StrBuf *sb) {
    char shape[256];
    rly_dtype dt = rt_tensor_dtype(t);
    int64_t n = k_numel(&t->t);
    sb_printf(sb, "Tensor[%s, %s]", k_shape_str(&t->t, shape, sizeof shape), sup_dtype_name(dt));
    if (t->t.ndim == 0 || n == 0) return;
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    int64_t n_nan = 0, n_inf = 0, n_fin = 0;
    const void *p = rt_tensor_data(t);
    for (int64_t i = 0; i < n; i++) {
        double x = sup_dtype_is_float(dt) ? k_loadf(p, dt, i) : (double)k_loadi(p, dt, i);
        if (isnan(x)) {
            n_nan++;
            continue;
        }
        if (isinf(x)) {
            n_inf++;
            continue;
        }
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
        sum += x;
        n_fin++;
    }
    if (n_fin > 0) sb_printf(sb, " min=%g max=%g mean=%g", lo, hi, sum / (double)n_fin);
    sb_printf(sb, " nan=%lld inf=%lld", (long long)n_nan, (long long)n_inf);
}

/* A value for `print`: a scalar as a literal; a tensor as its summary, and whole when small;
 * anything else as the interpreter prints it. */
static void describe_value(const Value *v, StrBuf *sb) {
    if (v->kind == VAL_TENSOR && RT_TENSOR(v)->t.ndim > 0) {
        const RtTensor *t = RT_TENSOR(v);
        tensor_summary(t, sb);
        if (k_numel(&t->t) <= SMALL_TENSOR) { /* the elements, without the type again */
            StrBuf all = {0};
            ev_print_value(v, SMALL_TENSOR, &all);
            const char *elems = strstr(sb_cstr(&all), "] ");
            sb_printf(sb, "\n  %s", elems ? elems + 2 : sb_cstr(&all));
            sb_free(&all);
        }
        return;
    }
    ev_print_value(v, 10, sb);
}

/* A short form for argument lists: scalars and small values as text, big tensors by type. */
static void short_value(const Value *v, StrBuf *sb) {
    if (v == NULL) {
        sb_puts(sb, "?");
        return;
    }
    if (v->kind == VAL_TENSOR && RT_TENSOR(v)->t.ndim > 0) {
        char shape[256];
        const RtTensor *t = RT_TENSOR(v);
        sb_printf(sb, "Tensor[%s, %s]", k_shape_str(&t->t, shape, sizeof shape),
                  sup_dtype_name(rt_tensor_dtype(t)));
        return;
    }
    StrBuf tmp = {0};
    ev_print_value(v, 4, &tmp);
    if (tmp.len > 40) {
        tmp.len = 37;
        sb_puts(&tmp, "...");
    }
    sb_puts(sb, sb_cstr(&tmp));
    sb_free(&tmp);
}

/* "@f (n=3)" / "a local function (x=1)" / "the expression" for frame k. */
static void frame_title(EvDebugger *d, Interp *it, uint32_t k, const EvFrame *f, StrBuf *sb) {
    if (f->fn == NULL) {
        sb_puts(sb, "the expression");
        return;
    }
    const char *g = ev_global_name(it, f->fn);
    if (g)
        sb_printf(sb, "@%s (", g);
    else
        sb_puts(sb, "a local function (");
    for (uint32_t i = 0; i < f->fn->n_params; i++) {
        const char *nm = f->fn->params[i]->name;
        sb_printf(sb, "%s%s=", i ? ", " : "", nm);
        Var *var = NULL;
        const Value *v = ev_frame_lookup(it, k, nm, &var);
        short_value(var == f->fn->params[i] ? v : NULL, sb);
    }
    sb_putc(sb, ')');
    (void)d;
}

static const char *file_name(const EvDebugger *d) {
    return diags_file(&d->m->ctx->diags, d->file)->name;
}

/* "TITLE at FILE:LINE" and then "LINE\tsource" (or "TITLE" alone when unlocated). */
static void show_frame(EvDebugger *d, Interp *it, uint32_t k, bool with_source) {
    EvFrame f;
    if (!ev_frame(it, k, &f)) return;
    StrBuf sb = {0};
    frame_title(d, it, k, &f, &sb);
    uint32_t l = expr_line(d, f.at);
    if (l > 0) sb_printf(&sb, " at %s:%u", file_name(d), l);
    fprintf(d->out, "%s\n", sb_cstr(&sb));
    if (with_source && l > 0) {
        char buf[512];
        fprintf(d->out, "%u\t%s\n", l, line_text(d, l, buf, sizeof buf));
    }
    sb_free(&sb);
}

/* ---- commands ------------------------------------------------------------------------------ */

static void cmd_error(EvDebugger *d, const char *fmt, ...) RLY_PRINTF(2, 3);
static void cmd_error(EvDebugger *d, const char *fmt, ...) {
    fflush(d->out);
    va_list ap;
    va_start(ap, fmt);
    fputs("rly: error: ", d->err);
    vfprintf(d->err, fmt, ap);
    fputc('\n', d->err);
    va_end(ap);
    fflush(d->err);
}

static bool parse_uint(const char *s, uint32_t *out) {
    char *end;
    if (*s < '0' || *s > '9') return false;
    unsigned long v = strtoul(s, &end, 10);
    if (*end != '\0' || v == 0 || v > UINT32_MAX) return false;
    *out = (uint32_t)v;
    return true;
}

static void cmd_break(EvDebugger *d, const char *arg) {
    Breakpoint bp = {.id = d->next_bp};
    uint32_t line;
    if (*arg == '\0') {
        cmd_error(d, "break needs a line number or a global: break 12, break @f");
        return;
    }
    if (parse_uint(arg, &line)) {
        if (line > d->lines.len || !d->code.data[line]) {
            cmd_error(d, "no code at line %u of %s (%zu lines)", line, file_name(d), d->lines.len);
            return;
        }
        bp.kind = BP_LINE;
        bp.line = line;
        fprintf(d->out, "Breakpoint %u at %s:%u\n", bp.id, file_name(d), line);
    } else {
        const char *name = arg[0] == '@' ? arg + 1 : arg;
        FuncDef *fd = ir_module_lookup(d->m, name, strlen(name));
        if (fd == NULL || fd->func == NULL) {
            cmd_error(d, "no global @%s in the program", name);
            return;
        }
        bp.kind = BP_GLOBAL;
        bp.fn = fd->func;
        bp.name = fd->gvar->name;
        fprintf(d->out, "Breakpoint %u at @%s\n", bp.id, bp.name);
    }
    d->next_bp++;
    vec_push(&d->bps, bp);
}

static void cmd_delete(EvDebugger *d, const char *arg) {
    uint32_t id;
    if (*arg == '\0') {
        d->bps.len = 0;
        d->pending = 0;
        fprintf(d->out, "Deleted all breakpoints\n");
        return;
    }
    if (!parse_uint(arg, &id)) {
        cmd_error(d, "delete takes a breakpoint number (info breakpoints lists them)");
        return;
    }
    for (size_t i = 0; i < d->bps.len; i++)
        if (d->bps.data[i].id == id) {
            memmove(&d->bps.data[i], &d->bps.data[i + 1],
                    (d->bps.len - i - 1) * sizeof *d->bps.data);
            d->bps.len--;
            fprintf(d->out, "Deleted breakpoint %u\n", id);
            return;
        }
    cmd_error(d, "no breakpoint number %u", id);
}

static void cmd_info(EvDebugger *d, const char *arg) {
    if (strcmp(arg, "breakpoints") != 0 && strcmp(arg, "break") != 0 && strcmp(arg, "b") != 0) {
        cmd_error(d, "info takes 'breakpoints'");
        return;
    }
    if (d->bps.len == 0) {
        fprintf(d->out, "No breakpoints.\n");
        return;
    }
    fprintf(d->out, "Num  Where                Hits\n");
    for (size_t i = 0; i < d->bps.len; i++) {
        const Breakpoint *b = &d->bps.data[i];
        char where[300];
        if (b->kind == BP_LINE)
            snprintf(where, sizeof where, "%s:%u", file_name(d), b->line);
        else
            snprintf(where, sizeof where, "@%s", b->name);
        fprintf(d->out, "%-4u %-20s %llu\n", b->id, where, (unsigned long long)b->hits);
    }
}

static void cmd_print(EvDebugger *d, Interp *it, const char *arg) {
    const char *name = arg[0] == '%' ? arg + 1 : arg;
    if (*name == '\0') {
        cmd_error(d, "print needs a variable: print %%x");
        return;
    }
    const Value *v = ev_frame_lookup(it, d->sel, name, NULL);
    if (v == NULL) {
        EvFrame f;
        StrBuf where = {0};
        if (ev_frame(it, d->sel, &f)) frame_title(d, it, d->sel, &f, &where);
        cmd_error(d, "no variable %%%s has a value here (in %s)", name, sb_cstr(&where));
        sb_free(&where);
        return;
    }
    StrBuf sb = {0};
    describe_value(v, &sb);
    fprintf(d->out, "%%%s = %s\n", name, sb_cstr(&sb));
    sb_free(&sb);
}

enum { BACKTRACE_MAX = 50 };

static void cmd_backtrace(EvDebugger *d, Interp *it, const char *arg) {
    uint32_t n = ev_n_frames(it), limit = BACKTRACE_MAX;
    if (*arg != '\0' && !parse_uint(arg, &limit)) {
        cmd_error(d, "backtrace takes a frame count");
        return;
    }
    char buf[512];
    for (uint32_t k = 0; k < n && k < limit; k++) {
        EvFrame f;
        if (!ev_frame(it, k, &f)) break;
        StrBuf sb = {0};
        frame_title(d, it, k, &f, &sb);
        uint32_t l = expr_line(d, f.at);
        fprintf(d->out, "#%-3u %s", k, sb_cstr(&sb));
        if (l > 0) {
            const char *t = line_text(d, l, buf, sizeof buf);
            while (*t == ' ' || *t == '\t')
                t++;
            fprintf(d->out, " at %s:%u: %s", file_name(d), l, t);
        }
        fputc('\n', d->out);
        sb_free(&sb);
    }
    if (n > limit) fprintf(d->out, "(%u more frames)\n", n - limit);
}

static void cmd_list(EvDebugger *d, Interp *it, const char *arg) {
    uint32_t center = 0;
    EvFrame f;
    if (*arg != '\0') {
        if (!parse_uint(arg, &center) || center > d->lines.len) {
            cmd_error(d, "list takes a line number of %s (1..%zu)", file_name(d), d->lines.len);
            return;
        }
    } else if (ev_frame(it, d->sel, &f)) {
        center = expr_line(d, f.at);
    }
    if (center == 0) center = 1;
    uint32_t cur = ev_frame(it, d->sel, &f) ? expr_line(d, f.at) : 0;
    uint32_t lo = center > 5 ? center - 5 : 1;
    uint32_t hi = center + 5 < d->lines.len ? center + 5 : (uint32_t)d->lines.len;
    char buf[512];
    for (uint32_t l = lo; l <= hi; l++)
        fprintf(d->out, "%s%u\t%s\n", l == cur ? "=> " : "   ", l,
                line_text(d, l, buf, sizeof buf));
}

/* Select frame k for print and list, and show it. */
static void cmd_frame(EvDebugger *d, Interp *it, const char *arg, int rel) {
    uint32_t k = d->sel, n = ev_n_frames(it);
    if (rel == 0) {
        if (*arg != '\0' && strcmp(arg, "0") != 0 && !parse_uint(arg, &k)) {
            cmd_error(d, "frame takes a frame number (backtrace lists them)");
            return;
        }
        if (*arg == '\0' || strcmp(arg, "0") == 0) k = *arg ? 0 : d->sel;
    } else if (rel > 0 ? k + 1 >= n : k == 0) {
        cmd_error(d, rel > 0 ? "already in the outermost frame" : "already in the innermost frame");
        return;
    } else {
        k = rel > 0 ? k + 1 : k - 1;
    }
    if (k >= n) {
        cmd_error(d, "no frame %u (%u frames)", k, n);
        return;
    }
    d->sel = k;
    fprintf(d->out, "#%-3u ", k);
    show_frame(d, it, k, true);
}

static void cmd_help(EvDebugger *d) {
    fputs("commands:\n"
          "  break LINE | break @global   stop at a line of the program, or on entering a global\n"
          "  delete [N]                   delete breakpoint N (all without N)\n"
          "  info breakpoints             list the breakpoints and their hit counts\n"
          "  step (s)                     run to the next line, entering calls\n"
          "  next (n)                     run to the next line of this function (over calls)\n"
          "  finish                       run until this function returns; show its value\n"
          "  continue (c)                 run to the next breakpoint or the end\n"
          "  print %x (p)                 a variable of the current frame (tensors summarized)\n"
          "  backtrace [N] (bt)           the active Relay frames, innermost first\n"
          "  frame [N], up, down          select a frame for print and list\n"
          "  list [LINE] (l)              the source around the current line (or LINE)\n"
          "  quit (q)                     stop the program and leave\n",
          d->out);
}

/* Stopped: read commands until one resumes the run. False: quit. */
static bool command_loop(EvDebugger *d, Interp *it) {
    d->sel = 0;
    for (;;) {
        fflush(d->out);
        char *line = d->read_line(d->read_state, "(rly-debug) ");
        if (line == NULL) {
            d->quit = true;
            return false;
        }
        char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        size_t n = strlen(s);
        while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
            s[--n] = '\0';
        char *arg = s;
        while (*arg && *arg != ' ' && *arg != '\t')
            arg++;
        if (*arg) *arg++ = '\0';
        while (*arg == ' ' || *arg == '\t')
            arg++;
        int resume = -1; /* a Mode to resume in, or -1 */
        if (*s == '\0' || *s == '#') {
            /* blank lines and comments (for scripts) do nothing */
        } else if (!strcmp(s, "break") || !strcmp(s, "b")) {
            cmd_break(d, arg);
        } else if (!strcmp(s, "delete") || !strcmp(s, "d")) {
            cmd_delete(d, arg);
        } else if (!strcmp(s, "info") || !strcmp(s, "i")) {
            cmd_info(d, arg);
        } else if (!strcmp(s, "step") || !strcmp(s, "s")) {
            resume = MODE_STEP;
        } else if (!strcmp(s, "next") || !strcmp(s, "n")) {
            resume = MODE_NEXT;
        } else if (!strcmp(s, "finish") || !strcmp(s, "fin")) {
            resume = MODE_FINISH;
        } else if (!strcmp(s, "continue") || !strcmp(s, "c")) {
            resume = MODE_CONTINUE;
        } else if (!strcmp(s, "print") || !strcmp(s, "p")) {
            cmd_print(d, it, arg);
        } else if (!strcmp(s, "backtrace") || !strcmp(s, "bt") || !strcmp(s, "where")) {
            cmd_backtrace(d, it, arg);
        } else if (!strcmp(s, "frame") || !strcmp(s, "f")) {
            cmd_frame(d, it, arg, 0);
        } else if (!strcmp(s, "up")) {
            cmd_frame(d, it, arg, 1);
        } else if (!strcmp(s, "down")) {
            cmd_frame(d, it, arg, -1);
        } else if (!strcmp(s, "list") || !strcmp(s, "l")) {
            cmd_list(d, it, arg);
        } else if (!strcmp(s, "help") || !strcmp(s, "h")) {
            cmd_help(d);
        } else if (!strcmp(s, "quit") || !strcmp(s, "q")) {
            free(line);
            d->quit = true;
            return false;
        } else {
            cmd_error(d, "unknown command '%s' (help lists the commands)", s);
        }
        bool takes_none = resume >= 0 && *arg != '\0';
        if (takes_none) cmd_error(d, "%s takes no argument", s);
        free(line);
        if (resume < 0 || takes_none) continue;
        d->mode = (Mode)resume;
        d->mode_depth = ev_depth(it);
        if (d->mode == MODE_FINISH) {
            if (ev_n_frames(it) <= 1) {
                fprintf(d->out, "\"finish\" in the outermost frame: running to the end\n");
                d->mode = MODE_CONTINUE;
            } else {
                fputs("Run till exit from ", d->out);
                show_frame(d, it, 0, false);
            }
        }
        return true;
    }
}

/* ---- the observer -------------------------------------------------------------------------- */

static bool on_eval(EvObserver *ob, Interp *it, Expr *e) {
    EvDebugger *d = ob->state;
    if (!stop_point(e)) return true;
    uint32_t l = expr_line(d, e);
    if (l == 0 || l == d->last_line) return true;
    d->last_line = l;
    Breakpoint *hit = NULL;
    for (size_t i = 0; hit == NULL && i < d->bps.len; i++) {
        Breakpoint *b = &d->bps.data[i];
        if ((b->kind == BP_LINE && b->line == l) || (d->pending != 0 && b->id == d->pending))
            hit = b;
    }
    d->pending = 0;
    bool stop = hit != NULL || d->mode == MODE_STEP ||
                (d->mode == MODE_NEXT && ev_depth(it) <= d->mode_depth);
    if (!stop) return true;
    if (hit) {
        hit->hits++;
        fprintf(d->out, "\nBreakpoint %u, ", hit->id);
    }
    show_frame(d, it, 0, true);
    return command_loop(d, it);
}

static bool on_enter(EvObserver *ob, Interp *it, Function *fn, Expr *call, bool tail) {
    EvDebugger *d = ob->state;
    (void)it, (void)call;
    if (!tail) vec_push(&d->saved_lines, d->last_line);
    d->last_line = 0;
    for (size_t i = 0; i < d->bps.len; i++)
        if (d->bps.data[i].kind == BP_GLOBAL && d->bps.data[i].fn == fn)
            d->pending = d->bps.data[i].id;
    return true;
}

static bool on_return(EvObserver *ob, Interp *it, const Value *v) {
    EvDebugger *d = ob->state;
    if (d->saved_lines.len > 0) d->last_line = vec_pop(&d->saved_lines);
    if (d->mode != MODE_FINISH || ev_depth(it) >= d->mode_depth || ev_n_frames(it) == 0)
        return true;
    StrBuf sb = {0};
    describe_value(v, &sb);
    fprintf(d->out, "Value returned: %s\n", sb_cstr(&sb));
    sb_free(&sb);
    show_frame(d, it, 0, true);
    return command_loop(d, it);
}

/* ---- lifetime ------------------------------------------------------------------------------ */

EvDebugger *ev_debugger_new(Module *m, uint32_t file, EvReadLine read_line, void *read_state,
                            FILE *out, FILE *err) {
    EvDebugger *d = sup_calloc(1, sizeof *d);
    d->ob =
        (EvObserver){.on_eval = on_eval, .on_enter = on_enter, .on_return = on_return, .state = d};
    d->m = m;
    d->file = file;
    d->read_line = read_line;
    d->read_state = read_state;
    d->out = out;
    d->err = err;
    d->next_bp = 1;
    d->mode = MODE_STEP; /* the first stop is at the program's first line */
    const SourceFile *sf = file ? diags_file(&m->ctx->diags, file) : NULL;
    d->src = sf ? sf->text : "";
    d->src_len = sf ? sf->len : 0;
    vec_push(&d->lines, 0u);
    for (size_t i = 0; i < d->src_len; i++)
        if (d->src[i] == '\n' && i + 1 < d->src_len) vec_push(&d->lines, (uint32_t)(i + 1));
    vec_reserve(&d->code, d->lines.len + 1);
    memset(d->code.data, 0, d->lines.len + 1);
    d->code.len = d->lines.len + 1;
    Visitor v = {.pre = mark_code, .state = d};
    for (size_t i = 0; i < m->funcs.len; i++)
        if (m->funcs.data[i].func) ir_visit(&v, &m->funcs.data[i].func->base);
    if (m->is_expr && m->expr) ir_visit(&v, m->expr);
    return d;
}

void ev_debugger_free(EvDebugger *d) {
    if (d == NULL) return;
    vec_free(&d->lines);
    vec_free(&d->code);
    vec_free(&d->bps);
    vec_free(&d->saved_lines);
    free(d);
}

EvObserver *ev_debugger_observer(EvDebugger *d) { return &d->ob; }
bool ev_debugger_quit(const EvDebugger *d) { return d->quit; }
