/* test_rel.c - the operator-relation suite. Adding a test is adding a line.
 *
 *   test_rel DIR    runs every .txt file of DIR; each non-blank line not starting with '#' is
 *
 *     OP(ARG, ..., key=value, ...) -> RESULT_TYPE     the relation gives exactly this type
 *     OP(ARG, ..., key=value, ...) !! MESSAGE         the call is rejected; the message (attribute
 *                                                     or relation error) contains MESSAGE
 *
 *   ARG is a Relay type (`Tensor[(1, ?, n), float32]`, `(Tensor[(2,), int32], float32)`, ...),
 *   attributes are written as in Relay text. Every operator of the table must have at least one
 *   accepted and one rejected case, or the suite fails.
 *   test_rel --run DIR   also runs every accepted case whose argument types are static (and at
 *                        most 4 M elements) through the interpreter on random inputs: the run
 *                        must succeed or stop with a located runtime error from the operator,
 *                        never an internal error (a kernel result that disagrees with the type
 *                        the relation gave, or a result left unset). This cross-checks every
 *                        reference kernel against its relation on the whole suite.
 * Closes with `N passed, N failed`. */
#include <dirent.h>
#include <stdio.h>

#include "../check.h"
#include "frontend/text/text.h"
#include "ops/ops.h"
#include "rly/rly.h"

typedef struct OpSeen {
    unsigned ok, err;
} OpSeen;
static StrMap seen; /* op name -> OpSeen* */
static bool run_kernels;
static long n_ran, n_ran_ok;

/* Elements of a static type made of tensors and tuples; -1 when some dim is not a constant. */
static int64_t static_elems(Type *t) {
    if (t->kind == TYPE_TUPLE) {
        int64_t n = 0;
        for (uint32_t i = 0; i < AS_TUPLE_TYPE(t)->n; i++) {
            int64_t k = static_elems(AS_TUPLE_TYPE(t)->fields[i]);
            if (k < 0) return -1;
            n += k;
        }
        return n;
    }
    if (t->kind != TYPE_TENSOR) return -1;
    int64_t n = 1;
    for (uint32_t d = 0; d < AS_TENSOR_TYPE(t)->ndim; d++) {
        int64_t x = AS_TENSOR_TYPE(t)->shape[d];
        if (x < 0 || (x > 0 && n > ((int64_t)1 << 40) / x)) return -1;
        n *= x;
    }
    return n;
}

/* Run `def @main<fn_text after "fn ">` on random inputs (see --run). */
static void run_case_program(const char *file, int lineno, const char *opname,
                             const char *fn_text) {
    StrBuf text = {0};
    sb_printf(&text, "#[version = \"0.0.5\"]\ndef @main%s\n", fn_text + 3);
    rly_ctx *ctx;
    rly_ctx_new(&ctx);
    rly_module *m = NULL;
    char *out = NULL;
    rly_run_options o = {.fill = RLY_FILL_RANDOM, .seed = (unsigned)lineno};
    n_ran++;
    if (rly_module_parse(ctx, text.data, text.len, file, &m) != RLY_STATUS_OK ||
        rly_module_run(m, &o, &out) != RLY_STATUS_OK) {
        const char *e = rly_last_error();
        char want[160];
        snprintf(want, sizeof want, "%s:", file);
        char want_op[160];
        snprintf(want_op, sizeof want_op, "error: %s: ", opname);
        CHECK(strstr(e, "internal error") == NULL && strncmp(e, want, strlen(want)) == 0 &&
                  strstr(e, want_op) != NULL,
              "%s:%d: %s: running the case failed badly:\n%s", file, lineno, opname, e);
        if (getenv("RLY_TEST_REL_VERBOSE")) fprintf(stderr, "%s:%d: %s\n", file, lineno, e);
    } else {
        n_ran_ok++;
    }
    free(out);
    rly_ctx_free(ctx);
    sb_free(&text);
}

static OpSeen *seen_of(const char *name) {
    OpSeen *s = strmap_get(&seen, name, strlen(name));
    if (s == NULL) {
        s = calloc(1, sizeof *s);
        strmap_put(&seen, name, strlen(name), s);
    }
    return s;
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}

