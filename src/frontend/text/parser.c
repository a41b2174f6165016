/* parser.c - recursive-descent parser for the Relay text format (reference/relay-language.md 2.2)
 * that builds rly IR directly.
 *
 * How it works:
 * - Tokens come from lexer.c one at a time with one token of lookahead; nothing is stored for the
 *   whole file. A module is pre-scanned once (a second lexer pass) to declare every ADT and
 *   constructor, so definitions may refer to types and constructors defined later.
 * - Sequences never recurse in C: let chains, graph bindings and `e1; e2` are collected in a loop
 *   and the Let nodes are built backwards after the body; binary operators use a fixed operator
 *   stack; curried calls and projections are a postfix loop. Truly nested syntax (parentheses,
 *   blocks, functions, types, patterns, attribute values) recurses, and every recursive entry point
 *   counts depth against TEXT_MAX_NESTING.
 * - Lists under construction live on per-kind scratch stacks (PtrVec) with a base index: a nested
 *   parse pops back to where it started, so the items of one list stay contiguous.
 * - Names resolve through one hash map from the name (with its sigil: "%x", "%0"; type variables
 *   bare) to the top of a stack of bindings; closing a scope pops the bindings made since it
 *   opened. Lookups are O(1) whatever the nesting.
 * - Errors: the first one is reported with diag_error and the parse unwinds with longjmp (as Lua's
 *   luaX_syntaxerror does). Everything the parser owns hangs off the heap-allocated Parser, so the
 *   single cleanup path frees it; out of memory takes the same path and is then re-raised. */
#include <ctype.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "frontend/text/lexer.h"
#include "frontend/text/text.h"

/* One entry of the binding stack: `slot` was bound to `val`, shadowing binding `prev` (0 = none,
 * else index + 1). */
typedef struct NameSlot {
    uint32_t top; /* index + 1 of the innermost binding of this name; 0 = unbound */
} NameSlot;

typedef struct Binding {
    NameSlot *slot;
    void *val; /* Expr* for "%..." names, TypeVar* for type variables */
    uint32_t prev;
} Binding;

/* A binding of a sequence whose Let is built once the body is known. var == NULL is `e1; e2`. */
typedef struct Pending {
    Var *var;
    Expr *value;
    uint32_t lo; /* where the binding starts in the source */
} Pending;

typedef struct AttrItem {
    const char *key; /* interned */
    AttrValue *value;
    uint32_t lo, hi; /* the key in the source */
} AttrItem;

typedef struct Literal {
    bool is_float;
    rly_dtype dtype;
    int64_t i;
    double f;
} Literal;

typedef struct Parser {
    Ctx *ctx;
    Module *m;
    uint32_t file;
    const char *src;
    uint32_t len;
    Constant *const *meta;
    uint32_t n_meta;
    bool is_expr; /* bare expression: free_var allowed */

    Lexer lx;
    Token tok; /* current token */
    Token la;  /* lookahead, valid when has_la */
    bool has_la;
    uint32_t last_hi; /* end of the last consumed token: the end of every node being finished */
    int depth;        /* syntactic nesting, <= TEXT_MAX_NESTING */

    StrMap names;       /* name with sigil -> NameSlot* */
    Arena slots;        /* the NameSlots */
    Vec(Binding) binds; /* innermost last */
    size_t scope_base;  /* binds.len when the innermost scope opened */

    /* scratch stacks (see the header comment) */
    PtrVec exprs, types, tvars, params, pats, avals, tmp;
    Vec(AttrItem) attrs;
    Vec(Clause) clauses;
    Vec(Pending) pending;
    Vec(int64_t) dims;
    PtrMap defined; /* TypeData* and Constructor* whose definition the main pass has seen */
    StrBuf num;     /* a float literal's text, NUL-terminated for strtod */

    jmp_buf fail;   /* a parse error was reported */
    OomHandler oom; /* out of memory inside the parse */
} Parser;

/* The items of scratch stack v from index base on (NULL when there are none: never NULL + 0). */
#define STACK_FROM(v, base) ((v).len > (base) ? (v).data + (base) : NULL)

/* ======================================================================================
 * Errors and tokens
 * ====================================================================================== */

static Span span_of(const Parser *p, uint32_t lo, uint32_t hi) { return (Span){p->file, lo, hi}; }
static Span tok_span(const Parser *p, Token t) { return span_of(p, t.lo, t.hi); }
static const char *tok_text(const Parser *p, Token t) { return p->src + t.lo; }
static uint32_t tok_len(Token t) { return t.hi - t.lo; }
static bool tok_is(const Parser *p, Token t, const char *s) {
    size_t n = strlen(s);
    return tok_len(t) == n && memcmp(tok_text(p, t), s, n) == 0;
}

RLY_NORETURN static void bail(Parser *p) { longjmp(p->fail, 1); }

RLY_NORETURN RLY_PRINTF(3, 4) static void fail_at(Parser *p, Span sp, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_add(&p->ctx->diags, DIAG_ERROR, sp, fmt, ap);
    va_end(ap);
    bail(p);
}

