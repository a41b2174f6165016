/* repl.c - `rly repl [FILE]`: a read-eval-print loop over one growing module (docs/tools.md).
 *
 * Input is read line by line until its brackets balance. Definitions (`def`, `type`, `extern
 * type`) are parsed into the session's module and type-checked with everything before them; a
 * definition that fails is taken out again (the module is restored to its state before it).
 * An expression becomes the body of a temporary global `@__replN` whose parameters are the
 * session variables (`let %x = EXPR;` binds one), is type-checked with the module and run by the
 * reference interpreter, and the global is removed again. One interpreter serves the session
 * (so values keep the constants and closures they point to) until `:opt` rewrites the module;
 * replaced interpreters are kept until the end for the same reason.
 *
 * Every input from stdin is parsed as its own source named "<stdin>", placed at its line of
 * the session: the text given to the parser is the version header, newlines, then the input,
 * so the input starts at parser line L + 1 for session line L; rendered diagnostics are moved
 * back by one line (fix_lines). Lines are read by repl_read.c (shared with `rly debug`). */
#include "repl.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmds.h"
#include "eval/eval.h"
#include "frontend/text/text.h"
#include "rly/rly.h"
#include "types/types.h"

/* ---- the session --------------------------------------------------------------------------- */

typedef struct SessionVar {
    const char *name; /* interned, without '%' */
    Type *type;
    Value *value; /* owned */
} SessionVar;

typedef struct Repl {
    Ctx *ctx;
    Module *m;
    Interp *it;
    PtrVec old_interps; /* replaced by :opt; freed at the end (values may point into them) */
    Vec(SessionVar) vars;
    uint32_t n_evals; /* names @__repl1, @__repl2, ... */
    bool failed;      /* some input failed (the exit status without a terminal) */
} Repl;

static const char header[] = "#[version = \"0.0.5\"]";

/* The module's state before an input, to take the input's definitions out again. */
typedef struct Snapshot {
    size_t n_funcs, n_types, n_meta;
    int32_t next_tag;
} Snapshot;

static Snapshot snapshot(const Module *m) {
    return (Snapshot){m->funcs.len, m->types.len, m->meta.len, m->next_tag};
}

/* Restore m to s: drop what came after, rebuild the name maps from what stays. The nodes stay
 * in the arena (nothing else refers to them). */
static void restore(Module *m, Snapshot s) {
    m->funcs.len = s.n_funcs;
    m->types.len = s.n_types;
    m->meta.len = s.n_meta;
    m->next_tag = s.next_tag;
    m->is_expr = false;
    m->expr = NULL;
    strmap_free(&m->global_by_name);
    strmap_free(&m->type_by_name);
    strmap_free(&m->ctor_by_name);
    for (size_t i = 0; i < m->funcs.len; i++) {
        const char *nm = m->funcs.data[i].gvar->name;
        strmap_put(&m->global_by_name, nm, strlen(nm), (void *)(uintptr_t)(i + 1));
    }
    for (size_t i = 0; i < m->types.len; i++) {
        TypeData *td = m->types.data[i];
        strmap_put(&m->type_by_name, td->header->name, strlen(td->header->name), td);
        for (uint32_t c = 0; c < td->n_ctors; c++)
            strmap_put(&m->ctor_by_name, td->ctors[c]->name, strlen(td->ctors[c]->name),
                       td->ctors[c]);
    }
}

/* Move "<stdin>:N:" locations at line starts back by one line (see the file comment). */
static void fix_lines(const char *text, StrBuf *out) {
    static const char tag[] = "<stdin>:";
    const size_t tl = sizeof tag - 1;
    const char *p = text;
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p + 1) : strlen(p);
        char *end;
        unsigned long line;
        if (n > tl && memcmp(p, tag, tl) == 0 && p[tl] >= '0' && p[tl] <= '9' &&
            (line = strtoul(p + tl, &end, 10)) > 1 && *end == ':') {
            sb_printf(out, "%s%lu", tag, line - 1);
            sb_putn(out, end, n - (size_t)(end - p));
        } else {
            sb_putn(out, p, n);
        }
        p += n;
    }
}

