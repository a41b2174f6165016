/* metadata.c - TVM's `#[metadata]` section: the JSON object (TVM's SaveJSON graph format) that
 * `astext()` appends to a printed module, holding the tensors that meta[relay.Constant][i]
 * refers to. We read the node list, follow root -> Map["relay.Constant"] -> Array -> Constant
 * nodes, and decode each Constant's base64 NDArray (TVM's binary tensor layout: magic, reserved,
 * device, ndim, dtype code/bits/lanes, shape, byte size, data). Only what Relay constants need
 * is read; anything else in the JSON is skipped. Errors are located diagnostics. */
#include <stdio.h>

#include "frontend/text/text.h"

/* ---- a small JSON reader ------------------------------------------------------------------ */

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } JKind;

typedef struct JVal {
    JKind kind;
    uint32_t off; /* byte offset in the source, for diagnostics */
    double num;
    const char *str; /* J_STR (unescaped, arena); object keys too */
    size_t len;
    uint32_t n;          /* J_ARR, J_OBJ */
    struct JVal **items; /* values */
    const char **keys;   /* J_OBJ */
} JVal;

typedef struct JParser {
    Arena *arena;
    const char *s;
    uint32_t pos, end;
    const char *err;
    uint32_t err_off;
} JParser;

#define JSON_MAX_DEPTH 64

static void jskip(JParser *j) {
    while (j->pos < j->end && (j->s[j->pos] == ' ' || j->s[j->pos] == '\n' ||
                               j->s[j->pos] == '\r' || j->s[j->pos] == '\t'))
        j->pos++;
}

static JVal *jfail(JParser *j, const char *msg) {
    if (j->err == NULL) {
        j->err = msg;
        j->err_off = j->pos;
    }
    return NULL;
}

static JVal *jnew(JParser *j, JKind k) {
    JVal *v = arena_alloc(j->arena, sizeof(JVal));
    v->kind = k;
    v->off = j->pos;
    return v;
}

static bool jstring(JParser *j, const char **out, size_t *len) {
    j->pos++; /* opening quote */
    StrBuf sb = {0};
    while (j->pos < j->end && j->s[j->pos] != '"') {
        char c = j->s[j->pos++];
        if (c == '\\') {
            if (j->pos >= j->end) break;
            char e = j->s[j->pos++];
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'u': /* keys and values we read are ASCII: keep the escape's low byte */
                if (j->end - j->pos < 4) {
                    sb_free(&sb);
                    return jfail(j, "truncated \\u escape"), false;
                }
                c = (char)strtol((char[]){j->s[j->pos + 2], j->s[j->pos + 3], 0}, NULL, 16);
                j->pos += 4;
                break;
            default: c = e; break;
            }
        }
        sb_putc(&sb, c);
    }
    if (j->pos >= j->end) {
        sb_free(&sb);
        return jfail(j, "unterminated string"), false;
    }
    j->pos++;
    *len = sb.len;
    *out = arena_strndup(j->arena, sb_cstr(&sb), sb.len);
    sb_free(&sb);
    return true;
}