/* A quoted, truncated, printable rendering of a token for messages ("'let'", "end of input"). */
static const char *describe(const Parser *p, Token t, char *buf, size_t cap) {
    if (t.kind == TK_EOF) return "end of input";
    size_t n = tok_len(t), k = 0, max = cap - 6;
    buf[k++] = '\'';
    for (size_t i = 0; i < n && i < max; i++) {
        unsigned char c = (unsigned char)p->src[t.lo + i];
        buf[k++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (n > max) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k++] = '\'';
    buf[k] = '\0';
    return buf;
}

RLY_NORETURN static void fail_expected(Parser *p, const char *what) {
    char buf[48];
    fail_at(p, tok_span(p, p->tok), "expected %s but found %s", what,
            describe(p, p->tok, buf, sizeof buf));
}

RLY_NORETURN static void fail_lex(Parser *p, Token t) {
    Span sp = tok_span(p, t);
    switch ((LexError)t.aux) {
    case LEX_ERR_STRING: fail_at(p, sp, "unterminated string literal");
    case LEX_ERR_COMMENT: fail_at(p, sp, "unterminated block comment");
    case LEX_ERR_SIGIL: fail_at(p, sp, "expected a name after '%c'", p->src[t.lo]);
    case LEX_ERR_CHAR:
    default: {
        unsigned char c = (unsigned char)p->src[t.lo];
        if (c > 0x20 && c < 0x7f) fail_at(p, sp, "invalid character '%c'", c);
        fail_at(p, sp, "invalid byte 0x%02x", c);
    }
    }
}

static void advance(Parser *p) {
    p->last_hi = p->tok.hi;
    if (p->has_la) {
        p->tok = p->la;
        p->has_la = false;
    } else {
        p->tok = text_lex_next(&p->lx);
    }
    if (p->tok.kind == TK_ERROR) fail_lex(p, p->tok);
}

/* The token after the current one (lexed, not reported, when it is malformed). */
static Token peek2(Parser *p) {
    if (!p->has_la) {
        p->la = text_lex_next(&p->lx);
        p->has_la = true;
    }
    return p->la;
}

static void expect(Parser *p, TokKind k) {
    if (p->tok.kind != k) fail_expected(p, text_lex_kind_name(k));
    advance(p);
}

static void enter(Parser *p) {
    if (++p->depth > TEXT_MAX_NESTING)
        fail_at(p, tok_span(p, p->tok), "nesting too deep: more than %d levels", TEXT_MAX_NESTING);
}
static void leave(Parser *p) { p->depth--; }

/* After an item of a comma-separated list: consume ',' or stop before `close`. */
static bool list_next(Parser *p, TokKind close) {
    if (p->tok.kind == TK_COMMA) {
        advance(p);
        return true;
    }
    if (p->tok.kind != close) {
        char what[32];
        snprintf(what, sizeof what, "',' or %s", text_lex_kind_name(close));
        fail_expected(p, what);
    }
    return false;
}

/* ======================================================================================
 * Scopes
 * ====================================================================================== */

static size_t scope_open(Parser *p) {
    size_t saved = p->scope_base;
    p->scope_base = p->binds.len;
    return saved;
}

static void scope_close(Parser *p, size_t saved) {
    while (p->binds.len > p->scope_base) {
        Binding b = vec_pop(&p->binds);
        b.slot->top = b.prev;
    }
    p->scope_base = saved;
}

static NameSlot *slot_of(Parser *p, const char *s, size_t n) {
    NameSlot *slot = strmap_get(&p->names, s, n);
    if (slot == NULL) {
        slot = arena_alloc(&p->slots, sizeof(NameSlot));
        strmap_put(&p->names, s, n, slot);
    }
    return slot;
}

static void bind_slot(Parser *p, NameSlot *slot, void *val) {
    Binding b = {slot, val, slot->top};
    vec_push(&p->binds, b);
    slot->top = (uint32_t)p->binds.len;
}

static void bind(Parser *p, Token name, void *val) {
    bind_slot(p, slot_of(p, tok_text(p, name), tok_len(name)), val);
}

static void *lookup(Parser *p, Token name) {
    NameSlot *slot = strmap_get(&p->names, tok_text(p, name), tok_len(name));
    return slot && slot->top ? p->binds.data[slot->top - 1].val : NULL;
}

/* ======================================================================================
 * Literals
 * ====================================================================================== */

static bool parse_suffix(const char *s, size_t n, rly_dtype *dt) {
    static const struct {
        const char *text;
        rly_dtype dt;
    } sfx[] = {
        {"i", RLY_DTYPE_I32},   {"i8", RLY_DTYPE_I8},     {"i16", RLY_DTYPE_I16},
        {"i32", RLY_DTYPE_I32}, {"i64", RLY_DTYPE_I64},   {"u8", RLY_DTYPE_U8},
        {"u16", RLY_DTYPE_U16}, {"u32", RLY_DTYPE_U32},   {"u64", RLY_DTYPE_U64},
        {"f", RLY_DTYPE_F32},   {"f16", RLY_DTYPE_F16},   {"f32", RLY_DTYPE_F32},
        {"f64", RLY_DTYPE_F64}, {"bf16", RLY_DTYPE_BF16},
    };
    for (size_t i = 0; i < RLY_ARRAY_LEN(sfx); i++)
        if (strlen(sfx[i].text) == n && memcmp(sfx[i].text, s, n) == 0) {
            *dt = sfx[i].dt;
            return true;
        }
    return false;
}

/* Magnitude of a run of decimal digits; false on overflow of uint64. */
static bool parse_u64(const char *s, size_t n, uint64_t *out) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

static bool all_digits(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return false;
    return n > 0;
}

static bool float_fits(rly_dtype dt, double v) {
    if (isnan(v)) return true;
    switch (dt) {
    case RLY_DTYPE_F16: return fabs(v) <= 65504.0;
    case RLY_DTYPE_F32: return !isinf((float)v);
    case RLY_DTYPE_BF16:
        return !isinf((float)v) && !isinf(sup_bf16_to_f32(sup_f32_to_bf16((float)v)));
    default: return !isinf(v);
    }
}

/* Decode a TK_NUMBER (reference 2.1): leading '-' fold into the sign, then digits with an
 * optional suffix, or inf/nan with a float suffix. Every unrepresentable value is an error. */
static Literal parse_number(Parser *p, Token t) {
    const char *s = tok_text(p, t);
    size_t n = tok_len(t), n_neg = 0;
    char buf[48];
    while (n_neg < n && s[n_neg] == '-')
        n_neg++;
    bool negative = n_neg % 2 == 1;
    const char *body = s + n_neg;
    size_t n_body = n - n_neg, k = 0;
    Literal lit = {0};

    if (body[0] == 'i' || body[0] == 'n') { /* inf / nan with a float suffix (lexer-checked) */
        rly_dtype dt;
        if (!parse_suffix(body + 3, n_body - 3, &dt) || !sup_dtype_is_float(dt))
            fail_at(p, tok_span(p, t), "invalid number literal %s",
                    describe(p, t, buf, sizeof buf));
        double v = body[0] == 'i' ? INFINITY : NAN;
        lit.is_float = true;
        lit.dtype = dt;
        lit.f = negative ? -v : v;
        return lit;
    }
    while (k < n_body && (strchr("0123456789.eE+-", body[k]) != NULL))
        k++;
    const char *sfx = body + k;
    size_t n_sfx = n_body - k;
    rly_dtype dt = RLY_DTYPE_I32;
    bool has_sfx = n_sfx > 0;
    if (has_sfx && !parse_suffix(sfx, n_sfx, &dt))
        fail_at(p, tok_span(p, t), "invalid suffix '%.*s' on number literal %s", (int)n_sfx, sfx,
                describe(p, t, buf, sizeof buf));
    bool int_syntax = all_digits(body, k);
    bool want_float = has_sfx ? sup_dtype_is_float(dt) : !int_syntax;

    if (!want_float) {
        uint64_t mag = 0;
        if (!int_syntax)
            fail_at(p, tok_span(p, t), "invalid integer literal %s",
                    describe(p, t, buf, sizeof buf));
        bool ok = parse_u64(body, k, &mag);
        if (!has_sfx) { /* int32, or int64 when it does not fit */
            bool fits32 = ok && (negative ? mag <= (uint64_t)INT32_MAX + 1 : mag <= INT32_MAX);
            dt = fits32 ? RLY_DTYPE_I32 : RLY_DTYPE_I64;
        }
        if (ok) {
            int bits = sup_dtype_bits(dt);
            if (sup_dtype_is_uint(dt)) {
                ok = (!negative || mag == 0) && (bits == 64 || mag < (UINT64_C(1) << bits));
            } else {
                uint64_t lim = UINT64_C(1) << (bits - 1); /* |min| */
                ok = negative ? mag <= lim : mag < lim;
            }
        }
        if (!ok)
            fail_at(p, tok_span(p, t), "integer literal %s is out of range for %s",
                    describe(p, t, buf, sizeof buf), sup_dtype_name(dt));
        lit.dtype = dt;
        if (negative)
            lit.i = mag == UINT64_C(1) << 63 ? INT64_MIN : -(int64_t)mag;
        else
            lit.i = (int64_t)mag; /* uint64 above INT64_MAX keeps its bit pattern */
        return lit;
    }

    if (!has_sfx) dt = RLY_DTYPE_F32;
    if (k > 4096) fail_at(p, tok_span(p, t), "number literal is too long");
    p->num.len = 0;
    sb_putn(&p->num, body, k);
    const char *text = sb_cstr(&p->num);
    char *end = NULL;
    double v = k > 0 ? strtod(text, &end) : 0.0;
    if (k == 0 || end != text + k || !(body[0] >= '0' && body[0] <= '9'))
        fail_at(p, tok_span(p, t), "invalid number literal %s", describe(p, t, buf, sizeof buf));
    if (!float_fits(dt, v))
        fail_at(p, tok_span(p, t), "float literal %s is out of range for %s",
                describe(p, t, buf, sizeof buf), sup_dtype_name(dt));
    lit.is_float = true;
    lit.dtype = dt;
    lit.f = negative ? -v : v;
    return lit;
}

static Expr *literal_expr(Parser *p, Token t) {
    Literal lit = parse_number(p, t);
    Span sp = tok_span(p, t);
    return lit.is_float ? ir_scalar_f64(p->ctx, lit.dtype, lit.f, sp)
                        : ir_scalar_i64(p->ctx, lit.dtype, lit.i, sp);
}

/* A plain non-negative integer token (tuple index, meta index); false when it does not fit. */
static bool plain_index(Parser *p, Token t, uint64_t *out) {
    if (t.kind != TK_NUMBER || !all_digits(tok_text(p, t), tok_len(t))) {
        fail_expected(p, "a non-negative integer");
    }
    return parse_u64(tok_text(p, t), tok_len(t), out);
}

/* ======================================================================================
 * Meta references: meta[relay.Constant][i], meta[tir.SizeVar][i]
 * ====================================================================================== */

typedef enum MetaKey { META_CONSTANT, META_SIZE_VAR } MetaKey;

/* Parses `meta[key][i]` from the `meta` token; *lo is where it starts. Returns the index (or
 * UINT64_MAX when it overflows). */
static uint64_t parse_meta_ref(Parser *p, MetaKey *key, uint32_t *lo) {
    char buf[48];
    *lo = p->tok.lo;
    advance(p); /* meta */
    expect(p, TK_LBRACKET);
    Token k = p->tok;
    if (k.kind != TK_IDENT) fail_expected(p, "a metadata type key like relay.Constant");
    if (tok_is(p, k, "relay.Constant"))
        *key = META_CONSTANT;
    else if (tok_is(p, k, "tir.SizeVar"))
        *key = META_SIZE_VAR;
    else
        fail_at(p, tok_span(p, k),
                "unsupported metadata reference meta[%s]; only "
                "meta[relay.Constant] and meta[tir.SizeVar] are supported",
                describe(p, k, buf, sizeof buf));
    advance(p);
    expect(p, TK_RBRACKET);
    expect(p, TK_LBRACKET);
    uint64_t idx;
    if (!plain_index(p, p->tok, &idx)) idx = UINT64_MAX;
    advance(p);
    expect(p, TK_RBRACKET);
    return idx;
}

static Expr *meta_constant(Parser *p, uint64_t idx, uint32_t lo) {
    Span sp = span_of(p, lo, p->last_hi);
    if (p->n_meta == 0)
        fail_at(p, sp,
                "meta[relay.Constant][%" PRIu64 "] is out of range: no metadata table "
                "was given (0 constants)",
                idx);
    if (idx >= p->n_meta)
        fail_at(p, sp,
                "meta[relay.Constant][%" PRIu64 "] is out of range: the metadata table "
                "has %u constants",
                idx, p->n_meta);
    return &p->meta[idx]->base;
}

/* ======================================================================================
 * Types
 * ====================================================================================== */

static Type *parse_type(Parser *p);

/* `[A, B]`: fresh type variables, pushed on p->tvars and bound in the current scope. */
static void parse_type_params(Parser *p) {
    advance(p); /* [ */
    while (p->tok.kind != TK_RBRACKET) {
        Token t = p->tok;
        if (t.kind != TK_IDENT || memchr(tok_text(p, t), '.', tok_len(t)))
            fail_expected(p, "a type parameter name");
        const char *name = ir_intern(p->ctx, tok_text(p, t), tok_len(t));
        TypeVar *tv = ir_type_var_new(p->ctx, name, KIND_TYPE);
        vec_push(&p->tvars, tv);
        bind(p, t, tv);
        advance(p);
        if (!list_next(p, TK_RBRACKET)) break;
    }
    advance(p); /* ] */
}

static int64_t parse_dim(Parser *p) {
    Token t = p->tok;
    char buf[48];
    if (t.kind == TK_QUESTION) {
        advance(p);
        return DIM_ANY;
    }
    if (t.kind == TK_NUMBER) {
        Literal lit = parse_number(p, t);
        if (lit.is_float || lit.i < 0)
            fail_at(p, tok_span(p, t),
                    "invalid tensor dimension %s: expected a non-negative "
                    "integer, '?' or a name",
                    describe(p, t, buf, sizeof buf));
        if (lit.i > SUP_DIM_MAX) /* the shape limit (support.h, "shapes") */
            fail_at(p, tok_span(p, t), "tensor dimension %s is too large: dims are at most 2^62",
                    describe(p, t, buf, sizeof buf));
        advance(p);
        return lit.i;
    }
    if (t.kind == TK_IDENT) {
        if (tok_is(p, t, "meta") && peek2(p).kind == TK_LBRACKET) {
            MetaKey key;
            uint32_t lo;
            uint64_t idx = parse_meta_ref(p, &key, &lo);
            if (key != META_SIZE_VAR)
                fail_at(p, span_of(p, lo, p->last_hi),
                        "a tensor dimension must be meta[tir.SizeVar][i], not a constant");
            char name[32];
            int n = snprintf(name, sizeof name, "sv_%" PRIu64, idx);
            return ir_dim_sym(p->ctx, name, (size_t)n);
        }
        advance(p);
        return ir_dim_sym(p->ctx, tok_text(p, t), tok_len(t));
    }
    fail_expected(p, "a tensor dimension (integer, '?' or name)");
}

/* A dtype with lanes, "float32x4": TVM's vector dtypes. */
static bool vector_dtype(const char *s, size_t n) {
    size_t x = n;
    while (x > 0 && s[x - 1] >= '0' && s[x - 1] <= '9')
        x--;
    return x > 1 && x < n && s[x - 1] == 'x' && sup_dtype_parse(s, x - 1) >= 0;
}

/* Tensor[(d, ...), dtype], after the `Tensor` token. */
static Type *parse_tensor_type(Parser *p) {
    advance(p); /* Tensor */
    expect(p, TK_LBRACKET);
    size_t base = p->dims.len;
    if (p->tok.kind != TK_LPAREN) fail_expected(p, "'(' to start the tensor shape");
    uint32_t lo = p->tok.lo;
    advance(p);
    while (p->tok.kind != TK_RPAREN) {
        int64_t d = parse_dim(p);
        vec_push(&p->dims, d);
        if (!list_next(p, TK_RPAREN)) break;
    }
    advance(p); /* ) */
    char why[128];
    if (sup_shape_check((uint32_t)(p->dims.len - base), STACK_FROM(p->dims, base), true, why,
                        sizeof why) != NULL)
        fail_at(p, span_of(p, lo, p->last_hi), "tensor shape: %s", why);
    expect(p, TK_COMMA);
    Token dt = p->tok;
    int code = dt.kind == TK_IDENT ? sup_dtype_parse(tok_text(p, dt), tok_len(dt)) : -1;
    if (code < 0 && dt.kind == TK_IDENT && vector_dtype(tok_text(p, dt), tok_len(dt)))
        fail_at(p, tok_span(p, dt), "vector dtypes such as %.*s are not supported (one lane only)",
                (int)tok_len(dt), tok_text(p, dt));
    if (code < 0) fail_expected(p, "a dtype like float32");
    advance(p);
    expect(p, TK_RBRACKET);
    uint32_t ndim = (uint32_t)(p->dims.len - base);
    Type *ty = ir_type_tensor(p->ctx, (rly_dtype)code, ndim, STACK_FROM(p->dims, base));
    p->dims.len = base;
    return ty;
}

/* fn [A](T, ...) -> T, after the `fn` token. */
static Type *parse_func_type(Parser *p) {
    size_t saved = scope_open(p);
    size_t tbase = p->tvars.len, base = p->types.len;
    if (p->tok.kind == TK_LBRACKET) parse_type_params(p);
    expect(p, TK_LPAREN);
    while (p->tok.kind != TK_RPAREN) {
        Type *t = parse_type(p);
        vec_push(&p->types, t);
        if (!list_next(p, TK_RPAREN)) break;
    }
    advance(p); /* ) */
    expect(p, TK_ARROW);
    Type *ret = parse_type(p);
    Type *ty = ir_type_func(
        p->ctx, (uint32_t)(p->types.len - base), (Type **)STACK_FROM(p->types, base), ret,
        (uint32_t)(p->tvars.len - tbase), (TypeVar **)STACK_FROM(p->tvars, tbase), 0, NULL);
    p->types.len = base;
    p->tvars.len = tbase;
    scope_close(p, saved);
    return ty;
}

/* A named type: builtin dtype, Tensor[...], `_`, type variable, or ADT (with `[args]`). */
static Type *parse_named_type(Parser *p) {
    Token t = p->tok;
    char buf[48];
    const char *s = tok_text(p, t);
    size_t n = tok_len(t);
    if (tok_is(p, t, "_")) {
        advance(p);
        return ir_type_incomplete_new(p->ctx, KIND_TYPE);
    }
    if (tok_is(p, t, "Tensor") && peek2(p).kind == TK_LBRACKET) return parse_tensor_type(p);
    int code = sup_dtype_parse(s, n);
    if (code >= 0) {
        advance(p);
        return ir_type_scalar(p->ctx, (rly_dtype)code);
    }
    Type *head = lookup(p, t);
    if (head == NULL) {
        TypeData *td = ir_module_lookup_type(p->m, s, n);
        if (td == NULL)
            fail_at(p, tok_span(p, t), "unknown type %s", describe(p, t, buf, sizeof buf));
        head = &td->header->base;
    }
    advance(p);
    if (p->tok.kind != TK_LBRACKET) return head;
    advance(p);
    size_t base = p->types.len;
    while (p->tok.kind != TK_RBRACKET) {
        Type *a = parse_type(p);
        vec_push(&p->types, a);
        if (!list_next(p, TK_RBRACKET)) break;
    }
    advance(p); /* ] */
    Type *ty = ir_type_call(p->ctx, head, (uint32_t)(p->types.len - base),
                            (Type **)STACK_FROM(p->types, base));
    p->types.len = base;
    return ty;
}

static Type *parse_type(Parser *p) {
    enter(p);
    Type *ty;
    switch (p->tok.kind) {
    case TK_LPAREN: { /* () unit, (T) parenthesised, (T,) and (T1, T2) tuples */
        advance(p);
        size_t base = p->types.len;
        if (p->tok.kind != TK_RPAREN) {
            Type *first = parse_type(p);
            if (p->tok.kind == TK_RPAREN) {
                advance(p);
                ty = first;
                break;
            }
            vec_push(&p->types, first);
            while (list_next(p, TK_RPAREN) && p->tok.kind != TK_RPAREN) {
                Type *f = parse_type(p);
                vec_push(&p->types, f);
            }
        }
        advance(p); /* ) */
        ty = ir_type_tuple(p->ctx, (uint32_t)(p->types.len - base),
                           (Type **)STACK_FROM(p->types, base));
        p->types.len = base;
        break;
    }
    case TK_FN:
        advance(p);
        ty = parse_func_type(p);
        break;
    case TK_REF:
        advance(p);
        expect(p, TK_LPAREN);
        ty = parse_type(p);
        expect(p, TK_RPAREN);
        ty = ir_type_ref(p->ctx, ty);
        break;
    case TK_IDENT: ty = parse_named_type(p); break;
    default: fail_expected(p, "a type");
    }
    leave(p);
    return ty;
}

/* ======================================================================================
 * Attributes
 * ====================================================================================== */

static Expr *parse_expr(Parser *p);
static AttrValue *parse_attr_value(Parser *p);

/* `key=value` (key possibly dotted), pushed on p->attrs. The current token is the key and the
 * next one is '='. */
static void parse_attr_entry(Parser *p) {
    Token k = p->tok;
    advance(p); /* key */
    advance(p); /* = */
    AttrValue *v = parse_attr_value(p);
    AttrItem it = {ir_intern(p->ctx, tok_text(p, k), tok_len(k)), v, k.lo, k.hi};
    vec_push(&p->attrs, it);
}

static int cmp_ptr(const void *a, const void *b) {
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return x < y ? -1 : x > y;
}

/* Keys of the attribute list p->attrs[base..] must be distinct (sorting keeps this linear-ish
 * for long lists). */
static void check_attr_dups(Parser *p, size_t base) {
    size_t n = p->attrs.len - base;
    const char *dup = NULL;
    if (n <= 8) {
        for (size_t i = base; i < p->attrs.len && !dup; i++)
            for (size_t j = base; j < i; j++)
                if (p->attrs.data[i].key == p->attrs.data[j].key) {
                    dup = p->attrs.data[i].key;
                    break;
                }
    } else {
        p->tmp.len = 0;
        for (size_t i = base; i < p->attrs.len; i++)
            vec_push(&p->tmp, (void *)p->attrs.data[i].key);
        qsort(p->tmp.data, n, sizeof(void *), cmp_ptr);
        for (size_t i = 1; i < n && !dup; i++)
            if (p->tmp.data[i] == p->tmp.data[i - 1]) dup = p->tmp.data[i];
    }
    if (dup == NULL) return;
    bool seen = false;
    for (size_t i = base; i < p->attrs.len; i++) {
        AttrItem *it = &p->attrs.data[i];
        if (it->key != dup) continue;
        if (seen) fail_at(p, span_of(p, it->lo, it->hi), "duplicate attribute '%s'", dup);
        seen = true;
    }
}

/* Build the Attrs of p->attrs[base..] and pop them (NULL when empty). */
static const Attrs *take_attrs(Parser *p, size_t base) {
    size_t n = p->attrs.len - base;
    if (n == 0) return NULL;
    p->tmp.len = 0;
    for (size_t i = base; i < p->attrs.len; i++)
        vec_push(&p->tmp, (void *)p->attrs.data[i].key);
    for (size_t i = base; i < p->attrs.len; i++)
        vec_push(&p->tmp, p->attrs.data[i].value);
    const Attrs *a = ir_attrs_new(p->ctx, (uint32_t)n, (const char *const *)p->tmp.data,
                                  (AttrValue *const *)p->tmp.data + n);
    p->attrs.len = base;
    return a;
}

/* Items of an attribute list up to `close` (the opening token is consumed), as ATTR_LIST. */
static AttrValue *attr_list_rest(Parser *p, TokKind close, uint32_t lo) {
    size_t base = p->avals.len;
    while (p->tok.kind != close) {
        AttrValue *v = parse_attr_value(p);
        vec_push(&p->avals, v);
        if (!list_next(p, close)) break;
    }
    advance(p);
    AttrValue *v =
        ir_attr_list(p->ctx, (uint32_t)(p->avals.len - base),
                     (AttrValue **)STACK_FROM(p->avals, base), span_of(p, lo, p->last_hi));
    p->avals.len = base;
    return v;
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The text of a string literal's body: \" \\ \n \t \xHH decoded; any other backslash is
 * kept as written (TVM reads strings without escapes). */
static void unescape(const char *s, size_t n, StrBuf *out) {
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c != '\\' || i + 1 >= n) {
            sb_putc(out, c);
            continue;
        }
        char d = s[i + 1];
        int hi, lo;
        if (d == '"' || d == '\\') {
            sb_putc(out, d), i++;
        } else if (d == 'n') {
            sb_putc(out, '\n'), i++;
        } else if (d == 't') {
            sb_putc(out, '\t'), i++;
        } else if (d == 'x' && i + 3 < n && (hi = hex_digit(s[i + 2])) >= 0 &&
                   (lo = hex_digit(s[i + 3])) >= 0 && (hi | lo) != 0) {
            sb_putc(out, (char)(hi * 16 + lo));
            i += 3;
        } else {
            sb_putc(out, c);
        }
    }
}