/* Print the context's diagnostics on stderr and forget them; the input failed. */
static void report_diags(Repl *r) {
    StrBuf raw = {0}, fixed = {0};
    diags_render(&r->ctx->diags, 0, &raw);
    diags_clear(&r->ctx->diags);
    fix_lines(sb_cstr(&raw), &fixed);
    fflush(stdout);
    fputs(sb_cstr(&fixed), stderr);
    if (fixed.len && fixed.data[fixed.len - 1] != '\n') fputc('\n', stderr);
    sb_free(&raw);
    sb_free(&fixed);
    r->failed = true;
}

static void error(Repl *r, const char *fmt, ...) RLY_PRINTF(2, 3);
static void error(Repl *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fflush(stdout);
    fputs("rly: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    r->failed = true;
}

static bool check_module(Repl *r) {
    if (ir_well_formed(r->m) && ty_infer_module(r->m)) return true;
    report_diags(r);
    return false;
}

/* Parse text (already holding the header and the line padding) into the module; on failure
 * report and restore. */
static bool parse_chunk(Repl *r, const StrBuf *text, Snapshot s) {
    Module *got = text_parse_into(r->ctx, r->m, "<stdin>", text->data, text->len, NULL, 0);
    if (got == NULL || diags_has_errors(&r->ctx->diags)) {
        report_diags(r);
        restore(r->m, s);
        return false;
    }
    return true;
}

static void pad(StrBuf *sb, uint32_t line) {
    for (uint32_t i = 0; i < line; i++)
        sb_putc(sb, '\n');
}

/* Definitions: parse, check with the module, keep or take out. */
static void define(Repl *r, const char *chunk, uint32_t line) {
    Snapshot s = snapshot(r->m);
    StrBuf text = {0};
    sb_puts(&text, header);
    pad(&text, line);
    sb_puts(&text, chunk);
    bool ok = parse_chunk(r, &text, s);
    sb_free(&text);
    if (!ok) return;
    if (r->m->is_expr) { /* cannot happen: the text starts with a definition */
        restore(r->m, s);
        error(r, "expected definitions");
        return;
    }
    if (!check_module(r)) {
        restore(r->m, s);
        return;
    }
    StrBuf what = {0};
    for (size_t i = s.n_types; i < r->m->types.len; i++)
        sb_printf(&what, "%stype %s", what.len ? ", " : "", r->m->types.data[i]->header->name);
    for (size_t i = s.n_funcs; i < r->m->funcs.len; i++)
        sb_printf(&what, "%s@%s", what.len ? ", " : "", r->m->funcs.data[i].gvar->name);
    if (what.len) printf("defined %s\n", sb_cstr(&what));
    sb_free(&what);
}

enum { EVAL_RUN, EVAL_TYPE, EVAL_TIME };

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* An expression: wrap it as @__replN(session variables) { chunk }, check, run or show its type.
 * bind: the session variable to bind to the result (the chunk is then `let %x = e; %x`). */
static void evaluate(Repl *r, const char *chunk, uint32_t line, int how, const char *bind) {
    Snapshot s = snapshot(r->m);
    char name[32];
    snprintf(name, sizeof name, "__repl%u", ++r->n_evals);
    StrBuf text = {0}, ty = {0};
    sb_printf(&text, "%s def @%s(", header, name);
    for (size_t i = 0; i < r->vars.len; i++) {
        sb_printf(&text, "%s%%%s: ", i ? ", " : "", r->vars.data[i].name);
        ir_print_type_max(r->ctx, r->vars.data[i].type, 0, &text);
    }
    sb_puts(&text, ") {");
    pad(&text, line);
    sb_puts(&text, chunk);
    sb_puts(&text, "\n}\n");
    bool ok = parse_chunk(r, &text, s);
    sb_free(&text);
    if (!ok) return;
    FuncDef *d = ir_module_lookup(r->m, name, strlen(name));
    if (d == NULL || d->func == NULL || !check_module(r)) {
        restore(r->m, s);
        return;
    }
    Type *rt = d->func->body->checked_type;
    if (how == EVAL_TYPE) {
        ir_print_type(r->ctx, rt, &ty);
        printf("%s\n", sb_cstr(&ty));
        sb_free(&ty);
        restore(r->m, s);
        return;
    }
    uint32_t n = (uint32_t)r->vars.len;
    Value **args = sup_calloc(n ? n : 1, sizeof *args);
    for (uint32_t i = 0; i < n; i++)
        args[i] = r->vars.data[i].value;
    double t0 = now_s();
    Value *v = ev_call_global(r->it, name, n, args);
    double dt = now_s() - t0;
    free(args);
    restore(r->m, s);
    if (v == NULL) {
        report_diags(r);
        return;
    }
    StrBuf out = {0};
    ev_print_value(v, 1000, &out);
    if (bind) {
        const char *nm = intern_cstr(&r->ctx->strs, bind);
        size_t k = 0;
        while (k < r->vars.len && r->vars.data[k].name != nm)
            k++;
        if (k == r->vars.len) {
            SessionVar sv = {.name = nm};
            vec_push(&r->vars, sv);
        }
        rt_release(r->vars.data[k].value);
        r->vars.data[k].value = v;
        r->vars.data[k].type = rt;
        printf("%%%s = %s\n", nm, sb_cstr(&out));
    } else {
        printf("%s\n", sb_cstr(&out));
        rt_release(v);
    }
    if (how == EVAL_TIME) printf("time: %.3f ms\n", dt * 1e3);
    sb_free(&out);
}

/* ---- commands ------------------------------------------------------------------------------ */

static void print_def(Repl *r, const char *arg) {
    if (*arg == '\0') {
        error(r, ":print needs a name: :print @f, :print List, :print %%x");
        return;
    }
    if (arg[0] == '%') {
        const char *nm = intern_cstr(&r->ctx->strs, arg + 1);
        for (size_t i = 0; i < r->vars.len; i++)
            if (r->vars.data[i].name == nm) {
                StrBuf sb = {0};
                sb_printf(&sb, "%%%s: ", nm);
                ir_print_type(r->ctx, r->vars.data[i].type, &sb);
                sb_puts(&sb, " = ");
                ev_print_value(r->vars.data[i].value, 1000, &sb);
                printf("%s\n", sb_cstr(&sb));
                sb_free(&sb);
                return;
            }
        error(r, "no session variable %s (let %s = EXPR; binds one)", arg, arg);
        return;
    }
    const char *nm = arg[0] == '@' ? arg + 1 : arg;
    FuncDef *d = ir_module_lookup(r->m, nm, strlen(nm));
    TypeData *td = d ? NULL : ir_module_lookup_type(r->m, nm, strlen(nm));
    if ((d == NULL || d->func == NULL) && td == NULL) {
        error(r, "no global @%s or type %s in the session", nm, nm);
        return;
    }
    /* A module of its own holding just that definition, printed without its header. */
    Module *one = ir_module_new(r->ctx);
    if (td)
        vec_push(&one->types, td);
    else
        ir_module_define(one, ir_module_global(one, nm, strlen(nm), d->span), d->func, d->span);
    StrBuf sb = {0};
    ir_print_module(one, NULL, &sb);
    const char *body = sb_cstr(&sb);
    if (strncmp(body, header, sizeof header - 1) == 0) body += sizeof header - 1;
    while (*body == '\n')
        body++;
    fputs(body, stdout);
    if (sb.len && sb.data[sb.len - 1] != '\n') fputc('\n', stdout);
    sb_free(&sb);
}

static void load(Repl *r, const char *path) {
    if (*path == '\0') {
        error(r, ":load needs a file");
        return;
    }
    Snapshot s = snapshot(r->m);
    if (rly_module_parse_file_into(r->m, path) != RLY_STATUS_OK) {
        restore(r->m, s);
        repl_print_error(rly_last_error());
        r->failed = true;
        return;
    }
    if (r->m->is_expr) {
        restore(r->m, s);
        error(r,
              "%s: holds an expression, not definitions (a module starts with the header "
              "#[version = \"0.0.5\"])",
              path);
        return;
    }
    if (!check_module(r)) {
        restore(r->m, s);
        return;
    }
    printf("loaded %s: %zu definitions, %zu types\n", path, r->m->funcs.len - s.n_funcs,
           r->m->types.len - s.n_types);
}

static void optimize(Repl *r, const char *arg) {
    int level = 3;
    if (*arg) {
        const char *lv = arg;
        if (strncmp(lv, "-O", 2) == 0) lv += 2;
        while (*lv == ' ')
            lv++;
        if (lv[0] < '0' || lv[0] > '3' || lv[1] != '\0') {
            error(r, ":opt takes -O N with N 0..3, not '%s'", arg);
            return;
        }
        level = lv[0] - '0';
    }
    rly_opt_options o = {.opt_level = level};
    if (rly_module_optimize(r->m, &o, NULL) != RLY_STATUS_OK) {
        repl_print_error(rly_last_error());
        r->failed = true;
        return;
    }
    /* The interpreter caches each global's closure: a fresh one sees the rewritten bodies. */
    vec_push(&r->old_interps, r->it);
    r->it = ev_new(r->m);
    printf("optimized %zu definitions at -O%d\n", r->m->funcs.len, level);
}

static void help(void) {
    fputs("Enter Relay definitions (def @f(...) { ... }, type T { ... }) or expressions; an\n"
          "input continues on the next lines until its brackets balance.\n"
          "  let %x = EXPR;    evaluate EXPR and keep it as %x for later inputs\n"
          "  :type EXPR        the type of EXPR (not run)\n"
          "  :time EXPR        run EXPR and show the time it took\n"
          "  :print NAME       the definition of @NAME or type NAME, or the value of %NAME\n"
          "  :load FILE        add FILE's definitions (a module text) to the session\n"
          "  :opt [-O N]       optimize the session's definitions (default -O3)\n"
          "  :help             this text\n"
          "  :quit             leave (so does the end of input)\n",
          stdout);
}

/* ---- input --------------------------------------------------------------------------------- */

typedef struct Scan {
    int depth;     /* open brackets */
    bool comment;  /* inside a block comment */
    char negative; /* the first bracket that closed nothing, or 0 */
} Scan;

/* Count the brackets of one line (strings and comments skipped). */
static void scan_line(Scan *sc, const char *s) {
    for (; *s; s++) {
        if (sc->comment) {
            if (s[0] == '*' && s[1] == '/') sc->comment = false, s++;
            continue;
        }
        if (s[0] == '/' && s[1] == '/') return;
        if (s[0] == '/' && s[1] == '*') {
            sc->comment = true;
            s++;
            continue;
        }
        if (*s == '"') {
            for (s++; *s && *s != '"'; s++)
                if (*s == '\\' && s[1]) s++;
            if (*s == '\0') return;
            continue;
        }
        if (*s == '(' || *s == '[' || *s == '{') sc->depth++;
        if (*s == ')' || *s == ']' || *s == '}') {
            if (sc->depth == 0 && !sc->negative) sc->negative = *s;
            if (sc->depth > 0) sc->depth--;
        }
    }
}

static bool starts_word(const char *s, const char *w) {
    size_t n = strlen(w);
    return strncmp(s, w, n) == 0 && (s[n] == '\0' || s[n] == ' ' || s[n] == '\t' || s[n] == '\n' ||
                                     s[n] == '@' || s[n] == '%');
}

/* `let %x ... ;` with nothing after the last ';': the name of %x into name, else false. */
static bool session_binding(const char *s, char *name, size_t cap) {
    if (!starts_word(s, "let")) return false;
    const char *p = s + 3;
    while (*p == ' ' || *p == '\t' || *p == '\n')
        p++;
    if (*p != '%') return false;
    p++;
    size_t n = 0;
    while (p[n] == '_' || p[n] == '.' || (p[n] >= 'a' && p[n] <= 'z') ||
           (p[n] >= 'A' && p[n] <= 'Z') || (p[n] >= '0' && p[n] <= '9'))
        n++;
    size_t len = strlen(s);
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\n'))
        len--;
    if (n == 0 || n >= cap || len == 0 || s[len - 1] != ';') return false;
    memcpy(name, p, n);
    name[n] = '\0';
    return true;
}

/* s past whitespace and comments. */
static char *skip_blank(char *s) {
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
            s++;
        if (s[0] == '/' && s[1] == '/') {
            while (*s && *s != '\n')
                s++;
        } else if (s[0] == '/' && s[1] == '*') {
            char *end = strstr(s + 2, "*/");
            s = end ? end + 2 : s + strlen(s);
        } else {
            return s;
        }
    }
}