static JVal *jvalue(JParser *j, int depth) {
    jskip(j);
    if (j->pos >= j->end) return jfail(j, "unexpected end of the metadata section");
    if (depth > JSON_MAX_DEPTH) return jfail(j, "metadata JSON nested too deeply");
    char c = j->s[j->pos];
    if (c == '"') {
        JVal *v = jnew(j, J_STR);
        return jstring(j, &v->str, &v->len) ? v : NULL;
    }
    if (c == '[' || c == '{') {
        bool obj = c == '{';
        JVal *v = jnew(j, obj ? J_OBJ : J_ARR);
        PtrVec items = {0}, keys = {0};
        j->pos++;
        jskip(j);
        if (j->pos < j->end && j->s[j->pos] == (obj ? '}' : ']')) {
            j->pos++;
            return v;
        }
        for (;;) {
            jskip(j);
            if (obj) {
                const char *k;
                size_t kl;
                if (j->pos >= j->end || j->s[j->pos] != '"' || !jstring(j, &k, &kl)) {
                    vec_free(&items);
                    vec_free(&keys);
                    return jfail(j, "expected a string key");
                }
                vec_push(&keys, (void *)k);
                jskip(j);
                if (j->pos >= j->end || j->s[j->pos] != ':') {
                    vec_free(&items);
                    vec_free(&keys);
                    return jfail(j, "expected ':'");
                }
                j->pos++;
            }
            JVal *item = jvalue(j, depth + 1);
            if (item == NULL) {
                vec_free(&items);
                vec_free(&keys);
                return NULL;
            }
            vec_push(&items, item);
            jskip(j);
            if (j->pos < j->end && j->s[j->pos] == ',') {
                j->pos++;
                continue;
            }
            if (j->pos < j->end && j->s[j->pos] == (obj ? '}' : ']')) {
                j->pos++;
                break;
            }
            vec_free(&items);
            vec_free(&keys);
            return jfail(j, obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
        v->n = (uint32_t)items.len;
        v->items = arena_memdup(j->arena, items.data, items.len * sizeof(void *));
        if (obj) v->keys = arena_memdup(j->arena, keys.data, keys.len * sizeof(void *));
        vec_free(&items);
        vec_free(&keys);
        return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        JVal *v = jnew(j, J_NUM);
        char buf[64];
        uint32_t n = 0;
        while (j->pos < j->end && n < sizeof buf - 1 && strchr("+-.eE0123456789", j->s[j->pos]))
            buf[n++] = j->s[j->pos++];
        buf[n] = '\0';
        v->num = strtod(buf, NULL);
        return v;
    }
    static const struct {
        const char *word;
        JKind kind;
        double num;
    } words[] = {{"true", J_BOOL, 1}, {"false", J_BOOL, 0}, {"null", J_NULL, 0}};
    for (size_t i = 0; i < RLY_ARRAY_LEN(words); i++) {
        size_t wl = strlen(words[i].word);
        if (j->end - j->pos >= wl && memcmp(j->s + j->pos, words[i].word, wl) == 0) {
            JVal *v = jnew(j, words[i].kind);
            v->num = words[i].num;
            j->pos += (uint32_t)wl;
            return v;
        }
    }
    return jfail(j, "invalid JSON value");
}

static JVal *jget(const JVal *obj, const char *key) {
    if (obj == NULL || obj->kind != J_OBJ) return NULL;
    for (uint32_t i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0) return obj->items[i];
    return NULL;
}

/* An integer from a JSON number or a string of digits (TVM writes node refs as strings). */
static bool jint(const JVal *v, int64_t *out) {
    if (v == NULL) return false;
    if (v->kind == J_NUM) {
        *out = (int64_t)v->num;
        return v->num >= 0 && v->num < 1e15;
    }
    if (v->kind != J_STR || v->len == 0 || v->len > 15) return false;
    int64_t x = 0;
    for (size_t i = 0; i < v->len; i++) {
        if (v->str[i] < '0' || v->str[i] > '9') return false;
        x = x * 10 + (v->str[i] - '0');
    }
    *out = x;
    return true;
}

/* ---- base64 and TVM NDArrays ---------------------------------------------------------------- */

static bool base64_decode(const char *s, size_t n, StrBuf *out) {
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int v;
        if (c >= 'A' && c <= 'Z')
            v = c - 'A';
        else if (c >= 'a' && c <= 'z')
            v = c - 'a' + 26;
        else if (c >= '0' && c <= '9')
            v = c - '0' + 52;
        else if (c == '+')
            v = 62;
        else if (c == '/')
            v = 63;
        else if (c == '=')
            break;
        else if (c == '\n' || c == '\r' || c == ' ')
            continue;
        else
            return false;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            sb_putc(out, (char)((acc >> bits) & 0xff));
        }
    }
    return true;
}

static bool rd(const unsigned char **p, const unsigned char *end, void *dst, size_t n) {
    if ((size_t)(end - *p) < n) return false;
    memcpy(dst, *p, n);
    *p += n;
    return true;
}

/* Map DLPack's (code, bits) to our dtypes: code 0 int, 1 uint, 2 float, 4 bfloat. */
static int dl_dtype(uint8_t code, uint8_t bits) {
    static const struct {
        uint8_t code, bits;
        rly_dtype dt;
    } map[] = {
        {0, 8, RLY_DTYPE_I8},    {0, 16, RLY_DTYPE_I16}, {0, 32, RLY_DTYPE_I32},
        {0, 64, RLY_DTYPE_I64},  {1, 1, RLY_DTYPE_BOOL}, {1, 8, RLY_DTYPE_U8},
        {1, 16, RLY_DTYPE_U16},  {1, 32, RLY_DTYPE_U32}, {1, 64, RLY_DTYPE_U64},
        {2, 16, RLY_DTYPE_F16},  {2, 32, RLY_DTYPE_F32}, {2, 64, RLY_DTYPE_F64},
        {4, 16, RLY_DTYPE_BF16},
    };
    for (size_t i = 0; i < RLY_ARRAY_LEN(map); i++)
        if (map[i].code == code && map[i].bits == bits) return (int)map[i].dt;
    return -1;
}