static AttrValue *parse_attr_value(Parser *p) {
    enter(p);
    Token t = p->tok;
    Span sp = tok_span(p, t);
    AttrValue *v;
    switch (t.kind) {
    case TK_NUMBER: {
        Literal lit = parse_number(p, t);
        advance(p);
        v = lit.is_float ? ir_attr_float(p->ctx, lit.f, lit.dtype, sp)
                         : ir_attr_int(p->ctx, lit.i, lit.dtype, sp);
        break;
    }
    case TK_TRUE:
    case TK_FALSE:
        advance(p);
        v = ir_attr_bool(p->ctx, t.kind == TK_TRUE, sp);
        break;
    case TK_STRING: {
        advance(p);
        StrBuf sb = {0};
        unescape(tok_text(p, t) + 1, tok_len(t) - 2, &sb);
        v = ir_attr_str(p->ctx, sb_cstr(&sb), sb.len, sp);
        sb_free(&sb);
        break;
    }
    case TK_LBRACKET:
        advance(p);
        v = attr_list_rest(p, TK_RBRACKET, t.lo);
        break;
    case TK_LPAREN: { /* (v) is v; (v, w) and () are lists */
        advance(p);
        if (p->tok.kind == TK_RPAREN) {
            v = attr_list_rest(p, TK_RPAREN, t.lo);
            break;
        }
        AttrValue *first = parse_attr_value(p);
        if (p->tok.kind == TK_RPAREN) {
            advance(p);
            v = first;
            break;
        }
        vec_push(&p->avals, first);
        size_t base = p->avals.len - 1;
        while (list_next(p, TK_RPAREN) && p->tok.kind != TK_RPAREN) {
            AttrValue *w = parse_attr_value(p);
            vec_push(&p->avals, w);
        }
        advance(p);
        v = ir_attr_list(p->ctx, (uint32_t)(p->avals.len - base),
                         (AttrValue **)STACK_FROM(p->avals, base), span_of(p, t.lo, p->last_hi));
        p->avals.len = base;
        break;
    }
    default:
        if (t.kind == TK_IDENT && (tok_is(p, t, "None") || tok_is(p, t, "nullptr"))) {
            advance(p);
            v = ir_attr_none(p->ctx, sp);
        } else {
            Expr *e = parse_expr(p);
            Span esp = span_of(p, t.lo, p->last_hi);
            /* attributes are data, not computation: only atoms (variables, globals, constants,
             * meta references, operator and constructor names) */
            if (e->kind != EXPR_VAR && e->kind != EXPR_GLOBAL_VAR && e->kind != EXPR_CONSTANT &&
                e->kind != EXPR_OP && e->kind != EXPR_CONSTRUCTOR)
                fail_at(p, esp,
                        "an attribute value must be a literal, a string, a list, None, or a "
                        "variable, global, constant or name; found a %s",
                        ir_expr_kind_names[e->kind]);
            Constant *c = e->kind == EXPR_CONSTANT ? (Constant *)e : NULL;
            if (c && c->ndim == 0 && c->dtype == RLY_DTYPE_BOOL) /* as if written as a literal */
                v = ir_attr_bool(p->ctx, ir_constant_as_i64(c) != 0, esp);
            else if (c && c->ndim == 0 && sup_dtype_is_float(c->dtype))
                v = ir_attr_float(p->ctx, ir_constant_as_f64(c), c->dtype, esp);
            else if (c && c->ndim == 0)
                v = ir_attr_int(p->ctx, ir_constant_as_i64(c), c->dtype, esp);
            else
                v = ir_attr_expr(p->ctx, e, esp);
        }
        break;
    }
    leave(p);
    return v;
}