/* One complete input (its brackets balance) that starts at session line `line`. False: quit. */
static bool handle(Repl *r, char *chunk, uint32_t line) {
    char *s = skip_blank(chunk);
    if (*s == '\0') return true;
    /* A version header (pasted module text) is blanked out, keeping every column. */
    if (strncmp(s, header, sizeof header - 1) == 0) {
        memset(s, ' ', sizeof header - 1);
        s = skip_blank(s);
        if (*s == '\0') return true;
    }
    if (*s == ':') {
        char *arg = s + 1;
        while (*arg && *arg != ' ' && *arg != '\t' && *arg != '\n')
            arg++;
        size_t cmd_len = (size_t)(arg - s);
        char cmd[16] = "";
        if (cmd_len < sizeof cmd) memcpy(cmd, s, cmd_len), cmd[cmd_len] = '\0';
        /* the argument keeps its place in the line (for locations), minus the command */
        size_t off = (size_t)(arg - chunk);
        char *rest = arg;
        while (*rest == ' ' || *rest == '\t')
            rest++;
        size_t n = strlen(rest);
        while (n > 0 && (rest[n - 1] == ' ' || rest[n - 1] == '\n' || rest[n - 1] == '\r'))
            rest[--n] = '\0';
        if (!strcmp(cmd, ":quit") || !strcmp(cmd, ":q")) return false;
        if (!strcmp(cmd, ":help") || !strcmp(cmd, ":h")) {
            help();
        } else if (!strcmp(cmd, ":type") || !strcmp(cmd, ":t") || !strcmp(cmd, ":time")) {
            if (*rest == '\0') {
                error(r, "%s needs an expression", cmd);
                return true;
            }
            memset(chunk, ' ', off); /* blank the command, keep the columns */
            evaluate(r, chunk, line, strcmp(cmd, ":time") == 0 ? EVAL_TIME : EVAL_TYPE, NULL);
        } else if (!strcmp(cmd, ":print") || !strcmp(cmd, ":p")) {
            print_def(r, rest);
        } else if (!strcmp(cmd, ":load") || !strcmp(cmd, ":l")) {
            load(r, rest);
        } else if (!strcmp(cmd, ":opt")) {
            optimize(r, rest);
        } else {
            error(r, "unknown command '%s' (:help lists them)", cmd_len < sizeof cmd ? cmd : s);
        }
        return true;
    }
    char bind[128];
    if (starts_word(s, "def") || starts_word(s, "type") || starts_word(s, "extern")) {
        define(r, chunk, line);
    } else if (session_binding(s, bind, sizeof bind)) {
        StrBuf e = {0};
        sb_puts(&e, chunk);
        while (e.len > 0 && (e.data[e.len - 1] == '\n' || e.data[e.len - 1] == ' '))
            e.len--;
        sb_printf(&e, " %%%s", bind);
        evaluate(r, sb_cstr(&e), line, EVAL_RUN, bind);
        sb_free(&e);
    } else {
        evaluate(r, chunk, line, EVAL_RUN, NULL);
    }
    return true;
}