/* Split "a, b(c, d), [e, f]" at top-level commas (in place). */
static int split_args(char *s, char **out, int max) {
    int n = 0, depth = 0;
    bool quote = false;
    char *start = s;
    if (*trim(s) == '\0') return 0;
    for (char *p = s;; p++) {
        if (*p == '"') quote = !quote;
        if (quote && *p) continue;
        if (*p == '(' || *p == '[' || *p == '{') depth++;
        if (*p == ')' || *p == ']' || *p == '}') depth--;
        if ((*p == ',' && depth == 0) || *p == '\0') {
            bool end = *p == '\0';
            *p = '\0';
            if (n < max) out[n++] = trim(start);
            if (end) break;
            start = p + 1;
        }
    }
    return n;
}

static bool is_attr(const char *a) {
    const char *p = a;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
           *p == '_')
        p++;
    return p != a && *p == '=';
}

static Type *parse_type_text(Ctx *ctx, const char *t) {
    StrBuf sb = {0};
    sb_printf(&sb, "fn (%%r: %s) { %%r }", t);
    Module *m = text_parse(ctx, "expected", sb_cstr(&sb), sb.len, NULL, 0);
    sb_free(&sb);
    if (m == NULL) return NULL;
    return AS_FUNCTION(m->expr)->params[0]->ann;
}