/* ======================================================================================
 * Patterns
 * ====================================================================================== */

static Var *new_var(Parser *p, Token name, Type *ann, Span sp) {
    const char *s = ir_intern(p->ctx, tok_text(p, name) + 1, tok_len(name) - 1);
    return ir_var_new(p->ctx, s, ann, sp);
}

/* `%x` or `%x: T` (the current token is the local): a fresh Var, bound in the current scope. */
static Var *parse_binder(Parser *p) {
    Token name = p->tok;
    advance(p);
    Type *ann = NULL;
    if (p->tok.kind == TK_COLON) {
        advance(p);
        ann = parse_type(p);
    }
    Var *v = new_var(p, name, ann, span_of(p, name.lo, p->last_hi));
    bind(p, name, v);
    return v;
}

static Pattern *parse_pattern(Parser *p) {
    enter(p);
    Token t = p->tok;
    char buf[48];
    Pattern *pat;
    size_t base = p->pats.len;
    if (t.kind == TK_IDENT && tok_is(p, t, "_")) {
        advance(p);
        pat = ir_pattern_wildcard(p->ctx, tok_span(p, t));
    } else if (t.kind == TK_LOCAL) {
        Var *v = parse_binder(p);
        pat = ir_pattern_var(p->ctx, v, span_of(p, t.lo, p->last_hi));
    } else if (t.kind == TK_IDENT) {
        Constructor *c = ir_module_lookup_ctor(p->m, tok_text(p, t), tok_len(t));
        if (c == NULL)
            fail_at(p, tok_span(p, t), "unknown constructor %s in pattern",
                    describe(p, t, buf, sizeof buf));
        advance(p);
        if (p->tok.kind == TK_LPAREN) {
            advance(p);
            while (p->tok.kind != TK_RPAREN) {
                Pattern *sub = parse_pattern(p);
                vec_push(&p->pats, sub);
                if (!list_next(p, TK_RPAREN)) break;
            }
            advance(p);
        }
        uint32_t n = (uint32_t)(p->pats.len - base);
        if (n != c->n_inputs)
            fail_at(p, span_of(p, t.lo, p->last_hi),
                    "constructor '%s' takes %u argument%s but the pattern has %u sub-pattern%s",
                    c->name, c->n_inputs, c->n_inputs == 1 ? "" : "s", n, n == 1 ? "" : "s");
        pat = ir_pattern_ctor(p->ctx, c, n, (Pattern **)STACK_FROM(p->pats, base),
                              span_of(p, t.lo, p->last_hi));
    } else if (t.kind == TK_LPAREN) {
        advance(p);
        while (p->tok.kind != TK_RPAREN) {
            Pattern *sub = parse_pattern(p);
            vec_push(&p->pats, sub);
            if (!list_next(p, TK_RPAREN)) break;
        }
        advance(p);
        pat = ir_pattern_tuple(p->ctx, (uint32_t)(p->pats.len - base),
                               (Pattern **)STACK_FROM(p->pats, base), span_of(p, t.lo, p->last_hi));
    } else {
        fail_expected(p, "a pattern");
    }
    p->pats.len = base;
    leave(p);
    return pat;
}