static int repl_usage(FILE *f) {
    fputs("usage: rly repl [FILE] [--prelude]\n"
          "\n"
          "Read Relay definitions and expressions from stdin; type-check and run each\n"
          "expression in the reference interpreter and print its value. FILE's definitions\n"
          "are loaded first. --prelude makes the standard library (List, Option, map, ...)\n"
          "visible. :help inside lists the commands (:type, :time, :print, :load, :opt,\n"
          "let %x = EXPR;). Without a terminal there is no prompt, so a script can drive it.\n"
          "\n"
          "example:\n"
          "  echo 'add(1, 2)' | rly repl\n",
          f);
    return f == stdout ? 0 : 2;
}

int cmd_repl(int argc, char **argv) {
    const char *file = NULL;
    bool prelude = false;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return repl_usage(stdout);
        if (!strcmp(argv[i], "--prelude")) {
            prelude = true;
        } else if (file == NULL && argv[i][0] != '-') {
            file = argv[i];
        } else {
            fprintf(stderr, "rly: error: repl: unexpected argument '%s'\n", argv[i]);
            return repl_usage(stderr);
        }
    }
    Repl r = {0};
    rly_ctx *ctx = NULL;
    if (rly_ctx_new(&ctx) != RLY_STATUS_OK ||
        (prelude ? rly_module_prelude(ctx, &r.m) : RLY_STATUS_OK) != RLY_STATUS_OK) {
        fprintf(stderr, "rly: error: %s\n", rly_last_error());
        rly_ctx_free(ctx);
        return 1;
    }
    r.ctx = ctx;
    if (r.m == NULL) r.m = ir_module_new(ctx);
    if (prelude && !check_module(&r)) {
        rly_ctx_free(ctx);
        return 1;
    }
    r.it = ev_new(r.m);
    if (file) {
        load(&r, file);
        if (r.failed) {
            ev_free(r.it);
            rly_ctx_free(ctx);
            return 1;
        }
    }
    CliReader reader;
    cli_reader_init(&reader, stdin, ".rly_history");
    if (reader.tty) printf("rly %s REPL; :help for help, :quit to leave\n", rly_version());
    StrBuf chunk = {0};
    Scan sc = {0};
    uint32_t line = 0, start = 0;
    for (;;) {
        char *l = cli_read_line(&reader, chunk.len ? "...> " : "rly> ");
        if (l == NULL) break;
        line++;
        if (chunk.len == 0) start = line;
        sb_puts(&chunk, l);
        sb_putc(&chunk, '\n');
        scan_line(&sc, l);
        free(l);
        if (sc.negative) {
            fflush(stdout);
            fprintf(stderr, "<stdin>:%u: error: unbalanced '%c'; the input is dropped\n", line,
                    sc.negative);
            r.failed = true;
            chunk.len = 0;
            sc = (Scan){0};
            continue;
        }
        if (sc.depth > 0 || sc.comment) continue;
        bool go_on = handle(&r, (char *)sb_cstr(&chunk), start);
        fflush(stdout);
        chunk.len = 0;
        sc = (Scan){0};
        if (!go_on) break;
    }
    if (chunk.len > 0) {
        fflush(stdout);
        fprintf(stderr, "<stdin>:%u: error: the input ends inside an open bracket\n", start);
        r.failed = true;
    }
    sb_free(&chunk);
    cli_reader_close(&reader);
    for (size_t i = 0; i < r.vars.len; i++)
        rt_release(r.vars.data[i].value);
    vec_free(&r.vars);
    ev_free(r.it);
    for (size_t i = 0; i < r.old_interps.len; i++)
        ev_free(r.old_interps.data[i]);
    vec_free(&r.old_interps);
    rly_ctx_free(ctx);
    return r.failed && !reader.tty ? 1 : 0;
}