static const char *decode_ndarray(Ctx *ctx, const char *b64, size_t n, Expr **out) {
    StrBuf raw = {0};
    const char *err = NULL;
    if (!base64_decode(b64, n, &raw)) {
        sb_free(&raw);
        return "invalid base64 in b64ndarrays";
    }
    if (raw.len == 0) return "empty tensor in b64ndarrays";
    const unsigned char *p = (const unsigned char *)raw.data, *end = p + raw.len;
    uint64_t magic, reserved, nbytes;
    int32_t dev[2], ndim;
    uint8_t code, bits;
    uint16_t lanes;
    int64_t shape[64];
    if (!rd(&p, end, &magic, 8) || !rd(&p, end, &reserved, 8) || !rd(&p, end, dev, 8) ||
        !rd(&p, end, &ndim, 4) || !rd(&p, end, &code, 1) || !rd(&p, end, &bits, 1) ||
        !rd(&p, end, &lanes, 2)) {
        err = "truncated tensor header in b64ndarrays";
    } else if (magic != 0xDD5E40F096B4A13Full) {
        err = "not a TVM NDArray (bad magic) in b64ndarrays";
    } else if (ndim < 0 || ndim > 64) {
        err = "tensor rank out of range in b64ndarrays";
    } else if (lanes != 1 || dl_dtype(code, bits) < 0) {
        err = "unsupported tensor dtype in b64ndarrays";
    } else {
        rly_dtype dt = (rly_dtype)dl_dtype(code, bits);
        size_t count = 1;
        for (int32_t i = 0; i < ndim && err == NULL; i++) {
            if (!rd(&p, end, &shape[i], 8) || shape[i] < 0)
                err = "bad tensor shape in b64ndarrays";
            else if (shape[i] && count > (size_t)(end - p) / (size_t)shape[i])
                err = "tensor larger than its data in b64ndarrays";
            else
                count *= (size_t)shape[i];
        }
        char why[128];
        if (err == NULL && sup_shape_check((uint32_t)ndim, shape, false, why, sizeof why) != NULL)
            err = "tensor shape in b64ndarrays is too large (each dim and the product of the "
                  "nonzero dims at most 2^62)";
        if (err == NULL && (!rd(&p, end, &nbytes, 8) || nbytes != count * sup_dtype_size(dt) ||
                            (size_t)(end - p) != nbytes))
            err = "tensor data size does not match its shape in b64ndarrays";
        if (err == NULL) *out = ir_constant_new(ctx, dt, (uint32_t)ndim, shape, p, SPAN_NONE);
    }
    sb_free(&raw);
    return err;
}

/* ---- the section ---------------------------------------------------------------------------- */

static bool fail_at(Ctx *ctx, uint32_t file, uint32_t off, const char *msg) {
    diag_error(&ctx->diags, (Span){file, off, off + 1}, "metadata: %s", msg);
    return false;
}

bool text_metadata_decode(Ctx *ctx, uint32_t file, const char *text, uint32_t off, uint32_t len,
                          PtrVec *consts) {
    Arena arena;
    arena_init(&arena);
    JParser j = {&arena, text, off, len, NULL, 0};
    JVal *root = jvalue(&j, 0);
    bool ok = true;
    if (root == NULL) {
        ok = fail_at(ctx, file, j.err_off, j.err);
        goto done;
    }
    jskip(&j);
    if (j.pos < j.end) {
        ok = fail_at(ctx, file, j.pos, "unexpected text after the metadata JSON");
        goto done;
    }
    JVal *nodes = jget(root, "nodes"), *arrays = jget(root, "b64ndarrays");
    int64_t r;
    if (nodes == NULL || nodes->kind != J_ARR || !jint(jget(root, "root"), &r) || r >= nodes->n) {
        ok = fail_at(ctx, file, root->off, "expected TVM's JSON graph: {\"root\", \"nodes\", ...}");
        goto done;
    }
    JVal *map = nodes->items[r], *keys = jget(map, "keys"), *data = jget(map, "data");
    if (keys == NULL || data == NULL || keys->kind != J_ARR || data->kind != J_ARR)
        goto done; /* no constants */
    for (uint32_t k = 0; k < keys->n && k < data->n && ok; k++) {
        if (keys->items[k]->kind != J_STR || strcmp(keys->items[k]->str, "relay.Constant") != 0)
            continue;
        int64_t ai;
        JVal *arr =
            jint(data->items[k], &ai) && ai < nodes->n ? jget(nodes->items[ai], "data") : NULL;
        if (arr == NULL || arr->kind != J_ARR) {
            ok = fail_at(ctx, file, data->off, "relay.Constant must map to an array node");
            break;
        }
        for (uint32_t i = 0; i < arr->n && ok; i++) {
            int64_t ci, di;
            JVal *node = jint(arr->items[i], &ci) && ci < nodes->n ? nodes->items[ci] : NULL;
            JVal *attrs = jget(node, "attrs");
            if (node == NULL || !jint(jget(attrs, "data"), &di) || arrays == NULL ||
                arrays->kind != J_ARR || di >= arrays->n || arrays->items[di]->kind != J_STR) {
                ok = fail_at(ctx, file, arr->items[i]->off,
                             "a relay.Constant node without a valid b64ndarrays entry");
                break;
            }
            Expr *c = NULL;
            const char *err =
                decode_ndarray(ctx, arrays->items[di]->str, arrays->items[di]->len, &c);
            if (err)
                ok = fail_at(ctx, file, arrays->items[di]->off, err);
            else
                vec_push(consts, c);
        }
    }
done:
    arena_free(&arena);
    return ok;
}