/* ======================================================================================
 * Expressions
 * ====================================================================================== */

static Expr *parse_postfix(Parser *p);

/* `{ expr }` */
static Expr *parse_block(Parser *p, const char *what) {
    if (p->tok.kind != TK_LBRACE) fail_expected(p, what);
    advance(p);
    Expr *e = parse_expr(p);
    expect(p, TK_RBRACE);
    return e;
}

/* The signature and body of `fn` or `def` (the keyword, and for def the name, are consumed):
 * `[A, B](%x: T, %y, Attr=1) -> T { body }`. */
static Expr *parse_function(Parser *p, uint32_t lo) {
    size_t saved = scope_open(p);
    size_t tbase = p->tvars.len, pbase = p->params.len, abase = p->attrs.len;
    if (p->tok.kind == TK_LBRACKET) parse_type_params(p);
    if (p->tok.kind != TK_LPAREN) fail_expected(p, "'(' to start the parameter list");
    advance(p);
    while (p->tok.kind != TK_RPAREN) {
        if (p->tok.kind == TK_LOCAL) {
            if (p->attrs.len > abase)
                fail_at(p, tok_span(p, p->tok), "parameters must come before attributes");
            Var *v = parse_binder(p);
            vec_push(&p->params, v);
        } else if (p->tok.kind == TK_IDENT && peek2(p).kind == TK_EQ) {
            parse_attr_entry(p);
        } else {
            fail_expected(p, "a parameter like %x or an attribute like Name=value");
        }
        if (!list_next(p, TK_RPAREN)) break;
    }
    advance(p); /* ) */
    check_attr_dups(p, abase);
    Type *ret = NULL;
    if (p->tok.kind == TK_ARROW) {
        advance(p);
        ret = parse_type(p);
    }
    Expr *body = parse_block(p, "'{' to start the function body");
    const Attrs *attrs = take_attrs(p, abase);
    Expr *f = ir_function_new(
        p->ctx, (uint32_t)(p->params.len - pbase), (Var **)STACK_FROM(p->params, pbase), body, ret,
        (uint32_t)(p->tvars.len - tbase), (TypeVar **)STACK_FROM(p->tvars, tbase), attrs,
        span_of(p, lo, p->last_hi));
    p->params.len = pbase;
    p->tvars.len = tbase;
    scope_close(p, saved);
    return f;
}

static Expr *parse_match(Parser *p) {
    Token kw = p->tok;
    bool complete = kw.kind == TK_MATCH;
    enter(p); /* the scrutinee is parsed below parse_expr: `match match match ...` must count */
    advance(p);
    Expr *data = parse_postfix(p);
    if (p->tok.kind != TK_LBRACE) fail_expected(p, "'{' to start the match clauses");
    advance(p);
    size_t base = p->clauses.len;
    while (p->tok.kind != TK_RBRACE) {
        uint32_t lo = p->tok.lo;
        size_t saved = scope_open(p);
        Pattern *lhs = parse_pattern(p);
        expect(p, TK_FAT_ARROW);
        Expr *rhs = parse_expr(p);
        scope_close(p, saved);
        Clause c = {lhs, rhs, span_of(p, lo, p->last_hi)};
        vec_push(&p->clauses, c);
        if (!list_next(p, TK_RBRACE)) break;
    }
    advance(p); /* } */
    Expr *e = ir_match_new(p->ctx, data, (uint32_t)(p->clauses.len - base),
                           STACK_FROM(p->clauses, base), complete, span_of(p, kw.lo, p->last_hi));
    p->clauses.len = base;
    leave(p);
    return e;
}

/* `(`: unit, parenthesised expression, or tuple. */
static Expr *parse_paren(Parser *p) {
    uint32_t lo = p->tok.lo;
    advance(p);
    size_t base = p->exprs.len;
    if (p->tok.kind != TK_RPAREN) {
        Expr *first = parse_expr(p);
        if (p->tok.kind == TK_RPAREN) {
            advance(p);
            return first;
        }
        vec_push(&p->exprs, first);
        while (list_next(p, TK_RPAREN) && p->tok.kind != TK_RPAREN) {
            Expr *e = parse_expr(p);
            vec_push(&p->exprs, e);
        }
    }
    advance(p); /* ) */
    Expr *t = ir_tuple_new(p->ctx, (uint32_t)(p->exprs.len - base),
                           (Expr **)STACK_FROM(p->exprs, base), span_of(p, lo, p->last_hi));
    p->exprs.len = base;
    return t;
}

/* A bare identifier: meta reference, constructor, or operator. */
static Expr *parse_ident(Parser *p) {
    Token t = p->tok;
    if (tok_is(p, t, "_")) fail_expected(p, "an expression");
    if (tok_is(p, t, "meta") && peek2(p).kind == TK_LBRACKET) {
        MetaKey key;
        uint32_t lo;
        uint64_t idx = parse_meta_ref(p, &key, &lo);
        if (key != META_CONSTANT)
            fail_at(p, span_of(p, lo, p->last_hi),
                    "meta[tir.SizeVar] can only appear as a tensor dimension");
        return meta_constant(p, idx, lo);
    }
    Constructor *c = ir_module_lookup_ctor(p->m, tok_text(p, t), tok_len(t));
    advance(p);
    if (c != NULL) {
        /* applied: the postfix loop builds the Call; nullary as a value: a zero-argument Call */
        if (p->tok.kind == TK_LPAREN || c->n_inputs > 0) return &c->base;
        return ir_call_new(p->ctx, &c->base, 0, NULL, NULL, 0, NULL, tok_span(p, t));
    }
    return ir_op_get(p->ctx, tok_text(p, t), tok_len(t));
}