static void run_case(const char *file, int lineno, char *line) {
    char *sep = strstr(line, " -> ");
    bool want_err = false;
    char *err_sep = strstr(line, " !! ");
    if (err_sep && (!sep || err_sep < sep)) {
        sep = err_sep;
        want_err = true;
    }
    if (sep == NULL) {
        CHECK(false, "%s:%d: no ' -> ' or ' !! ' in the line", file, lineno);
        return;
    }
    *sep = '\0';
    char *want = trim(sep + 4);
    char *lhs = trim(line);
    char *open = strchr(lhs, '(');
    size_t n = strlen(lhs);
    if (open == NULL || lhs[n - 1] != ')') {
        CHECK(false, "%s:%d: expected OP(ARGS)", file, lineno);
        return;
    }
    *open = '\0';
    lhs[n - 1] = '\0';
    const char *opname = trim(lhs);
    char *args[64];
    int na = split_args(open + 1, args, 64);
    StrBuf prog = {0}, call = {0};
    sb_puts(&prog, "fn (");
    sb_printf(&call, "%s(", opname);
    int n_params = 0, n_items = 0;
    for (int i = 0; i < na; i++) {
        if (is_attr(args[i])) {
            sb_printf(&call, "%s%s", n_items++ ? ", " : "", args[i]);
        } else {
            sb_printf(&prog, "%s%%a%d: %s", n_params ? ", " : "", n_params, args[i]);
            sb_printf(&call, "%s%%a%d", n_items++ ? ", " : "", n_params);
            n_params++;
        }
    }
    sb_printf(&prog, ") { %s) }", sb_cstr(&call));
    Ctx *ctx = ir_ctx_new();
    Module *m = text_parse(ctx, file, sb_cstr(&prog), prog.len, NULL, 0);
    StrBuf msg = {0};
    const OpDef *op = op_lookup(opname, strlen(opname));
    if (m == NULL) {
        StrBuf d = {0};
        diags_render(&ctx->diags, 0, &d);
        CHECK(false, "%s:%d: case does not parse:\n%s", file, lineno, sb_cstr(&d));
        sb_free(&d);
        goto done;
    }
    if (op == NULL) {
        CHECK(false, "%s:%d: unknown operator %s", file, lineno, opname);
        goto done;
    }
    OpSeen *s = seen_of(op->name);
    Function *f = AS_FUNCTION(m->expr);
    Call *c = AS_CALL(f->body);
    Type *targs[64];
    for (uint32_t i = 0; i < f->n_params; i++)
        targs[i] = f->params[i]->ann;
    const AttrValue *vals[64];
    Span where;
    Type *out = NULL;
    bool ok = false;
    if (op->n_args != OP_VARIADIC && (int)f->n_params != op->n_args) {
        sb_printf(&msg, "expects %d arguments (%s), got %u", op->n_args, op->arg_names,
                  f->n_params);
    } else if (op_bind_attrs(op, c->attrs, vals, &msg, &where)) {
        int err_arg;
        RelResult r = op_relate(ctx, op, vals, f->n_params, targs, &out, &msg, &err_arg);
        if (r == REL_DEFER) sb_puts(&msg, "(relation deferred on known arguments)");
        ok = r == REL_OK;
    }
    if (want_err) {
        if (ok) {
            StrBuf t = {0};
            ir_print_type(ctx, out, &t);
            CHECK(false, "%s:%d: %s: expected an error containing \"%s\", got type %s", file,
                  lineno, opname, want, sb_cstr(&t));
            sb_free(&t);
        } else {
            bool has = strstr(sb_cstr(&msg), want) != NULL;
            CHECK(has, "%s:%d: %s: error \"%s\" does not contain \"%s\"", file, lineno, opname,
                  sb_cstr(&msg), want);
            if (has) s->err++;
        }
    } else {
        Type *t = parse_type_text(ctx, want);
        if (t == NULL) {
            CHECK(false, "%s:%d: expected type does not parse: %s", file, lineno, want);
        } else if (!ok) {
            CHECK(false, "%s:%d: %s: expected %s, got error: %s", file, lineno, opname, want,
                  sb_cstr(&msg));
        } else {
            StrBuf g = {0};
            ir_print_type(ctx, out, &g);
            CHECK(out == t, "%s:%d: %s: expected %s, got %s", file, lineno, opname, want,
                  sb_cstr(&g));
            if (out == t) s->ok++;
            sb_free(&g);
            if (out == t && run_kernels) {
                int64_t total = 0;
                for (uint32_t i = 0; i < f->n_params && total >= 0; i++) {
                    int64_t k = static_elems(f->params[i]->ann);
                    total = k < 0 ? -1 : total + k;
                }
                int64_t k = static_elems(out);
                if (total >= 0 && k >= 0 && total + k <= ((int64_t)4 << 20))
                    run_case_program(file, lineno, opname, sb_cstr(&prog));
            }
        }
    }
done:
    sb_free(&msg);
    sb_free(&prog);
    sb_free(&call);
    ir_ctx_free(ctx);
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--run") == 0) {
        run_kernels = true;
        argv++;
        argc--;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: test_rel [--run] DIR\n");
        return 2;
    }
    DIR *d = opendir(argv[1]);
    if (d == NULL) {
        fprintf(stderr, "test_rel: cannot open %s\n", argv[1]);
        return 2;
    }
    PtrVec names = {0};
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        size_t n = strlen(ent->d_name);
        if (n > 4 && strcmp(ent->d_name + n - 4, ".txt") == 0)
            vec_push(&names, strdup(ent->d_name));
    }
    closedir(d);
    qsort(names.data, names.len, sizeof(char *), cmp_names);
    for (size_t i = 0; i < names.len; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[1], (char *)names.data[i]);
        FILE *f = fopen(path, "r");
        if (f == NULL) continue;
        char line[8192];
        int lineno = 0;
        while (fgets(line, sizeof line, f)) {
            lineno++;
            char *l = trim(line);
            if (*l == '\0' || *l == '#') continue;
            run_case(names.data[i], lineno, l);
        }
        fclose(f);
        free(names.data[i]);
    }
    vec_free(&names);
    /* coverage: every operator has an accepted and a rejected case */
    for (size_t i = 0; i < op_count(); i++) {
        const OpDef *op = op_at(i);
        OpSeen *s = strmap_get(&seen, op->name, strlen(op->name));
        CHECK(s && s->ok > 0, "operator %s has no accepted case", op->name);
        CHECK(s && s->err > 0, "operator %s has no rejected case", op->name);
    }
    if (run_kernels)
        printf("ran %ld accepted cases through the interpreter: %ld succeeded, %ld stopped with "
               "a located runtime error\n",
               n_ran, n_ran_ok, n_ran - n_ran_ok);
    return check_summary();
}