static Expr *parse_atom(Parser *p) {
    Token t = p->tok;
    Span sp = tok_span(p, t);
    switch (t.kind) {
    case TK_NUMBER: {
        Expr *e = literal_expr(p, t);
        advance(p);
        return e;
    }
    case TK_TRUE:
    case TK_FALSE: advance(p); return ir_scalar_i64(p->ctx, RLY_DTYPE_BOOL, t.kind == TK_TRUE, sp);
    case TK_LOCAL:
    case TK_GRAPH: {
        Expr *e = lookup(p, t);
        if (e == NULL)
            fail_at(p, sp, "unbound %s %.*s", t.kind == TK_LOCAL ? "variable" : "graph variable",
                    (int)tok_len(t), tok_text(p, t));
        advance(p);
        return e;
    }
    case TK_GLOBAL:
        advance(p);
        return &ir_module_global(p->m, tok_text(p, t) + 1, tok_len(t) - 1, sp)->base;
    case TK_IDENT: return parse_ident(p);
    case TK_LPAREN: return parse_paren(p);
    case TK_LBRACE: return parse_block(p, "'{'");
    case TK_FN: advance(p); return parse_function(p, t.lo);
    case TK_IF: {
        advance(p);
        expect(p, TK_LPAREN);
        Expr *cond = parse_expr(p);
        expect(p, TK_RPAREN);
        Expr *then_e = parse_block(p, "'{' to start the then branch");
        expect(p, TK_ELSE);
        Expr *else_e = parse_block(p, "'{' to start the else branch");
        return ir_if_new(p->ctx, cond, then_e, else_e, span_of(p, t.lo, p->last_hi));
    }
    case TK_MATCH:
    case TK_MATCH_PARTIAL: return parse_match(p);
    case TK_REF:
    case TK_REF_READ: {
        advance(p);
        expect(p, TK_LPAREN);
        Expr *e = parse_expr(p);
        expect(p, TK_RPAREN);
        Span whole = span_of(p, t.lo, p->last_hi);
        return t.kind == TK_REF ? ir_ref_create_new(p->ctx, e, whole)
                                : ir_ref_read_new(p->ctx, e, whole);
    }
    case TK_REF_WRITE: {
        advance(p);
        expect(p, TK_LPAREN);
        Expr *r = parse_expr(p);
        expect(p, TK_COMMA);
        Expr *v = parse_expr(p);
        expect(p, TK_RPAREN);
        return ir_ref_write_new(p->ctx, r, v, span_of(p, t.lo, p->last_hi));
    }
    case TK_STRING: fail_at(p, sp, "a string literal can only be an attribute value");
    default: break;
    }
    fail_expected(p, "an expression");
}

/* `(args, key=value)` after a callee that started at lo. */
static Expr *parse_call(Parser *p, Expr *callee, uint32_t lo) {
    advance(p); /* ( */
    size_t base = p->exprs.len, abase = p->attrs.len;
    while (p->tok.kind != TK_RPAREN) {
        if (p->tok.kind == TK_IDENT && peek2(p).kind == TK_EQ) {
            parse_attr_entry(p);
        } else {
            Expr *a = parse_expr(p);
            vec_push(&p->exprs, a);
        }
        if (!list_next(p, TK_RPAREN)) break;
    }
    advance(p); /* ) */
    check_attr_dups(p, abase);
    const Attrs *attrs = take_attrs(p, abase);
    Expr *c = ir_call_new(p->ctx, callee, (uint32_t)(p->exprs.len - base),
                          (Expr **)STACK_FROM(p->exprs, base), attrs, 0, NULL,
                          span_of(p, lo, p->last_hi));
    p->exprs.len = base;
    return c;
}

/* atom ('(' args ')' | '.' index)* — a loop, so curried calls and projection chains are flat. */
static Expr *parse_postfix(Parser *p) {
    uint32_t lo = p->tok.lo;
    Expr *e = parse_atom(p);
    for (;;) {
        if (p->tok.kind == TK_LPAREN) {
            e = parse_call(p, e, lo);
        } else if (p->tok.kind == TK_DOT) {
            advance(p);
            Token t = p->tok;
            if (t.kind != TK_NUMBER || t.aux != 1) fail_expected(p, "a tuple index after '.'");
            uint64_t idx;
            if (!plain_index(p, t, &idx) || idx > UINT32_MAX)
                fail_at(p, tok_span(p, t), "tuple index %.*s is too large", (int)tok_len(t),
                        tok_text(p, t));
            advance(p);
            e = ir_tuple_get_item_new(p->ctx, e, (uint32_t)idx, span_of(p, lo, p->last_hi));
        } else {
            return e;
        }
    }
}

static int binop_prec(TokKind k) {
    switch (k) {
    case TK_STAR:
    case TK_SLASH: return 4;
    case TK_PLUS:
    case TK_MINUS: return 3;
    case TK_LT:
    case TK_LE:
    case TK_GT:
    case TK_GE: return 2;
    case TK_EQEQ:
    case TK_NE: return 1;
    default: return 0;
    }
}

static const char *binop_name(TokKind k) {
    switch (k) {
    case TK_STAR: return "multiply";
    case TK_SLASH: return "divide";
    case TK_PLUS: return "add";
    case TK_MINUS: return "subtract";
    case TK_LT: return "less";
    case TK_LE: return "less_equal";
    case TK_GT: return "greater";
    case TK_GE: return "greater_equal";
    case TK_EQEQ: return "equal";
    default: return "not_equal";
    }
}

/* Left-associative binary operators by precedence climbing over a fixed stack: the operators on
 * the stack have strictly increasing precedence, so it never holds more than 4. */
static Expr *parse_binop(Parser *p) {
    Expr *vals[5];
    uint32_t los[5];
    uint8_t ops[4];
    int nv = 0, no = 0;
    los[nv] = p->tok.lo;
    vals[nv++] = parse_postfix(p);
    for (;;) {
        int prec = binop_prec(p->tok.kind);
        while (no > 0 && (prec == 0 || binop_prec(ops[no - 1]) >= prec)) {
            const char *name = binop_name(ops[--no]);
            Expr *args[2] = {vals[nv - 2], vals[nv - 1]};
            nv--;
            vals[nv - 1] = ir_call_new(p->ctx, ir_op_get(p->ctx, name, strlen(name)), 2, args, NULL,
                                       0, NULL, span_of(p, los[nv - 1], p->last_hi));
        }
        if (prec == 0) return vals[0];
        ops[no++] = p->tok.kind;
        advance(p);
        los[nv] = p->tok.lo;
        vals[nv++] = parse_postfix(p);
    }
}

/* `let %x: T = value;` (the current token is `let`): binds %x and records the pending Let. */
static void parse_let(Parser *p) {
    char buf[48];
    uint32_t lo = p->tok.lo;
    advance(p);
    if (p->tok.kind == TK_GLOBAL)
        fail_at(p, tok_span(p, p->tok), "cannot bind a global with let: %s",
                describe(p, p->tok, buf, sizeof buf));
    if (p->tok.kind != TK_LOCAL) fail_expected(p, "a local variable like %x after 'let'");
    Token name = p->tok;
    advance(p);
    Type *ann = NULL;
    if (p->tok.kind == TK_COLON) {
        advance(p);
        ann = parse_type(p);
    }
    Var *v = new_var(p, name, ann, span_of(p, name.lo, p->last_hi));
    expect(p, TK_EQ);
    bool rec = p->tok.kind == TK_FN; /* let %f = fn ...: %f is in scope in its own value */
    if (rec) bind(p, name, v);
    Expr *value = parse_binop(p);
    if (p->tok.kind != TK_SEMI) fail_expected(p, "';' after the let value");
    advance(p);
    if (!rec) bind(p, name, v);
    Pending pd = {v, value, lo};
    vec_push(&p->pending, pd);
}

/* `%N = value;` (the current token is `%N`, the next `=`): no Let node, later uses of %N are the
 * value itself. Scoped like a let; binding the same %N twice in one scope is an error. */
static void parse_graph_binding(Parser *p) {
    Token t = p->tok;
    NameSlot *slot = slot_of(p, tok_text(p, t), tok_len(t));
    if (slot->top > p->scope_base) /* its innermost binding was made in this scope */
        fail_at(p, tok_span(p, t), "graph variable %.*s is already bound in this scope",
                (int)tok_len(t), tok_text(p, t));
    advance(p);
    advance(p); /* = */
    Expr *value = parse_binop(p);
    if (p->tok.kind != TK_SEMI) fail_expected(p, "';' after the graph binding");
    advance(p);
    bind_slot(p, slot, value);
}

/* expr ::= item (';' item)*: let chains, graph bindings, free_var declarations and `e1; e2`,
 * collected in one loop (no recursion per binding); the Lets are built backwards at the end.
 * The whole sequence is one scope. */
static Expr *parse_expr(Parser *p) {
    enter(p);
    size_t saved = scope_open(p);
    size_t base = p->pending.len;
    Expr *body;
    for (;;) {
        Token t = p->tok;
        if (t.kind == TK_LET) {
            parse_let(p);
        } else if (t.kind == TK_GRAPH && peek2(p).kind == TK_EQ) {
            parse_graph_binding(p);
        } else if (t.kind == TK_FREE_VAR) {
            if (!p->is_expr)
                fail_at(p, tok_span(p, t), "free_var is only allowed in a bare expression");
            advance(p);
            if (p->tok.kind != TK_LOCAL)
                fail_expected(p, "a local variable like %x after 'free_var'");
            parse_binder(p);
            if (p->tok.kind != TK_SEMI) fail_expected(p, "';' after the free_var declaration");
            advance(p);
        } else {
            Expr *e = parse_binop(p);
            if (p->tok.kind != TK_SEMI) {
                body = e;
                break;
            }
            /* e1; e2 is let %_ = e1; e2 (the "_" is never in scope) */
            Var *v = ir_var_new(p->ctx, "_", NULL, span_of(p, t.lo, p->last_hi));
            advance(p);
            Pending pd = {v, e, t.lo};
            vec_push(&p->pending, pd);
        }
    }
    uint32_t hi = p->last_hi;
    while (p->pending.len > base) {
        Pending pd = vec_pop(&p->pending);
        body = ir_let_new(p->ctx, pd.var, pd.value, body, span_of(p, pd.lo, hi));
    }
    scope_close(p, saved);
    leave(p);
    return body;
}

/* ======================================================================================
 * Modules
 * ====================================================================================== */

/* False when the text certainly has no `type` keyword: no "type" stands there as a whole word
 * (comments and strings included, so this errs towards true). Most large files define no ADT,
 * and this byte scan is much cheaper than lexing them twice. */
static bool may_define_types(const char *s, uint32_t n) {
    if (n < 4) return false;
    const char *end = s + n, *q = s;
    while (end - q >= 4 && (q = memchr(q, 't', (size_t)(end - q - 3))) != NULL) {
        int before = q == s ? ' ' : (unsigned char)q[-1], after = q + 4 == end ? ' ' : q[4];
        bool starts =
            !(isalnum(before) || before == '_' || before == '%' || before == '@' || before == '.');
        bool ends = !(isalnum((unsigned char)after) || after == '_' || after == '/');
        if (starts && ends && memcmp(q, "type", 4) == 0) return true;
        q++;
    }
    return false;
}

/* Declare every ADT and constructor of the text before the main pass, so that signatures, bodies
 * and patterns may use types and constructors defined further down. A second lexer pass that
 * reports nothing: anything malformed is skipped here and reported by the main pass. */
static void prescan(Parser *p) {
    Lexer lx;
    text_lex_init(&lx, p->src, p->len);
    Token prev = {TK_EOF, 0, 0, 0}, t = text_lex_next(&lx);
    while (t.kind != TK_EOF) {
        if (t.kind != TK_TYPE) {
            prev = t;
            t = text_lex_next(&lx);
            continue;
        }
        bool is_extern = prev.kind == TK_EXTERN;
        uint32_t lo = is_extern ? prev.lo : t.lo;
        prev = t;
        t = text_lex_next(&lx);
        if (t.kind != TK_IDENT) continue;
        Token name = t;
        TypeData *td = ir_module_lookup_type(p->m, tok_text(p, name), tok_len(name));
        bool fresh = td == NULL;
        if (fresh) {
            const char *s = ir_intern(p->ctx, tok_text(p, name), tok_len(name));
            GlobalTypeVar *gtv = ir_global_type_var_new(p->ctx, s, KIND_ADT_HANDLE);
            td = ir_module_add_type(p->m, gtv, 0, NULL, is_extern, span_of(p, lo, name.hi));
        }
        prev = t;
        t = text_lex_next(&lx);
        if (t.kind == TK_LBRACKET) {
            while (t.kind != TK_EOF && t.kind != TK_RBRACKET)
                t = text_lex_next(&lx);
            if (t.kind == TK_RBRACKET) t = text_lex_next(&lx);
        }
        if (is_extern || t.kind != TK_LBRACE) continue;
        t = text_lex_next(&lx);
        while (t.kind == TK_IDENT) {
            Token ctor = t;
            uint32_t arity = 0;
            t = text_lex_next(&lx);
            if (t.kind == TK_LPAREN) {
                /* count the items at depth 1: `()` 0, `(A)` and `(A,)` 1, `(A, B[C, D])` 2 */
                size_t depth = 1;
                bool item_start = true;
                for (t = text_lex_next(&lx); t.kind != TK_EOF; t = text_lex_next(&lx)) {
                    bool open = t.kind == TK_LPAREN || t.kind == TK_LBRACKET;
                    bool close = t.kind == TK_RPAREN || t.kind == TK_RBRACKET;
                    if (close && --depth == 0) break;
                    if (depth == 1 && t.kind == TK_COMMA) {
                        item_start = true;
                    } else if (depth == 1 && item_start) {
                        arity++;
                        item_start = false;
                    }
                    if (open) depth++;
                }
                if (t.kind == TK_RPAREN) t = text_lex_next(&lx);
            }
            if (fresh && ir_module_lookup_ctor(p->m, tok_text(p, ctor), tok_len(ctor)) == NULL) {
                Constructor *c = ir_module_add_ctor(p->m, td, tok_text(p, ctor), tok_len(ctor), 0,
                                                    NULL, tok_span(p, ctor));
                c->n_inputs = arity; /* the main pass fills the input types */
                c->inputs = arity ? arena_array(&p->ctx->arena, arity, sizeof(Type *)) : NULL;
            }
            if (t.kind != TK_COMMA) break;
            t = text_lex_next(&lx);
        }
        prev = t;
    }
}

/* `type Name[A] { Ctor(T, ...), ... }` or `extern type Name[A]`; the current token is `type`. */
static void parse_type_def(Parser *p, bool is_extern, uint32_t lo) {
    char buf[48];
    advance(p); /* type */
    Token name = p->tok;
    if (name.kind != TK_IDENT || memchr(tok_text(p, name), '.', tok_len(name)))
        fail_expected(p, "a type name");
    TypeData *td = ir_module_lookup_type(p->m, tok_text(p, name), tok_len(name));
    if (td != NULL && ptrmap_has(&p->defined, td)) {
        diag_error(&p->ctx->diags, tok_span(p, name), "duplicate type %s",
                   describe(p, name, buf, sizeof buf));
        diag_note(&p->ctx->diags, td->span, "%s was first defined here",
                  describe(p, name, buf, sizeof buf));
        bail(p);
    }
    if (td == NULL) { /* the pre-scan always declares it; kept for robustness */
        const char *s = ir_intern(p->ctx, tok_text(p, name), tok_len(name));
        td = ir_module_add_type(p->m, ir_global_type_var_new(p->ctx, s, KIND_ADT_HANDLE), 0, NULL,
                                is_extern, span_of(p, lo, name.hi));
    }
    ptrmap_put(&p->defined, td, td);
    td->is_extern = is_extern;
    td->span = span_of(p, lo, name.hi);
    advance(p);
    size_t saved = scope_open(p);
    size_t tbase = p->tvars.len;
    if (p->tok.kind == TK_LBRACKET) parse_type_params(p);
    td->n_tvars = (uint32_t)(p->tvars.len - tbase);
    td->tvars = td->n_tvars ? arena_memdup(&p->ctx->arena, STACK_FROM(p->tvars, tbase),
                                           td->n_tvars * sizeof(TypeVar *))
                            : NULL;
    if (p->tok.kind == TK_LBRACE) {
        if (is_extern) fail_at(p, tok_span(p, p->tok), "an extern type cannot have constructors");
        advance(p);
        while (p->tok.kind != TK_RBRACE) {
            Token ct = p->tok;
            if (ct.kind != TK_IDENT) fail_expected(p, "a constructor name");
            Constructor *c = ir_module_lookup_ctor(p->m, tok_text(p, ct), tok_len(ct));
            if (c != NULL && (ptrmap_has(&p->defined, c) || c->belong_to != td->header)) {
                diag_error(&p->ctx->diags, tok_span(p, ct), "duplicate constructor %s",
                           describe(p, ct, buf, sizeof buf));
                diag_note(&p->ctx->diags, c->base.span, "%s was first defined here",
                          describe(p, ct, buf, sizeof buf));
                bail(p);
            }
            if (c == NULL)
                c = ir_module_add_ctor(p->m, td, tok_text(p, ct), tok_len(ct), 0, NULL,
                                       tok_span(p, ct));
            ptrmap_put(&p->defined, c, c);
            advance(p);
            size_t base = p->types.len;
            if (p->tok.kind == TK_LPAREN) {
                advance(p);
                while (p->tok.kind != TK_RPAREN) {
                    Type *ty = parse_type(p);
                    vec_push(&p->types, ty);
                    if (!list_next(p, TK_RPAREN)) break;
                }
                advance(p);
            }
            c->n_inputs = (uint32_t)(p->types.len - base);
            c->inputs = c->n_inputs ? arena_memdup(&p->ctx->arena, STACK_FROM(p->types, base),
                                                   c->n_inputs * sizeof(Type *))
                                    : NULL;
            p->types.len = base;
            if (!list_next(p, TK_RBRACE)) break;
        }
        advance(p); /* } */
    }
    p->tvars.len = tbase;
    scope_close(p, saved);
}

/* `def @f[A](%x: T, Attr=v) -> T { body }`; the current token is `def`. */
static void parse_def(Parser *p) {
    char buf[48];
    uint32_t lo = p->tok.lo;
    advance(p);
    Token g = p->tok;
    if (g.kind != TK_GLOBAL) fail_expected(p, "a global name like @f after 'def'");
    const char *s = tok_text(p, g) + 1;
    size_t n = tok_len(g) - 1;
    FuncDef *d = ir_module_lookup(p->m, s, n);
    if (d != NULL && d->func != NULL) {
        diag_error(&p->ctx->diags, tok_span(p, g), "duplicate definition of global %s",
                   describe(p, g, buf, sizeof buf));
        diag_note(&p->ctx->diags, d->span, "%s was first defined here",
                  describe(p, g, buf, sizeof buf));
        bail(p);
    }
    GlobalVar *gv = ir_module_global(p->m, s, n, tok_span(p, g));
    advance(p);
    Expr *f = parse_function(p, lo);
    ir_module_define(p->m, gv, AS_FUNCTION(f), span_of(p, lo, g.hi));
}

/* `#[version = "0.0.5"]`; the current token is `#`. */
static void parse_header(Parser *p) {
    char buf[48];
    advance(p);
    expect(p, TK_LBRACKET);
    if (p->tok.kind != TK_IDENT || !tok_is(p, p->tok, "version"))
        fail_expected(p, "'version' in the header #[version = \"0.0.5\"]");
    advance(p);
    expect(p, TK_EQ);
    Token v = p->tok;
    if (v.kind != TK_STRING) fail_expected(p, "a version string like \"0.0.5\"");
    if (!tok_is(p, v, "\"0.0.5\""))
        fail_at(p, tok_span(p, v), "unsupported version %s: only \"0.0.5\" is supported",
                describe(p, v, buf, sizeof buf));
    advance(p);
    expect(p, TK_RBRACKET);
}

/* At `#` after the header: text_parse cut the text at a `#[metadata]` that starts a line, so any
 * other `#` here is misplaced. */
static bool at_metadata(Parser *p) {
    if (p->tok.kind != TK_HASH) return false;
    fail_at(p, tok_span(p, p->tok),
            "unexpected '#': a #[metadata] section must start a line and end the text");
    return true;
}

static void parse_module_body(Parser *p) {
    if (may_define_types(p->src, p->len)) prescan(p);
    for (;;) {
        switch (p->tok.kind) {
        case TK_EOF: return;
        case TK_DEF: parse_def(p); break;
        case TK_TYPE: parse_type_def(p, false, p->tok.lo); break;
        case TK_EXTERN: {
            uint32_t lo = p->tok.lo;
            advance(p);
            if (p->tok.kind != TK_TYPE) fail_expected(p, "'type' after 'extern'");
            parse_type_def(p, true, lo);
            break;
        }
        case TK_HASH:
            if (at_metadata(p)) return;
            break;
        default: fail_expected(p, "'def', 'type' or 'extern'");
        }
    }
}

static void parse_expr_body(Parser *p) {
    TokKind k = p->tok.kind;
    if (k == TK_DEF || k == TK_TYPE || k == TK_EXTERN)
        fail_at(p, tok_span(p, p->tok),
                "definitions need a module, and a module needs the header "
                "#[version = \"0.0.5\"] at the start of the text");
    p->m->is_expr = true;
    p->m->expr = parse_expr(p);
    if (p->tok.kind == TK_HASH && at_metadata(p)) return;
    if (p->tok.kind != TK_EOF) fail_expected(p, "end of input");
}

static void check_globals(Parser *p) {
    Module *m = p->m;
    for (size_t i = 0; i < m->funcs.len; i++)
        if (m->funcs.data[i].func == NULL)
            fail_at(p, m->funcs.data[i].span, "global @%s is used but never defined",
                    m->funcs.data[i].gvar->name);
}

static void parser_free(Parser *p) {
    strmap_free(&p->names);
    arena_free(&p->slots);
    vec_free(&p->binds);
    vec_free(&p->exprs);
    vec_free(&p->types);
    vec_free(&p->tvars);
    vec_free(&p->params);
    vec_free(&p->pats);
    vec_free(&p->avals);
    vec_free(&p->tmp);
    vec_free(&p->attrs);
    vec_free(&p->clauses);
    vec_free(&p->pending);
    vec_free(&p->dims);
    ptrmap_free(&p->defined);
    sb_free(&p->num);
    free(p);
}

/* Forget a module that failed to parse (it is the context's newest). */
static void drop_module(Ctx *ctx, Module *m) {
    if (ctx->modules.len > 0 && vec_last(&ctx->modules) == m) {
        ctx->modules.len--;
        ir_module_free(m);
    }
}

Module *text_parse(Ctx *ctx, const char *name, const char *text, size_t len, Constant *const *meta,
                   uint32_t n_meta) {
    return text_parse_into(ctx, NULL, name, text, len, meta, n_meta);
}

Module *text_parse_into(Ctx *ctx, Module *into, const char *name, const char *text, size_t len,
                        Constant *const *meta, uint32_t n_meta) {
    if (name == NULL) name = "<input>";
    if (text == NULL || len == 0) text = ""; /* never NULL + 0 */
    if (len >= UINT32_MAX - 1) {             /* spans are 32-bit */
        uint32_t file = diags_add_file(&ctx->diags, name, "", 0);
        diag_error(&ctx->diags, (Span){file, 0, 0}, "input is too large (%zu bytes; at most 4 GiB)",
                   len);
        return NULL;
    }
    uint32_t file = diags_add_file(&ctx->diags, name, text, len);
    /* TVM's astext() appends the tensors as a `#[metadata]` JSON section at a line start; the
     * program is the text before it. The caller's table, when given, wins over the section. */
    PtrVec inline_meta = {0};
    static const char tag[] = "#[metadata]";
    const size_t tl = sizeof tag - 1;
    for (size_t i = 0; i + tl <= len; i++) {
        if ((i == 0 || text[i - 1] == '\n') && memcmp(text + i, tag, tl) == 0) {
            if (n_meta == 0) {
                if (!text_metadata_decode(ctx, file, text, (uint32_t)(i + tl), (uint32_t)len,
                                          &inline_meta)) {
                    vec_free(&inline_meta);
                    return NULL;
                }
                meta = (Constant *const *)inline_meta.data;
                n_meta = (uint32_t)inline_meta.len;
            }
            len = i;
            break;
        }
    }
    Module *const m = into ? into : ir_module_new(ctx);
    for (uint32_t i = 0; i < n_meta; i++)
        vec_push(&m->meta, meta[i]);
    Parser *const p = sup_calloc(1, sizeof(Parser));
    p->ctx = ctx;
    p->m = m;
    p->file = file;
    p->src = text;
    p->len = (uint32_t)len;
    p->meta = meta;
    p->n_meta = n_meta;
    arena_init(&p->slots);
    text_lex_init(&p->lx, text, (uint32_t)len);

    /* out of memory: free what the parser owns, then let the outer handler see it */
    p->oom.prev = sup_oom_handler;
    sup_oom_handler = &p->oom;
    if (setjmp(p->oom.jb)) {
        sup_oom_handler = p->oom.prev;
        parser_free(p);
        if (!into) drop_module(ctx, m);
        vec_free(&inline_meta);
        sup_oom();
    }
    if (setjmp(p->fail)) {
        sup_oom_handler = p->oom.prev;
        parser_free(p);
        if (!into) drop_module(ctx, m);
        vec_free(&inline_meta);
        return NULL;
    }
    p->tok = text_lex_next(&p->lx);
    if (p->tok.kind == TK_ERROR) fail_lex(p, p->tok);
    if (p->tok.kind == TK_HASH) {
        parse_header(p);
        TokKind k = p->tok.kind;
        if (k == TK_EOF || k == TK_DEF || k == TK_TYPE || k == TK_EXTERN || k == TK_HASH) {
            parse_module_body(p);
        } else { /* TVM's astext() of an expression: the header, then the expression */
            p->is_expr = true;
            parse_expr_body(p);
        }
    } else {
        p->is_expr = true;
        parse_expr_body(p);
    }
    check_globals(p);
    sup_oom_handler = p->oom.prev;
    parser_free(p);
    vec_free(&inline_meta);
    return m;
}
