/* test_onnx_reader.c - the ONNX reader (src/frontend/onnx/onnx.h):
 * - every model.onnx of Debian's libonnx-testdata (node, pytorch-converted, pytorch-operator,
 *   simple) decodes, walks clean, and stays within the reader's memory bound; every
 *   input_N.pb / output_N.pb of a tensor-typed value decodes to the declared type and shape and
 *   round-trips through ox_encode_tensor (skipped with a message when the data is missing);
 * - facts of a few models as the onnx Python package prints them (attributes, subgraphs,
 *   initializer values, string attributes);
 * - hand-encoded models: packed, unpacked and mixed repeated fields, unknown fields of every wire
 *   type at every level, each attribute kind with and without its type, every typed data field;
 * - hostile input: wrong wire types, truncation at every length, flipped bytes, lengths past the
 *   end, long varints, huge / negative / lying dims, nesting past OX_MAX_DEPTH, stray groups,
 *   failing allocations; each an error with a location, never a crash;
 * - external data in a temporary directory, zero-copy raw_data in the mapping. */
#define _XOPEN_SOURCE 700 /* mkdtemp, symlink */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../check.h"
#include "frontend/onnx/onnx.h"

#define TESTDATA "/usr/share/libonnx-testdata/data"

/* ==== a tiny protobuf encoder, independent of the reader's ================================ */

static void put_varint(StrBuf *b, uint64_t v) {
    do {
        uint8_t c = v & 0x7f;
        v >>= 7;
        sb_putc(b, (char)(c | (v ? 0x80 : 0)));
    } while (v);
}
static void put_tag(StrBuf *b, uint32_t f, int w) {
    put_varint(b, ((uint64_t)f << 3) | (unsigned)w);
}
static void put_v(StrBuf *b, uint32_t f, uint64_t v) {
    put_tag(b, f, 0);
    put_varint(b, v);
}
static void put_l(StrBuf *b, uint32_t f, const void *p, size_t n) {
    put_tag(b, f, 2);
    put_varint(b, n);
    sb_putn(b, p, n);
}
static void put_s(StrBuf *b, uint32_t f, const char *s) { put_l(b, f, s, strlen(s)); }
static void put_f32(StrBuf *b, uint32_t f, float v) {
    put_tag(b, f, 5);
    sb_putn(b, (const char *)&v, 4);
}
static void put_f64(StrBuf *b, uint32_t f, double v) {
    put_tag(b, f, 1);
    sb_putn(b, (const char *)&v, 8);
}
/* Append sub as a length-delimited field and free it. */
static void put_m(StrBuf *b, uint32_t f, StrBuf *sub) {
    put_l(b, f, sub->data, sub->len);
    sb_free(sub);
}
static void put_packed_v(StrBuf *b, uint32_t f, const int64_t *v, size_t n) {
    StrBuf p = {0};
    for (size_t i = 0; i < n; i++)
        put_varint(&p, (uint64_t)v[i]);
    put_m(b, f, &p);
}
/* Unknown fields of every wire type, a group with a nested group among them. */
static void put_unknowns(StrBuf *b) {
    put_v(b, 900, 12345678901ull);
    put_f64(b, 901, 2.5);
    put_s(b, 902, "unknown bytes");
    put_tag(b, 903, 3);
    put_v(b, 1, 7);
    put_tag(b, 904, 3);
    put_s(b, 2, "inner");
    put_tag(b, 904, 4);
    put_f32(b, 3, 1.0f);
    put_tag(b, 903, 4);
    put_f32(b, 905, 3.0f);
}

/* A tensor type {elem_type, shape {dim...}}; dims < 0 are dim_param "N". */
static void put_tensor_type(StrBuf *b, uint32_t f, int32_t elem, int ndim, const int64_t *dims) {
    StrBuf tt = {0}, shape = {0}, type = {0};
    put_v(&tt, 1, (uint64_t)elem);
    for (int i = 0; ndim >= 0 && i < ndim; i++) {
        StrBuf dim = {0};
        if (dims[i] >= 0)
            put_v(&dim, 1, (uint64_t)dims[i]);
        else
            put_s(&dim, 2, "N");
        put_m(&shape, 1, &dim);
    }
    if (ndim >= 0) put_m(&tt, 2, &shape);
    put_m(&type, 1, &tt);
    put_m(b, f, &type);
}

static void put_value_info(StrBuf *b, uint32_t f, const char *name, int32_t elem, int ndim,
                           const int64_t *dims) {
    StrBuf vi = {0};
    put_s(&vi, 1, name);
    put_tensor_type(&vi, 2, elem, ndim, dims);
    put_m(b, f, &vi);
}

/* A model {ir_version, opset "" 13, graph} around graph (freed). */
static StrBuf model_of(int64_t ir, StrBuf *graph) {
    StrBuf m = {0}, op = {0};
    put_v(&m, 1, (uint64_t)ir);
    put_s(&m, 2, "test");
    put_s(&op, 1, "");
    put_v(&op, 2, 13);
    put_m(&m, 8, &op);
    put_m(&m, 7, graph);
    return m;
}

/* A model whose graph has one node (freed) after n_before empty "Relu" nodes. */
static StrBuf model_of_node(StrBuf *node, int n_before) {
    StrBuf g = {0};
    for (int i = 0; i < n_before; i++) {
        StrBuf nd = {0};
        put_s(&nd, 4, "Relu");
        put_m(&g, 1, &nd);
    }
    put_m(&g, 1, node);
    put_s(&g, 2, "g");
    return model_of(8, &g);
}

/* A node "conv1" Conv with one attribute (freed), as the graph's node[3]. */
static StrBuf model_of_attr(StrBuf *attr) {
    StrBuf nd = {0};
    put_s(&nd, 1, "x");
    put_s(&nd, 2, "y");
    put_s(&nd, 3, "conv1");
    put_s(&nd, 4, "Conv");
    put_m(&nd, 5, attr);
    return model_of_node(&nd, 3);
}

/* A model with one initializer (freed). */
static StrBuf model_of_init(StrBuf *tensor) {
    StrBuf g = {0};
    put_m(&g, 5, tensor);
    return model_of(8, &g);
}

/* ==== helpers ================================================================================ */

static char g_err[1024];

/* Decode from an exact-size heap copy (so ASan sees reads past the end); the model borrows
 * *copy, which the caller frees after the model. */
static OxModel *load_copy(const StrBuf *b, const char *name, void **copy) {
    *copy = malloc(b->len ? b->len : 1);
    if (b->len) memcpy(*copy, b->data, b->len);
    g_err[0] = '\0';
    return ox_load_bytes(*copy, b->len, name, g_err, sizeof g_err);
}

/* Load bytes that must decode (the model keeps pointing into `b`, which the caller keeps). */
static OxModel *load_ok(const StrBuf *b, int line) {
    OxModel *m = ox_load_bytes(b->data, b->len, "t.onnx", g_err, sizeof g_err);
    CHECK(m != NULL, "line %d: expected a model, got: %s", line, g_err);
    return m;
}
#define LOAD_OK(b) load_ok(&(b), __LINE__)

/* Bytes that must fail with every `want` substring in the message; frees b. */
static void expect_err_line(StrBuf *b, int line, const char *want1, const char *want2) {
    void *copy;
    OxModel *m = load_copy(b, "t.onnx", &copy);
    CHECK(m == NULL && strncmp(g_err, "t.onnx: ", 8) == 0 && strstr(g_err, want1) != NULL &&
              (want2 == NULL || strstr(g_err, want2) != NULL),
          "line %d: expected an error with '%s'%s%s, got %s: %s", line, want1, want2 ? " and " : "",
          want2 ? want2 : "", m ? "a model" : "error", g_err);
    ox_model_free(m);
    free(copy);
    sb_free(b);
}
#define EXPECT_ERR(b, w) expect_err_line(&(b), __LINE__, w, NULL)
#define EXPECT_ERR2(b, w1, w2) expect_err_line(&(b), __LINE__, w1, w2)

static const OxAttr *find_attr(const OxNode *n, const char *name) {
    for (uint32_t i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

static bool ints_are(const OxAttr *a, const int64_t *want, uint32_t n) {
    if (a == NULL || a->type != OXA_INTS || a->n_ints != n) return false;
    for (uint32_t i = 0; i < n; i++)
        if (a->ints[i] != want[i]) return false;
    return true;
}

static bool in_range(const void *p, const void *base, size_t len) {
    return (const char *)p >= (const char *)base && (const char *)p < (const char *)base + len;
}

/* Structural invariants of a decoded tensor. */
static bool tensor_ok(const OxTensor *t, const OxModel *m) {
    if (t->name == NULL || (t->ndim > 0 && t->dims == NULL)) return false;
    int64_t count = 1;
    for (uint32_t i = 0; i < t->ndim; i++) {
        if (t->dims[i] < 0) return false;
        count *= t->dims[i];
    }
    if (count != t->count) return false;
    if (t->data_type == OX_STRING) {
        if (count > 0 && t->strings == NULL) return false;
        for (int64_t i = 0; i < count; i++)
            if (t->strings[i].s == NULL || t->strings[i].s[t->strings[i].n] != '\0') return false;
        return true;
    }
    size_t es = ox_elem_size(t->data_type);
    if (es == 0 || t->nbytes != (size_t)count * es) return false;
    if ((count > 0) != (t->data != NULL)) return false;
    if (t->borrowed && m != NULL && m->map != NULL && !in_range(t->data, m->map, m->map_len)) {
        /* external data lies in another mapping: accept any borrowed pointer then */
        return m->ext_maps != NULL;
    }
    return true;
}

static bool type_ok(const OxType *t, int depth) {
    if (depth > OX_MAX_DEPTH + 1) return false;
    if (t->ndim > 0 && t->dims == NULL) return false;
    for (int32_t i = 0; i < t->ndim; i++)
        if (t->dims[i].value < -1 || (t->dims[i].param != NULL && t->dims[i].value != -1))
            return false;
    return t->elem == NULL || type_ok(t->elem, depth + 1);
}

/* Walk a graph checking invariants; returns the number of nodes (all levels), -1 if broken. */
static long walk_graph(const OxGraph *g, const OxModel *m) {
    long n = 0;
    if (g == NULL || g->name == NULL) return -1;
    for (uint32_t i = 0; i < g->n_inits; i++)
        if (!tensor_ok(&g->inits[i], m)) return -1;
    const OxValueInfo *lists[3] = {g->inputs, g->outputs, g->value_infos};
    uint32_t counts[3] = {g->n_inputs, g->n_outputs, g->n_value_infos};
    for (int l = 0; l < 3; l++)
        for (uint32_t i = 0; i < counts[l]; i++)
            if (lists[l][i].name == NULL || !type_ok(&lists[l][i].type, 0)) return -1;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const OxNode *nd = &g->nodes[i];
        n++;
        if (nd->index != i || nd->op_type == NULL || nd->op_type[0] == '\0' || nd->name == NULL ||
            nd->domain == NULL)
            return -1;
        for (uint32_t k = 0; k < nd->n_inputs; k++)
            if (nd->inputs[k] == NULL) return -1;
        for (uint32_t k = 0; k < nd->n_outputs; k++)
            if (nd->outputs[k] == NULL) return -1;
        for (uint32_t k = 0; k < nd->n_attrs; k++) {
            const OxAttr *a = &nd->attrs[k];
            if (a->name == NULL || a->type < 0 || a->type > OXA_TYPE_PROTOS) return -1;
            if ((a->n_ints && !a->ints) || (a->n_floats && !a->floats) ||
                (a->n_strings && !a->strings) || (a->n_tensors && !a->tensors) ||
                (a->n_graphs && !a->graphs))
                return -1;
            if (a->t != NULL && !tensor_ok(a->t, m)) return -1;
            for (uint32_t j = 0; j < a->n_tensors; j++)
                if (!tensor_ok(&a->tensors[j], m)) return -1;
            if (a->g != NULL) {
                long s = walk_graph(a->g, m);
                if (s < 0) return -1;
                n += s;
            }
            for (uint32_t j = 0; j < a->n_graphs; j++) {
                long s = walk_graph(a->graphs[j], m);
                if (s < 0) return -1;
                n += s;
            }
        }
    }
    return n;
}

static bool read_all(const char *path, StrBuf *out) {
    char *data, err[256];
    size_t len;
    if (!sup_read_file(path, &data, &len, err, sizeof err)) return false;
    sb_putn(out, data, len);
    free(data);
    return true;
}

static bool same_tensor(const OxTensor *a, const OxTensor *b) {
    if (a->data_type != b->data_type || a->ndim != b->ndim || a->count != b->count ||
        strcmp(a->name, b->name) != 0)
        return false;
    for (uint32_t i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i]) return false;
    if (a->data_type == OX_STRING) {
        for (int64_t i = 0; i < a->count; i++)
            if (a->strings[i].n != b->strings[i].n ||
                memcmp(a->strings[i].s, b->strings[i].s, a->strings[i].n) != 0)
                return false;
        return true;
    }
    return a->nbytes == b->nbytes && (a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names in dir (NULL-terminated, malloc'ed); NULL if dir cannot be opened. */
static char **list_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (d == NULL) return NULL;
    PtrVec v = {0};
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') vec_push(&v, strdup(e->d_name));
    closedir(d);
    if (v.len) qsort(v.data, v.len, sizeof(char *), cmp_str);
    vec_push(&v, NULL);
    return (char **)v.data;
}

static void free_list(char **l) {
    for (size_t i = 0; l && l[i]; i++)
        free(l[i]);
    free(l);
}

/* ==== the test-data corpus ================================================================== */

static long n_models, n_pb, n_pb_values, n_pb_skipped, n_pb_identical, n_nodes_total, n_quirks;

/* Structural invariants of a decoded SequenceProto / OptionalProto value. */
static bool value_ok(const OxValue *v, int depth) {
    if (depth > OX_MAX_DEPTH || v->name == NULL) return false;
    if (v->kind == OXV_TENSOR) return v->tensor != NULL && tensor_ok(v->tensor, NULL);
    if (v->kind == OXV_OPTIONAL && v->n > 1) return false;
    if (v->n > 0 && v->items == NULL) return false;
    for (uint32_t i = 0; i < v->n; i++)
        if (!value_ok(&v->items[i], depth + 1) || v->items[i].kind != v->items[0].kind)
            return false;
    return true;
}

static bool same_tensor(const OxTensor *a, const OxTensor *b);

static bool same_value(const OxValue *a, const OxValue *b) {
    if (a->kind != b->kind || a->n != b->n || strcmp(a->name, b->name) != 0) return false;
    if (a->kind == OXV_TENSOR) return same_tensor(a->tensor, b->tensor);
    if (a->elem_type != b->elem_type) return false;
    for (uint32_t i = 0; i < a->n; i++)
        if (!same_value(&a->items[i], &b->items[i])) return false;
    return true;
}

/* Check a test_data_set_K/input_N.pb or output_N.pb against the value info it feeds. */
static void check_pb(const char *path, const OxValueInfo *vi) {
    Arena a;
    arena_init(&a);
    char err[512];
    OxTensor *t = ox_load_tensor_file(path, &a, err, sizeof err);
    if (vi != NULL && (vi->type.kind == OXT_SEQUENCE || vi->type.kind == OXT_OPTIONAL)) {
        /* a SequenceProto / OptionalProto file: decodes as one, and re-encodes to a message that
         * decodes the same */
        OxValueKind kind = vi->type.kind == OXT_SEQUENCE ? OXV_SEQUENCE : OXV_OPTIONAL;
        OxValue *v = ox_load_value_file(path, kind, &a, err, sizeof err);
        CHECK(v != NULL && value_ok(v, 0), "%s: %s", path, v ? "inconsistent value" : err);
        if (v != NULL) {
            n_pb_values++;
            StrBuf enc = {0};
            ox_encode_value(v, &enc);
            OxValue *u = ox_decode_value(enc.data, enc.len, kind, &a, err, sizeof err);
            CHECK(u != NULL && same_value(v, u), "%s: the encoded value decodes differently: %s",
                  path, u ? "" : err);
            sb_free(&enc);
        }
        arena_free(&a);
        return;
    }
    if (vi == NULL || vi->type.kind != OXT_TENSOR) {
        /* a MapProto file: not a TensorProto; it may decode as garbage or fail, but cleanly */
        n_pb_skipped++;
        CHECK(t != NULL || strncmp(err, path, strlen(path)) == 0, "%s: bad failure: %s", path, err);
        arena_free(&a);
        return;
    }
    n_pb++;
    CHECK(t != NULL, "%s", err);
    if (t == NULL) {
        arena_free(&a);
        return;
    }
    CHECK(tensor_ok(t, NULL) && !t->borrowed, "%s: decoded tensor is inconsistent", path);
    /* Quirks of the test data itself (onnx 1.12): bfloat16 values are stored as uint16 (numpy
     * has no bfloat16), and test_castlike_* store the 'like' input with dims (1). */
    bool type_quirk = vi->type.elem_type == OX_BFLOAT16 && t->data_type == OX_UINT16;
    CHECK(vi->type.elem_type == 0 || t->data_type == vi->type.elem_type || type_quirk,
          "%s: data type %s, the model declares %s", path, ox_type_name(t->data_type),
          ox_type_name(vi->type.elem_type));
    if (vi->type.ndim >= 0) {
        bool same = (int32_t)t->ndim == vi->type.ndim;
        for (uint32_t i = 0; same && i < t->ndim; i++)
            same = vi->type.dims[i].value < 0 || vi->type.dims[i].value == t->dims[i];
        bool shape_quirk =
            strstr(path, "/test_castlike_") != NULL && t->ndim == 1 && t->dims[0] == 1;
        CHECK(same || shape_quirk, "%s: shape differs from the model's", path);
        n_quirks += !same;
    }
    n_quirks += type_quirk;
    /* round trip through the raw_data encoding */
    StrBuf enc = {0}, orig = {0};
    ox_encode_tensor(t, &enc);
    OxTensor *u = ox_decode_tensor(enc.data, enc.len, &a, err, sizeof err);
    CHECK(u != NULL && same_tensor(t, u), "%s: the encoded tensor decodes differently: %s", path,
          u ? "" : err);
    if (read_all(path, &orig) && orig.len == enc.len && memcmp(orig.data, enc.data, enc.len) == 0)
        n_pb_identical++;
    sb_free(&enc);
    sb_free(&orig);
    arena_free(&a);
}

static void check_case(const char *dir) {
    char path[1100];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    char err[1024];
    OxModel *m = ox_load_file(path, err, sizeof err);
    CHECK(m != NULL, "%s", err);
    if (m == NULL) return;
    n_models++;
    CHECK(m->ir_version >= 3 && m->graph != NULL && strcmp(m->path, path) == 0, "%s: model header",
          path);
    long nodes = walk_graph(m->graph, m);
    CHECK(nodes >= 1, "%s: graph walk failed", path);
    if (nodes > 0) n_nodes_total += nodes;
    /* the memory bound: a constant multiple of the file size (plus the arena's first chunk) */
    CHECK(m->arena.total <= 160 * m->map_len + 2 * 65536, "%s: arena %zu bytes for a %zu-byte file",
          path, m->arena.total, m->map_len);
    char **sets = list_dir(dir);
    for (size_t s = 0; sets && sets[s]; s++) {
        if (strncmp(sets[s], "test_data_set_", 14) != 0) continue;
        char sd[1200];
        snprintf(sd, sizeof sd, "%s/%s", dir, sets[s]);
        char **files = list_dir(sd);
        for (size_t f = 0; files && files[f]; f++) {
            unsigned k;
            const char *nm = files[f];
            const OxValueInfo *vi = NULL;
            if (sscanf(nm, "input_%u.pb", &k) == 1) {
                /* input_k feeds the k-th graph input that is not an initializer */
                uint32_t seen = 0;
                for (uint32_t i = 0; i < m->graph->n_inputs && vi == NULL; i++) {
                    bool init = false;
                    for (uint32_t j = 0; j < m->graph->n_inits && !init; j++)
                        init = strcmp(m->graph->inits[j].name, m->graph->inputs[i].name) == 0;
                    if (!init && seen++ == k) vi = &m->graph->inputs[i];
                }
            } else if (sscanf(nm, "output_%u.pb", &k) == 1) {
                if (k < m->graph->n_outputs) vi = &m->graph->outputs[k];
            } else {
                continue;
            }
            char fp[1400];
            snprintf(fp, sizeof fp, "%s/%s", sd, nm);
            check_pb(fp, vi);
        }
        free_list(files);
    }
    free_list(sets);
    ox_model_free(m);
}

static void test_corpus(void) {
    static const char *const suites[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};
    for (size_t s = 0; s < RLY_ARRAY_LEN(suites); s++) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s/%s", TESTDATA, suites[s]);
        char **cases = list_dir(dir);
        if (cases == NULL) {
            printf("skipped: %s is missing (install libonnx-testdata)\n", dir);
            continue;
        }
        for (size_t i = 0; cases[i]; i++) {
            char cd[1024];
            snprintf(cd, sizeof cd, "%s/%s", dir, cases[i]);
            struct stat st;
            char mp[1100];
            snprintf(mp, sizeof mp, "%s/model.onnx", cd);
            if (stat(mp, &st) == 0) check_case(cd);
        }
        free_list(cases);
    }
    printf("corpus: %ld models (%ld nodes), %ld tensor files (%ld re-encode byte-identical), "
           "%ld sequence/optional files, %ld other files skipped, %ld test-data quirks "
           "tolerated\n",
           n_models, n_nodes_total, n_pb, n_pb_identical, n_pb_values, n_pb_skipped, n_quirks);
    CHECK(n_models == 0 || n_pb_values >= 20, "only %ld sequence/optional files decoded",
          n_pb_values);
}

/* ==== facts of real models (as `onnx.load(...)` prints them) ================================= */

static OxModel *load_testdata(const char *rel) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s/model.onnx", TESTDATA, rel);
    if (access(path, R_OK) != 0) return NULL;
    OxModel *m = ox_load_file(path, g_err, sizeof g_err);
    CHECK(m != NULL, "%s", g_err);
    return m;
}

static void test_facts(void) {
    OxModel *m = load_testdata("node/test_conv_with_strides_padding");
    if (m == NULL) {
        printf("skipped: facts (no test data)\n");
        return;
    }
    const OxGraph *g = m->graph;
    CHECK(m->ir_version == 6 && ox_opset(m, "") == 11 && ox_opset(m, "ai.onnx") == 11 &&
              ox_opset(m, "com.microsoft") == 0 && strcmp(m->producer_name, "backend-test") == 0,
          "conv: header");
    CHECK(g->n_nodes == 1 && strcmp(g->nodes[0].op_type, "Conv") == 0 &&
              g->nodes[0].n_inputs == 2 && strcmp(g->nodes[0].inputs[1], "W") == 0 &&
              strcmp(g->nodes[0].outputs[0], "y") == 0 && g->nodes[0].name[0] == '\0',
          "conv: node");
    static const int64_t k33[] = {3, 3}, p1111[] = {1, 1, 1, 1}, s22[] = {2, 2};
    CHECK(ints_are(find_attr(&g->nodes[0], "kernel_shape"), k33, 2) &&
              ints_are(find_attr(&g->nodes[0], "pads"), p1111, 4) &&
              ints_are(find_attr(&g->nodes[0], "strides"), s22, 2),
          "conv: attributes");
    CHECK(g->n_inputs == 2 && strcmp(g->inputs[0].name, "x") == 0 &&
              g->inputs[0].type.kind == OXT_TENSOR && g->inputs[0].type.elem_type == OX_FLOAT &&
              g->inputs[0].type.ndim == 4 && g->inputs[0].type.dims[2].value == 7 &&
              g->inputs[0].type.dims[3].value == 5 && g->n_outputs == 1 &&
              g->outputs[0].type.dims[2].value == 4,
          "conv: value infos");
    ox_model_free(m);

    if ((m = load_testdata("node/test_if")) != NULL) {
        const OxNode *n = &m->graph->nodes[0];
        const OxAttr *then = find_attr(n, "then_branch"), *els = find_attr(n, "else_branch");
        CHECK(strcmp(n->op_type, "If") == 0 && then && then->type == OXA_GRAPH && els &&
                  els->type == OXA_GRAPH && strcmp(then->g->name, "then_body") == 0 &&
                  strcmp(els->g->name, "else_body") == 0 && then->g->n_inputs == 0 &&
                  then->g->n_outputs == 1 && strcmp(then->g->outputs[0].name, "then_out") == 0,
              "if: branches");
        const OxAttr *v = then ? find_attr(&then->g->nodes[0], "value") : NULL;
        const float want[] = {1, 2, 3, 4, 5};
        CHECK(v && v->type == OXA_TENSOR && v->t->data_type == OX_FLOAT && v->t->count == 5 &&
                  v->t->nbytes == 20 && memcmp(v->t->data, want, 20) == 0,
              "if: then_branch constant");
        CHECK(m->graph->inputs[0].type.elem_type == OX_BOOL && m->graph->inputs[0].type.ndim == 0,
              "if: scalar bool input (shape present, no dims)");
        ox_model_free(m);
    }
    if ((m = load_testdata("node/test_loop11")) != NULL) {
        const OxAttr *body = find_attr(&m->graph->nodes[0], "body");
        static const char *const ops[] = {"Identity", "Constant",  "Constant",
                                          "Add",      "Unsqueeze", "Unsqueeze",
                                          "Slice",    "Add",       "Identity"};
        bool ok = body && body->g->n_nodes == 9 && strcmp(body->g->name, "loop_body") == 0 &&
                  body->g->n_inputs == 3 && strcmp(body->g->inputs[1].name, "cond_in") == 0 &&
                  body->g->n_outputs == 3;
        for (uint32_t i = 0; ok && i < 9; i++)
            ok = strcmp(body->g->nodes[i].op_type, ops[i]) == 0;
        CHECK(ok, "loop11: body");
        ox_model_free(m);
    }
    if ((m = load_testdata("node/test_scan9_sum")) != NULL) {
        const OxAttr *n_scan = find_attr(&m->graph->nodes[0], "num_scan_inputs");
        CHECK(m->ir_version == 4 && ox_opset(m, "") == 9 && n_scan && n_scan->type == OXA_INT &&
                  n_scan->i == 1 && find_attr(&m->graph->nodes[0], "body")->g->n_nodes == 2,
              "scan9_sum");
        ox_model_free(m);
    }
    if ((m = load_testdata("pytorch-converted/test_Conv2d")) != NULL) {
        const OxGraph *cg = m->graph;
        CHECK(m->ir_version == 3 && ox_opset(m, "") == 6 && cg->n_inits == 2 &&
                  strcmp(cg->inits[0].name, "1") == 0 && cg->inits[0].ndim == 4 &&
                  cg->inits[0].dims[0] == 4 && cg->inits[0].dims[3] == 2 &&
                  cg->inits[0].count == 72 && cg->inits[1].count == 4,
              "Conv2d: initializers");
        const float *w = cg->inits[0].data, *b = cg->inits[1].data;
        CHECK(w && b && w[0] == -0.14294092f && w[1] == -0.08505815f && b[0] == -0.17454392f &&
                  b[2] == 0.04685764f,
              "Conv2d: initializer values");
        static const int64_t k32[] = {3, 2};
        const OxAttr *grp = find_attr(&cg->nodes[0], "group");
        CHECK(ints_are(find_attr(&cg->nodes[0], "kernel_shape"), k32, 2) && grp && grp->i == 1,
              "Conv2d: attributes");
        ox_model_free(m);
    }
    if ((m = load_testdata("simple/test_strnorm_model_monday_casesensintive_lower")) != NULL) {
        const OxNode *n = &m->graph->nodes[0];
        const OxAttr *cc = find_attr(n, "case_change_action"), *sw = find_attr(n, "stopwords");
        CHECK(cc && cc->type == OXA_STRING && cc->s.n == 5 && strcmp(cc->s.s, "LOWER") == 0 && sw &&
                  sw->type == OXA_STRINGS && sw->n_strings == 1 &&
                  strcmp(sw->strings[0].s, "monday") == 0,
              "strnorm: string attributes");
        ox_model_free(m);
    }
    if ((m = load_testdata("node/test_constant")) != NULL) {
        const OxAttr *v = find_attr(&m->graph->nodes[0], "value");
        CHECK(v && v->t->count == 25 && v->t->ndim == 2 &&
                  ((const float *)v->t->data)[0] == 1.7640524f &&
                  ((const float *)v->t->data)[3] == 2.2408931f,
              "constant: value");
        ox_model_free(m);
    }
}

/* ==== hand-encoded models ======================================================================
 */

static void test_fields(void) {
    /* a node with every attribute kind, fields packed, unpacked and mixed, unknowns everywhere */
    StrBuf nd = {0}, a = {0};
    put_unknowns(&nd);
    put_s(&nd, 1, "x");
    put_s(&nd, 1, "");
    put_s(&nd, 2, "y");
    put_s(&nd, 3, "n0");
    put_s(&nd, 4, "Custom");
    put_s(&nd, 7, "com.example");
    put_s(&nd, 6, "a doc string");
    /* ints: packed [1, 2], unpacked 3, packed [-4], unpacked 5; no type (inferred) */
    put_s(&a, 1, "ints");
    static const int64_t p12[] = {1, 2}, pm4[] = {-4};
    put_packed_v(&a, 8, p12, 2);
    put_unknowns(&a);
    put_v(&a, 8, 3);
    put_packed_v(&a, 8, pm4, 1);
    put_v(&a, 8, 5);
    put_m(&nd, 5, &a);
    /* floats: unpacked 1.5, packed [2.5, -3] */
    put_s(&a, 1, "floats");
    put_v(&a, 20, OXA_FLOATS);
    put_f32(&a, 7, 1.5f);
    {
        float fs[] = {2.5f, -3.0f};
        put_l(&a, 7, fs, sizeof fs);
    }
    put_m(&nd, 5, &a);
    put_s(&a, 1, "f");
    put_f32(&a, 2, 0.25f);
    put_m(&nd, 5, &a);
    put_s(&a, 1, "i");
    put_v(&a, 3, (uint64_t)-7);
    put_v(&a, 20, OXA_INT);
    put_m(&nd, 5, &a);
    put_s(&a, 1, "s");
    put_l(&a, 4, "a\0b", 3);
    put_m(&nd, 5, &a);
    put_s(&a, 1, "strings");
    put_s(&a, 9, "one");
    put_s(&a, 9, "");
    put_s(&a, 9, "three");
    put_m(&nd, 5, &a);
    put_s(&a, 1, "empty_ints");
    put_v(&a, 20, OXA_INTS);
    put_m(&nd, 5, &a);
    {
        /* a tensor attribute and a list of two tensors */
        StrBuf t = {0};
        put_v(&t, 1, 2);
        put_v(&t, 2, OX_INT64);
        static const int64_t v[] = {-1, 1ll << 40};
        put_packed_v(&t, 7, v, 2);
        put_s(&t, 8, "tv");
        put_unknowns(&t);
        put_s(&a, 1, "t");
        put_m(&a, 5, &t);
        put_m(&nd, 5, &a);
        put_s(&a, 1, "tensors");
        for (int k = 0; k < 2; k++) {
            put_v(&t, 2, OX_UINT8);
            put_v(&t, 1, 1);
            put_l(&t, 9, k ? "\x07" : "\x09", 1);
            put_m(&a, 10, &t);
        }
        put_m(&nd, 5, &a);
    }
    {
        /* a graph attribute and a list of graphs */
        StrBuf sg = {0}, sn = {0};
        put_s(&sn, 4, "Identity");
        put_s(&sn, 1, "x");
        put_s(&sn, 2, "z");
        put_m(&sg, 1, &sn);
        put_s(&sg, 2, "sub");
        put_unknowns(&sg);
        put_s(&a, 1, "g");
        put_m(&a, 6, &sg);
        put_m(&nd, 5, &a);
        put_s(&a, 1, "graphs");
        put_v(&a, 20, OXA_GRAPHS);
        for (int k = 0; k < 3; k++) {
            put_s(&sg, 2, k == 0 ? "g0" : k == 1 ? "g1" : "g2");
            put_m(&a, 11, &sg);
        }
        put_m(&nd, 5, &a);
    }
    {
        /* tp: a sequence of float tensors */
        StrBuf tp = {0}, seq = {0};
        put_tensor_type(&seq, 1, OX_FLOAT, -1, NULL);
        put_m(&tp, 4, &seq);
        put_s(&a, 1, "tp");
        put_m(&a, 14, &tp);
        put_m(&nd, 5, &a);
    }
    put_s(&a, 1, "ref");
    put_s(&a, 21, "outer");
    put_v(&a, 20, OXA_INT);
    put_m(&nd, 5, &a);

    StrBuf g = {0};
    put_unknowns(&g);
    put_m(&g, 1, &nd);
    put_s(&g, 2, "main");
    static const int64_t dims_x[] = {1, -1, 3};
    put_value_info(&g, 11, "x", OX_FLOAT, 3, dims_x);
    put_value_info(&g, 12, "y", OX_INT8, -1, NULL);
    {
        /* value_info: optional(sequence(tensor)), map(int64 -> float tensor), no type */
        StrBuf vi = {0}, type = {0}, opt = {0}, seqt = {0}, seq = {0};
        put_tensor_type(&seq, 1, OX_DOUBLE, 0, NULL);
        put_m(&seqt, 4, &seq);
        put_m(&opt, 1, &seqt);
        put_m(&type, 9, &opt);
        put_unknowns(&type);
        put_s(&vi, 1, "o");
        put_m(&vi, 2, &type);
        put_m(&g, 13, &vi);
        StrBuf mp = {0};
        put_v(&mp, 1, OX_INT64);
        put_tensor_type(&mp, 2, OX_FLOAT, -1, NULL);
        put_m(&type, 5, &mp);
        put_s(&vi, 1, "m");
        put_m(&vi, 2, &type);
        put_m(&g, 13, &vi);
        put_s(&vi, 1, "untyped");
        put_unknowns(&vi);
        put_m(&g, 13, &vi);
    }
    put_l(&g, 15, "", 0); /* a sparse initializer (counted only) */
    StrBuf m = {0}, op = {0};
    put_unknowns(&m);
    put_v(&m, 1, 10);
    put_s(&op, 1, "ai.onnx");
    put_v(&op, 2, 21);
    put_unknowns(&op);
    put_m(&m, 8, &op);
    put_s(&op, 1, "com.example");
    put_v(&op, 2, 1);
    put_m(&m, 8, &op);
    put_s(&m, 2, "prod");
    put_s(&m, 3, "1.0");
    put_s(&m, 4, "dom");
    put_v(&m, 5, 42);
    put_s(&m, 6, "doc");
    put_m(&m, 7, &g);
    put_l(&m, 25, "", 0);
    put_l(&m, 25, "", 0);

    OxModel *om = LOAD_OK(m);
    if (om != NULL) {
        CHECK(om->ir_version == 10 && om->model_version == 42 && om->n_opsets == 2 &&
                  ox_opset(om, "") == 21 && ox_opset(om, "com.example") == 1 &&
                  om->n_functions == 2 && strcmp(om->producer_name, "prod") == 0 &&
                  strcmp(om->producer_version, "1.0") == 0 && strcmp(om->domain, "dom") == 0 &&
                  strcmp(om->doc, "doc") == 0,
              "model fields");
        const OxGraph *gg = om->graph;
        CHECK(walk_graph(gg, om) == 2, "walk");
        CHECK(strcmp(gg->name, "main") == 0 && gg->n_nodes == 1 && gg->n_sparse_inits == 1 &&
                  gg->n_value_infos == 3,
              "graph fields");
        const OxNode *n = &gg->nodes[0];
        CHECK(n->n_inputs == 2 && strcmp(n->inputs[1], "") == 0 && strcmp(n->name, "n0") == 0 &&
                  strcmp(n->domain, "com.example") == 0 && strcmp(n->op_type, "Custom") == 0,
              "node fields");
        static const int64_t want_ints[] = {1, 2, 3, -4, 5};
        CHECK(ints_are(find_attr(n, "ints"), want_ints, 5), "packed/unpacked/mixed ints");
        const OxAttr *at = find_attr(n, "floats");
        CHECK(at && at->n_floats == 3 && at->floats[0] == 1.5f && at->floats[1] == 2.5f &&
                  at->floats[2] == -3.0f,
              "mixed floats");
        at = find_attr(n, "f");
        CHECK(at && at->type == OXA_FLOAT && at->f == 0.25f, "f (type inferred)");
        at = find_attr(n, "i");
        CHECK(at && at->type == OXA_INT && at->i == -7, "negative i");
        at = find_attr(n, "s");
        CHECK(at && at->type == OXA_STRING && at->s.n == 3 && memcmp(at->s.s, "a\0b", 4) == 0,
              "bytes with a NUL");
        at = find_attr(n, "strings");
        CHECK(at && at->type == OXA_STRINGS && at->n_strings == 3 && at->strings[1].n == 0 &&
                  strcmp(at->strings[2].s, "three") == 0,
              "strings");
        at = find_attr(n, "empty_ints");
        CHECK(at && at->type == OXA_INTS && at->n_ints == 0, "empty typed ints");
        at = find_attr(n, "t");
        CHECK(at && at->type == OXA_TENSOR && at->t->data_type == OX_INT64 && at->t->count == 2 &&
                  ((const int64_t *)at->t->data)[0] == -1 &&
                  ((const int64_t *)at->t->data)[1] == 1ll << 40 && strcmp(at->t->name, "tv") == 0,
              "tensor attribute");
        at = find_attr(n, "tensors");
        CHECK(at && at->type == OXA_TENSORS && at->n_tensors == 2 &&
                  ((const uint8_t *)at->tensors[0].data)[0] == 9 &&
                  ((const uint8_t *)at->tensors[1].data)[0] == 7 && at->tensors[1].borrowed,
              "tensors attribute (uint8 raw_data borrowed)");
        at = find_attr(n, "g");
        CHECK(at && at->type == OXA_GRAPH && strcmp(at->g->name, "sub") == 0 &&
                  at->g->n_nodes == 1 && strcmp(at->g->nodes[0].outputs[0], "z") == 0,
              "graph attribute");
        at = find_attr(n, "graphs");
        CHECK(at && at->n_graphs == 3 && strcmp(at->graphs[2]->name, "g2") == 0 &&
                  at->graphs[0]->n_nodes == 0,
              "graphs attribute");
        at = find_attr(n, "tp");
        CHECK(at && at->type == OXA_TYPE_PROTO && at->tp->kind == OXT_SEQUENCE &&
                  at->tp->elem_type == OX_FLOAT && at->tp->elem->kind == OXT_TENSOR &&
                  at->tp->elem->ndim == -1,
              "type proto attribute");
        at = find_attr(n, "ref");
        CHECK(at && strcmp(at->ref_attr_name, "outer") == 0, "ref_attr_name");
        const OxType *tx = &gg->inputs[0].type;
        CHECK(tx->kind == OXT_TENSOR && tx->ndim == 3 && tx->dims[0].value == 1 &&
                  tx->dims[1].value == -1 && strcmp(tx->dims[1].param, "N") == 0 &&
                  tx->dims[2].param == NULL,
              "dim_value and dim_param");
        CHECK(gg->outputs[0].type.elem_type == OX_INT8 && gg->outputs[0].type.ndim == -1,
              "no shape: rank unknown");
        const OxType *to = &gg->value_infos[0].type;
        CHECK(to->kind == OXT_OPTIONAL && to->elem->kind == OXT_SEQUENCE &&
                  to->elem->elem->kind == OXT_TENSOR && to->elem_type == OX_DOUBLE &&
                  to->elem->elem->ndim == 0,
              "optional(sequence(tensor))");
        const OxType *tm = &gg->value_infos[1].type;
        CHECK(tm->kind == OXT_MAP && tm->elem_type == OX_INT64 && tm->elem->elem_type == OX_FLOAT,
              "map type");
        CHECK(gg->value_infos[2].type.kind == OXT_NONE && gg->value_infos[2].type.ndim == -1,
              "untyped value info");
        ox_model_free(om);
    }
    sb_free(&m);
}

/* Every typed data field, packed and unpacked, into the element buffer. */
static void test_tensor_fields(void) {
    struct {
        int32_t type;
        uint32_t field;
        int wire; /* element wire type */
        uint64_t vals[3];
        size_t esize;
        uint8_t want[24];
    } cases[] = {
        {OX_FLOAT,
         4,
         5,
         {0x3fc00000, 0xc0200000, 0},
         4,
         {0, 0, 0xc0, 0x3f, 0, 0, 0x20, 0xc0, 0, 0, 0, 0}},
        {OX_INT32,
         5,
         0,
         {(uint64_t)-2, 7, 0x7fffffff},
         4,
         {0xfe, 0xff, 0xff, 0xff, 7, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f}},
        {OX_INT8, 5, 0, {(uint64_t)-128, 127, (uint64_t)-1}, 1, {0x80, 0x7f, 0xff}},
        {OX_UINT8, 5, 0, {255, 0, 1}, 1, {255, 0, 1}},
        {OX_INT16, 5, 0, {(uint64_t)-2, 300, 0}, 2, {0xfe, 0xff, 0x2c, 0x01, 0, 0}},
        {OX_UINT16, 5, 0, {65535, 1, 2}, 2, {0xff, 0xff, 1, 0, 2, 0}},
        {OX_BOOL, 5, 0, {1, 0, 5}, 1, {1, 0, 1}},
        {OX_FLOAT16, 5, 0, {0x3c00, 0xc000, 0x7bff}, 2, {0, 0x3c, 0, 0xc0, 0xff, 0x7b}},
        {OX_BFLOAT16, 5, 0, {0x3f80, 0x4000, 0}, 2, {0x80, 0x3f, 0, 0x40, 0, 0}},
        {OX_INT64,
         7,
         0,
         {(uint64_t)-1, 1ull << 62, 3},
         8,
         {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0x40, 3}},
        {OX_DOUBLE,
         10,
         1,
         {0x3ff0000000000000ull, 0, 0x4000000000000000ull},
         8,
         {0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x40}},
        {OX_UINT32,
         11,
         0,
         {0xffffffffu, 1, 2},
         4,
         {0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 2, 0, 0, 0}},
        {OX_UINT64,
         11,
         0,
         {UINT64_MAX, 0, 9},
         8,
         {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 9}},
    };
    for (size_t c = 0; c < RLY_ARRAY_LEN(cases); c++) {
        for (int packed = 0; packed < 3; packed++) { /* unpacked, packed, mixed */
            StrBuf t = {0}, pk = {0};
            put_v(&t, 2, (uint64_t)cases[c].type);
            put_v(&t, 1, 3);
            for (int k = 0; k < 3; k++) {
                bool as_packed = packed == 1 || (packed == 2 && k == 1);
                StrBuf *dst = as_packed ? &pk : &t;
                uint64_t v = cases[c].vals[k];
                if (!as_packed) put_tag(&t, cases[c].field, cases[c].wire);
                if (cases[c].wire == 0)
                    put_varint(dst, v);
                else if (cases[c].wire == 5)
                    sb_putn(dst, (const char *)&v, 4);
                else
                    sb_putn(dst, (const char *)&v, 8);
                if (packed == 2 && k == 1) put_m(&t, cases[c].field, &pk);
            }
            if (packed == 1) put_m(&t, cases[c].field, &pk);
            sb_free(&pk);
            StrBuf mb = model_of_init(&t);
            OxModel *m = LOAD_OK(mb);
            const OxTensor *x = m ? &m->graph->inits[0] : NULL;
            CHECK(x && x->data_type == cases[c].type && x->count == 3 &&
                      x->nbytes == 3 * cases[c].esize && !x->borrowed &&
                      memcmp(x->data, cases[c].want, x->nbytes) == 0,
                  "typed field of %s (%s)", ox_type_name(cases[c].type),
                  packed == 0   ? "unpacked"
                  : packed == 1 ? "packed"
                                : "mixed");
            ox_model_free(m);
            sb_free(&mb);
        }
    }
    /* complex64 from float_data (2 values per element), complex128 from double_data */
    StrBuf t = {0};
    put_v(&t, 2, OX_COMPLEX64);
    put_v(&t, 1, 2);
    float cf[] = {1, 2, 3, 4};
    put_l(&t, 4, cf, sizeof cf);
    StrBuf mb = model_of_init(&t);
    OxModel *m = LOAD_OK(mb);
    CHECK(m && m->graph->inits[0].count == 2 && m->graph->inits[0].nbytes == 16 &&
              memcmp(m->graph->inits[0].data, cf, 16) == 0,
          "complex64 float_data");
    ox_model_free(m);
    sb_free(&mb);
    put_v(&t, 2, OX_COMPLEX128);
    put_v(&t, 1, 1);
    put_f64(&t, 10, 1.0);
    put_f64(&t, 10, -1.0);
    mb = model_of_init(&t);
    m = LOAD_OK(mb);
    CHECK(m && m->graph->inits[0].count == 1 && m->graph->inits[0].nbytes == 16 &&
              ((const double *)m->graph->inits[0].data)[1] == -1.0,
          "complex128 double_data");
    ox_model_free(m);
    sb_free(&mb);
    put_v(&t, 2, OX_COMPLEX64);
    put_v(&t, 1, 2);
    put_l(&t, 4, cf, 12);
    mb = model_of_init(&t);
    EXPECT_ERR2(mb, "float_data has 3 values", "complex");
    /* strings */
    put_v(&t, 2, OX_STRING);
    put_v(&t, 1, 2);
    put_s(&t, 6, "ab");
    put_l(&t, 6, "\0x", 2);
    mb = model_of_init(&t);
    m = LOAD_OK(mb);
    CHECK(m && m->graph->inits[0].count == 2 && m->graph->inits[0].data == NULL &&
              m->graph->inits[0].strings[1].n == 2 && m->graph->inits[0].strings[1].s[1] == 'x',
          "string_data");
    ox_model_free(m);
    sb_free(&mb);
    /* scalars and empty tensors */
    put_v(&t, 2, OX_FLOAT);
    put_f32(&t, 4, 2.0f);
    mb = model_of_init(&t);
    m = LOAD_OK(mb);
    CHECK(m && m->graph->inits[0].ndim == 0 && m->graph->inits[0].count == 1 &&
              m->graph->inits[0].dims == NULL && *(const float *)m->graph->inits[0].data == 2.0f,
          "scalar");
    ox_model_free(m);
    sb_free(&mb);
    put_v(&t, 2, OX_FLOAT);
    put_v(&t, 1, 3);
    put_v(&t, 1, 0);
    mb = model_of_init(&t);
    m = LOAD_OK(mb);
    CHECK(m && m->graph->inits[0].count == 0 && m->graph->inits[0].data == NULL &&
              m->graph->inits[0].nbytes == 0,
          "empty tensor without data");
    ox_model_free(m);
    sb_free(&mb);
    /* float8 via int32_data (one byte each) */
    put_v(&t, 2, 17);
    put_v(&t, 5, 0x38);
    mb = model_of_init(&t);
    m = LOAD_OK(mb);
    CHECK(m && m->graph->inits[0].nbytes == 1 && *(const uint8_t *)m->graph->inits[0].data == 0x38,
          "float8e4m3fn");
    ox_model_free(m);
    sb_free(&mb);
    /* int4 / uint4: packed two a byte, low nibble first; read one byte each (int4 signed) */
    put_v(&t, 2, OX_INT4);
    put_v(&t, 1, 3);
    put_l(&t, 9, "\x9f\x07", 2);
    mb = model_of_init(&t);
    m = LOAD_OK(mb);
    const int8_t *i4 = m ? m->graph->inits[0].data : NULL;
    CHECK(i4 && m->graph->inits[0].nbytes == 3 && i4[0] == -1 && i4[1] == -7 && i4[2] == 7,
          "int4 raw_data");
    if (m) { /* encodes packed again */
        StrBuf enc = {0};
        ox_encode_tensor(&m->graph->inits[0], &enc);
        Arena a;
        arena_init(&a);
        char err[256];
        OxTensor *back = ox_decode_tensor(enc.data, enc.len, &a, err, sizeof err);
        CHECK(back && back->nbytes == 3 && memcmp(back->data, i4, 3) == 0, "int4 round trip");
        arena_free(&a);
        sb_free(&enc);
    }
    ox_model_free(m);
    sb_free(&mb);
    put_v(&t, 2, OX_UINT4);
    put_v(&t, 1, 3);
    put_v(&t, 5, 0x9f);
    put_v(&t, 5, 0x07);
    mb = model_of_init(&t);
    m = LOAD_OK(mb);
    const uint8_t *u4 = m ? m->graph->inits[0].data : NULL;
    CHECK(u4 && u4[0] == 15 && u4[1] == 9 && u4[2] == 7, "uint4 int32_data");
    ox_model_free(m);
    sb_free(&mb);
    /* float8 byte values: normal, subnormal, largest, NaN and inf codes of each format */
    static const struct {
        int32_t t;
        uint8_t b;
        float v; /* NaN: expect NaN */
    } f8[] = {
        {OX_FLOAT8E4M3FN, 0x38, 1.0f},       {OX_FLOAT8E4M3FN, 0x7e, 448.0f},
        {OX_FLOAT8E4M3FN, 0x01, 0x1p-9f},    {OX_FLOAT8E4M3FN, 0xff, NAN},
        {OX_FLOAT8E4M3FN, 0xb8, -1.0f},      {OX_FLOAT8E4M3FNUZ, 0x7f, 240.0f},
        {OX_FLOAT8E4M3FNUZ, 0x80, NAN},      {OX_FLOAT8E4M3FNUZ, 0x01, 0x1p-10f},
        {OX_FLOAT8E5M2, 0x7b, 57344.0f},     {OX_FLOAT8E5M2, 0xfc, -INFINITY},
        {OX_FLOAT8E5M2, 0x7d, NAN},          {OX_FLOAT8E5M2, 0x01, 0x1p-16f},
        {OX_FLOAT8E5M2FNUZ, 0x7f, 57344.0f}, {OX_FLOAT8E5M2FNUZ, 0x01, 0x1p-17f},
        {OX_FLOAT8E5M2FNUZ, 0x80, NAN},      {OX_FLOAT8E5M2FNUZ, 0x3c, 0.5f},
    };
    for (size_t i = 0; i < sizeof f8 / sizeof f8[0]; i++) {
        float v = ox_float8_value(f8[i].t, f8[i].b);
        CHECK(isnan(f8[i].v) ? isnan(v) : v == f8[i].v, "%s 0x%02x is %g, expected %g",
              ox_type_name(f8[i].t), f8[i].b, (double)v, (double)f8[i].v);
    }
}

/* ==== hostile input ============================================================================
 */

static void test_hostile(void) {
    StrBuf a = {0}, b = {0}, t = {0}, nd = {0};
    /* wrong wire type of a known field, located by node and attribute */
    put_s(&a, 1, "pads");
    put_f32(&a, 8, 1.0f);
    b = model_of_attr(&a);
    EXPECT_ERR2(b, "graph.node[3] 'conv1' attribute 'pads': ", "(ints) has wire type 32-bit");
    put_s(&nd, 3, "n");
    put_v(&nd, 4, 5);
    b = model_of_node(&nd, 0);
    EXPECT_ERR2(b, "graph.node[0] 'n': ", "field 4 (op_type) has wire type varint");
    put_v(&b, 1, 8);
    put_v(&b, 7, 1);
    EXPECT_ERR(b, "field 7 (graph) has wire type varint");
    put_s(&b, 1, "x");
    EXPECT_ERR(b, "ir_version");
    /* a known field as a group */
    put_v(&b, 1, 8);
    put_tag(&b, 7, 3);
    put_tag(&b, 7, 4);
    EXPECT_ERR(b, "start-group");
    /* wire-level garbage */
    put_v(&b, 1, 8);
    put_tag(&b, 901, 4);
    EXPECT_ERR(b, "end-group tag without a start-group tag");
    put_v(&b, 1, 8);
    put_tag(&b, 901, 3);
    put_v(&b, 1, 1);
    EXPECT_ERR(b, "unterminated group");
    put_v(&b, 1, 8);
    put_tag(&b, 901, 3);
    put_tag(&b, 902, 4);
    EXPECT_ERR(b, "does not match");
    put_v(&b, 1, 8);
    for (int i = 0; i < 70; i++)
        put_tag(&b, 901, 3);
    EXPECT_ERR(b, "groups nested too deeply");
    put_v(&b, 1, 8);
    put_tag(&b, 5, 6);
    EXPECT_ERR(b, "invalid wire type");
    put_v(&b, 1, 8);
    sb_putn(&b, "\x07\x00", 2); /* field number 0 */
    EXPECT_ERR2(b, "invalid field number", "(at byte 2)");
    put_v(&b, 1, 8);
    sb_putn(&b, "\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12); /* 11-byte varint */
    EXPECT_ERR(b, "varint longer than 10 bytes");
    sb_putn(&b, "\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 11);
    EXPECT_ERR(b, "wider than 64 bits");
    sb_putn(&b, "\x08\x80", 2);
    EXPECT_ERR(b, "truncated varint");
    put_v(&b, 1, 8);
    sb_putn(&b, "\x3a\x05\x0a", 3); /* graph claims 5 bytes, 1 left */
    EXPECT_ERR(b, "length past the end");
    put_v(&b, 1, 8);
    sb_putn(&b, "\x3a\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 10); /* length 2^63-1 */
    EXPECT_ERR(b, "length past the end");
    put_v(&b, 1, 8);
    sb_putn(&b, "\x09\x01\x02", 3); /* truncated fixed64 */
    EXPECT_ERR(b, "truncated 64-bit value");
    /* a length that escapes its message into the parent */
    {
        StrBuf g = {0};
        sb_putn(&g, "\x0a\x04\x22\x05Re", 6); /* node holds 4 bytes; its op_type claims 5 */
        b = model_of(8, &g);
        EXPECT_ERR2(b, "graph.node[0]", "length past the end");
    }
    /* IR versions */
    {
        StrBuf g = {0};
        b = model_of(2, &g);
        EXPECT_ERR(b, "ir_version 2 is not supported");
        b = model_of(11, &g);
        OxModel *m = LOAD_OK(b);
        CHECK(m && m->ir_version == 11, "IR 11 is accepted");
        ox_model_free(m);
        sb_free(&b);
        b = model_of(3, &g);
        m = LOAD_OK(b);
        ox_model_free(m);
        sb_free(&b);
        put_v(&b, 1, 7);
        EXPECT_ERR(b, "the model has no graph");
        EXPECT_ERR(b, "no ir_version"); /* empty input */
    }
    /* tensors: dims and data that disagree */
    put_v(&t, 2, OX_FLOAT);
    put_v(&t, 1, 1ull << 40);
    put_v(&t, 1, 1ull << 40);
    b = model_of_init(&t);
    EXPECT_ERR(b, "element count overflows");
    put_v(&t, 2, OX_FLOAT);
    put_v(&t, 1, 1ull << 31);
    put_v(&t, 1, 1ull << 31);
    put_s(&t, 8, "big");
    b = model_of_init(&t);
    EXPECT_ERR2(b, "graph.initializer[0] 'big': ", "but the tensor has no data");
    put_v(&t, 2, OX_DOUBLE);
    put_v(&t, 1, 1ull << 61);
    put_l(&t, 9, "12345678", 8);
    b = model_of_init(&t);
    EXPECT_ERR(b, "overflow");
    put_v(&t, 2, OX_FLOAT);
    put_v(&t, 1, (uint64_t)-3);
    b = model_of_init(&t);
    EXPECT_ERR(b, "dims[0] = -3 is negative");
    put_v(&t, 2, OX_FLOAT);
    put_v(&t, 1, 2);
    put_l(&t, 9, "1234567", 7);
    b = model_of_init(&t);
    EXPECT_ERR(b, "raw_data has 7 bytes");
    put_v(&t, 2, OX_INT64);
    put_v(&t, 1, 3);
    put_v(&t, 7, 1);
    b = model_of_init(&t);
    EXPECT_ERR(b, "int64_data has 1 values");
    put_v(&t, 2, OX_INT64);
    put_f32(&t, 4, 1.0f);
    b = model_of_init(&t);
    EXPECT_ERR(b, "float_data cannot hold int64 values");
    put_v(&t, 2, OX_FLOAT);
    put_f32(&t, 4, 1.0f);
    put_l(&t, 9, "1234", 4);
    b = model_of_init(&t);
    EXPECT_ERR(b, "both raw_data and float_data");
    put_v(&t, 2, OX_STRING);
    put_l(&t, 9, "1234", 4);
    b = model_of_init(&t);
    EXPECT_ERR(b, "raw_data cannot hold string values");
    put_l(&t, 9, "1234", 4);
    b = model_of_init(&t);
    EXPECT_ERR(b, "no data_type");
    put_v(&t, 2, 22); /* int4, one element: one packed byte, not two */
    put_l(&t, 9, "12", 2);
    b = model_of_init(&t);
    EXPECT_ERR(b, "raw_data has 2 bytes; dims () of int4 (two a byte) need 1 bytes");
    put_v(&t, 2, 21);
    put_v(&t, 1, 3);
    put_v(&t, 5, 0x21);
    b = model_of_init(&t);
    EXPECT_ERR(b, "int32_data has 1 values; dims (3) of uint4 need 2 (two a value)");
    put_v(&t, 2, 23); /* float4e2m1: not read */
    put_l(&t, 9, "1", 1);
    b = model_of_init(&t);
    EXPECT_ERR(b, "float4e2m1 are not supported");
    put_v(&t, 2, 99);
    b = model_of_init(&t);
    EXPECT_ERR(b, "UNKNOWN(99)");
    put_v(&t, 2, OX_FLOAT);
    put_v(&t, 14, 2);
    b = model_of_init(&t);
    EXPECT_ERR(b, "data_location 2");
    put_v(&t, 2, OX_FLOAT);
    put_l(&t, 3, "\x08\x01", 2);
    b = model_of_init(&t);
    EXPECT_ERR(b, "segment");
    put_v(&t, 2, OX_FLOAT);
    put_l(&t, 4, "123", 3); /* packed floats of 3 bytes */
    b = model_of_init(&t);
    EXPECT_ERR(b, "not a multiple of 4");
    put_v(&t, 2, OX_INT64);
    put_l(&t, 7, "\x80", 1); /* packed varints, truncated */
    b = model_of_init(&t);
    EXPECT_ERR2(b, "int64_data", "truncated varint");
    put_v(&t, 2, OX_FLOAT);
    put_l(&t, 8, "a\0b", 3);
    b = model_of_init(&t);
    EXPECT_ERR(b, "name contains a NUL byte");
    /* attributes */
    put_s(&a, 1, "x");
    b = model_of_attr(&a);
    EXPECT_ERR2(b, "attribute 'x'", "neither a type nor a value");
    put_s(&a, 1, "x");
    put_v(&a, 3, 1);
    put_f32(&a, 2, 1);
    b = model_of_attr(&a);
    EXPECT_ERR(b, "values of several kinds");
    put_v(&a, 3, 1);
    b = model_of_attr(&a);
    EXPECT_ERR2(b, "attribute[0]", "no name");
    put_s(&a, 1, "x");
    put_v(&a, 20, 15);
    b = model_of_attr(&a);
    EXPECT_ERR(b, "unknown attribute type 15");
    /* a node without op_type; a NUL in a name */
    put_s(&nd, 3, "anon");
    b = model_of_node(&nd, 2);
    EXPECT_ERR2(b, "graph.node[2] 'anon'", "no op_type");
    put_s(&nd, 4, "Relu");
    put_l(&nd, 1, "x\0y", 3);
    b = model_of_node(&nd, 0);
    EXPECT_ERR(b, "input contains a NUL byte");
}

/* Graphs nested through If attributes `depth` deep (the main graph is depth 1). */
static StrBuf nested_graphs(int depth) {
    StrBuf g = {0};
    put_s(&g, 2, "leaf");
    for (int i = 1; i < depth; i++) {
        StrBuf a = {0}, nd = {0}, outer = {0};
        put_s(&a, 1, "then_branch");
        put_v(&a, 20, OXA_GRAPH);
        put_m(&a, 6, &g);
        put_s(&nd, 4, "If");
        put_s(&nd, 3, "if");
        put_m(&nd, 5, &a);
        put_m(&outer, 1, &nd);
        g = outer;
    }
    return model_of(8, &g);
}

static void test_depth(void) {
    StrBuf b = nested_graphs(OX_MAX_DEPTH);
    OxModel *m = LOAD_OK(b);
    const OxGraph *g = m ? m->graph : NULL;
    int depth = 0;
    while (g != NULL) {
        depth++;
        g = g->n_nodes ? g->nodes[0].attrs[0].g : NULL;
    }
    CHECK(depth == OX_MAX_DEPTH, "graphs nested %d deep: found %d", OX_MAX_DEPTH, depth);
    ox_model_free(m);
    sb_free(&b);
    b = nested_graphs(OX_MAX_DEPTH + 1);
    EXPECT_ERR2(b, "graph.node[0] 'if' attribute 'then_branch' graph.node[0] 'if'",
                "graphs nested deeper than 64");
    /* types: sequence(sequence(...)) */
    for (int extra = 0; extra < 2; extra++) {
        StrBuf tp = {0};
        {
            StrBuf tt = {0};
            put_v(&tt, 1, OX_FLOAT);
            put_m(&tp, 1, &tt);
        }
        for (int i = 1; i < OX_MAX_DEPTH + extra; i++) {
            StrBuf seq = {0}, outer = {0};
            put_m(&seq, 1, &tp);
            put_m(&outer, 4, &seq);
            tp = outer;
        }
        StrBuf vi = {0}, dg = {0};
        put_s(&vi, 1, "deep");
        put_m(&vi, 2, &tp);
        put_m(&dg, 11, &vi);
        b = model_of(8, &dg);
        if (extra == 0) {
            m = LOAD_OK(b);
            CHECK(m && m->graph->inputs[0].type.kind == OXT_SEQUENCE &&
                      m->graph->inputs[0].type.elem_type == OX_FLOAT,
                  "types nested 64 deep");
            ox_model_free(m);
            sb_free(&b);
        } else {
            EXPECT_ERR2(b, "graph.input[0] 'deep'", "types nested deeper than 64");
        }
    }
}

/* Every prefix and many single-byte corruptions of real models: an error or a model, never a
 * crash; a failure always carries a message naming the input. */
static void test_mutations(void) {
    static const char *const models[] = {"node/test_if",
                                         "node/test_loop11",
                                         "node/test_scan9_sum",
                                         "pytorch-converted/test_Conv2d",
                                         "simple/test_strnorm_model_monday_casesensintive_lower",
                                         "node/test_constant"};
    long n_runs = 0, n_ok = 0, n_bad_msg = 0;
    for (size_t k = 0; k < RLY_ARRAY_LEN(models); k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s/model.onnx", TESTDATA, models[k]);
        StrBuf full = {0};
        if (!read_all(path, &full)) {
            printf("skipped: mutations of %s (missing)\n", models[k]);
            continue;
        }
        for (size_t len = 0; len <= full.len; len++) {
            StrBuf pre = {0};
            sb_putn(&pre, full.data, len);
            void *copy;
            OxModel *m = load_copy(&pre, "mut.onnx", &copy);
            n_runs++;
            if (m) {
                n_ok++;
                CHECK(walk_graph(m->graph, NULL) >= 0, "%s: prefix %zu walks badly", models[k],
                      len);
            } else if (strncmp(g_err, "mut.onnx: ", 10) != 0) {
                n_bad_msg++;
            }
            ox_model_free(m);
            free(copy);
            sb_free(&pre);
        }
        static const uint8_t flips[] = {0xff, 0x80, 0x01, 0x7f};
        for (size_t pos = 0; pos < full.len; pos++) {
            for (size_t fl = 0; fl < RLY_ARRAY_LEN(flips); fl++) {
                StrBuf mu = {0};
                sb_putn(&mu, full.data, full.len);
                mu.data[pos] = (char)((uint8_t)mu.data[pos] ^ flips[fl]);
                void *copy;
                OxModel *m = load_copy(&mu, "mut.onnx", &copy);
                n_runs++;
                if (m) {
                    n_ok++;
                    CHECK(walk_graph(m->graph, NULL) >= 0, "%s: flip at %zu walks badly", models[k],
                          pos);
                } else if (strncmp(g_err, "mut.onnx: ", 10) != 0) {
                    n_bad_msg++;
                }
                ox_model_free(m);
                free(copy);
                sb_free(&mu);
            }
        }
        sb_free(&full);
    }
    CHECK(n_bad_msg == 0, "%ld failures without a proper message", n_bad_msg);
    printf("mutations: %ld inputs, %ld decoded, %ld rejected cleanly\n", n_runs, n_ok,
           n_runs - n_ok);
}

/* Allocation failures at every point: an "out of memory" error, no leak (ASan), then success. */
static void test_oom(void) {
    StrBuf t = {0};
    put_v(&t, 2, OX_INT64);
    static const int64_t v[] = {1, 2, 3};
    put_packed_v(&t, 7, v, 3);
    put_v(&t, 1, 3);
    StrBuf b = model_of_init(&t);
    StrBuf big = nested_graphs(20);
    int n_injected = 0;
    for (int which = 0; which < 2; which++) {
        const StrBuf *in = which ? &big : &b;
        for (long n = 0; n < 1000; n++) {
            sup_fail_after(n);
            OxModel *m = ox_load_bytes(in->data, in->len, "oom.onnx", g_err, sizeof g_err);
            sup_fail_after(-1);
            if (m != NULL) {
                ox_model_free(m);
                break;
            }
            n_injected++;
            CHECK(strcmp(g_err, "oom.onnx: out of memory") == 0, "OOM at %ld: %s", n, g_err);
        }
    }
    CHECK(n_injected >= 2, "fault injection never hit (%d)", n_injected);
    sb_free(&b);
    sb_free(&big);
}

/* ==== files: zero copy, external data ========================================================= */

static char g_tmp[256];

static void write_file(const char *name, const void *p, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_tmp, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot write %s", path);
    if (f == NULL) return;
    if (n) fwrite(p, 1, n, f);
    fclose(f);
}

static OxModel *load_tmp(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_tmp, name);
    return ox_load_file(path, g_err, sizeof g_err);
}

/* A model with a float raw_data initializer whose payload starts `misalign` bytes past an
 * 8-byte boundary of the file (padding goes into an unknown model field in front). */
static StrBuf aligned_model(int misalign, const float *vals, size_t n) {
    for (size_t pad = 0; pad < 16; pad++) {
        StrBuf m = {0}, g = {0}, t = {0};
        put_v(&m, 1, 8);
        char zeros[16] = {0};
        put_l(&m, 99, zeros, pad);
        put_v(&t, 1, n);
        put_v(&t, 2, OX_FLOAT);
        put_s(&t, 8, "w");
        put_tag(&t, 9, 2);
        put_varint(&t, n * 4);
        size_t payload_in_t = t.len;
        sb_putn(&t, (const char *)vals, n * 4);
        put_tag(&g, 5, 2);
        put_varint(&g, t.len);
        size_t t_in_g = g.len;
        sb_putn(&g, t.data, t.len);
        sb_free(&t);
        put_tag(&m, 7, 2);
        put_varint(&m, g.len);
        size_t off = m.len + t_in_g + payload_in_t;
        sb_putn(&m, g.data, g.len);
        sb_free(&g);
        if (off % 8 == (size_t)misalign) return m;
        sb_free(&m);
    }
    RLY_UNREACHABLE();
}

static void test_zero_copy(void) {
    const float vals[] = {1.5f, -2.0f, 3.25f, 4.0f, 5.0f};
    for (int mis = 0; mis < 2; mis++) {
        StrBuf m = aligned_model(mis ? 2 : 0, vals, 5);
        write_file("zc.onnx", m.data, m.len);
        sb_free(&m);
        OxModel *om = load_tmp("zc.onnx");
        CHECK(om != NULL, "%s", g_err);
        if (om == NULL) continue;
        const OxTensor *w = &om->graph->inits[0];
        if (mis == 0)
            CHECK(w->borrowed && in_range(w->data, om->map, om->map_len) &&
                      (uintptr_t)w->data % 4 == 0 && memcmp(w->data, vals, 20) == 0,
                  "aligned raw_data points into the mapping");
        else
            CHECK(!w->borrowed && !in_range(w->data, om->map, om->map_len) &&
                      (uintptr_t)w->data % 4 == 0 && memcmp(w->data, vals, 20) == 0,
                  "misaligned raw_data is copied");
        ox_model_free(om);
    }
    /* ox_load_bytes borrows too; ox_decode_tensor copies */
    StrBuf m = aligned_model(0, vals, 5);
    OxModel *om = ox_load_bytes(m.data, m.len, "mem", g_err, sizeof g_err);
    CHECK(om && om->graph->inits[0].borrowed && in_range(om->graph->inits[0].data, m.data, m.len),
          "ox_load_bytes borrows aligned raw_data");
    ox_model_free(om);
    sb_free(&m);
}

typedef struct ExtT {
    const char *name, *location;
    const char *offset, *length; /* NULL: absent */
    int64_t n_floats;
} ExtT;

static StrBuf ext_model(const ExtT *ts, size_t n) {
    StrBuf g = {0};
    for (size_t i = 0; i < n; i++) {
        StrBuf t = {0}, kv = {0};
        put_v(&t, 1, (uint64_t)ts[i].n_floats);
        put_v(&t, 2, OX_FLOAT);
        put_s(&t, 8, ts[i].name);
        put_v(&t, 14, 1);
        if (ts[i].location) {
            put_s(&kv, 1, "location");
            put_s(&kv, 2, ts[i].location);
            put_m(&t, 13, &kv);
        }
        if (ts[i].offset) {
            put_s(&kv, 1, "offset");
            put_s(&kv, 2, ts[i].offset);
            put_m(&t, 13, &kv);
        }
        if (ts[i].length) {
            put_s(&kv, 1, "length");
            put_s(&kv, 2, ts[i].length);
            put_m(&t, 13, &kv);
        }
        put_s(&kv, 1, "checksum");
        put_s(&kv, 2, "ignored");
        put_m(&t, 13, &kv);
        put_m(&g, 5, &t);
    }
    return model_of(8, &g);
}

static void expect_ext_err(const ExtT *t, const char *want, int line) {
    StrBuf m = ext_model(t, 1);
    write_file("bad.onnx", m.data, m.len);
    sb_free(&m);
    OxModel *om = load_tmp("bad.onnx");
    CHECK(om == NULL && strstr(g_err, want) != NULL && strstr(g_err, "graph.initializer[0]"),
          "line %d: expected '%s', got %s", line, want, om ? "a model" : g_err);
    ox_model_free(om);
}

static void test_external(void) {
    float w[64];
    for (int i = 0; i < 64; i++)
        w[i] = (float)i * 0.5f;
    write_file("weights.bin", w, sizeof w);
    char sub[600];
    snprintf(sub, sizeof sub, "%s/sub", g_tmp);
    mkdir(sub, 0700);
    write_file("sub/more.bin", w, 16);
    ExtT ok[] = {
        {"a", "weights.bin", "0", "16", 4},
        {"b", "weights.bin", "16", NULL, 60},   /* length: rest of the file */
        {"c", "weights.bin", "6", "8", 2},      /* misaligned: copied */
        {"d", "./sub/more.bin", NULL, NULL, 4}, /* no offset: 0 */
        {"e", "weights.bin", "256", "0", 0},    /* empty at the end */
    };
    StrBuf m = ext_model(ok, RLY_ARRAY_LEN(ok));
    write_file("model.onnx", m.data, m.len);
    sb_free(&m);
    OxModel *om = load_tmp("model.onnx");
    CHECK(om != NULL, "external model: %s", g_err);
    if (om != NULL) {
        const OxTensor *t = om->graph->inits;
        CHECK(t[0].borrowed && memcmp(t[0].data, w, 16) == 0 && t[0].nbytes == 16,
              "external a (borrowed)");
        CHECK(t[1].borrowed && memcmp(t[1].data, w + 4, 240) == 0 &&
                  (const char *)t[1].data == (const char *)t[0].data + 16,
              "external b: same mapping");
        CHECK(!t[2].borrowed && memcmp(t[2].data, (const char *)w + 6, 8) == 0,
              "external c (misaligned, copied)");
        CHECK(t[3].borrowed && memcmp(t[3].data, w, 16) == 0, "external d (subdirectory)");
        CHECK(t[4].count == 0 && t[4].data == NULL, "external e (empty)");
        CHECK(om->ext_maps != NULL, "external mappings recorded");
        CHECK(walk_graph(om->graph, om) == 0, "external model walks");
        ox_model_free(om);
    }
    /* the same model from memory cannot read external data */
    m = ext_model(ok, 1);
    om = ox_load_bytes(m.data, m.len, "mem.onnx", g_err, sizeof g_err);
    CHECK(om == NULL && strstr(g_err, "only be read from a model file"), "from memory: %s", g_err);
    sb_free(&m);

    char link[600];
    snprintf(link, sizeof link, "%s/escape.bin", g_tmp);
    CHECK(symlink("/etc/passwd", link) == 0, "symlink");
    ExtT bad[] = {
        {"x", "/etc/passwd", NULL, NULL, 1},
        {"x", "../weights.bin", NULL, NULL, 1},
        {"x", "sub/../../weights.bin", NULL, NULL, 1},
        {"x", "sub/..", NULL, NULL, 1},
        {"x", "escape.bin", NULL, "4", 1},
        {"x", "missing.bin", NULL, NULL, 1},
        {"x", "weights.bin", "257", NULL, 0},
        {"x", "weights.bin", "200", "100", 25},
        {"x", "weights.bin", "0", "12", 4},
        {"x", "weights.bin", "-4", "16", 4},
        {"x", "weights.bin", "0x10", "16", 4},
        {"x", "weights.bin", "0", "99999999999999999999999", 4},
        {"x", NULL, NULL, NULL, 4},
        {"x", "", NULL, NULL, 4},
        {"x", "sub", NULL, NULL, 4},
    };
    const char *want[] = {
        "is an absolute path",
        "leaves the model's directory",
        "leaves the model's directory",
        "leaves the model's directory",
        "resolves outside the model's directory",
        "No such file",
        "offset 257 is past the end",
        "range 200+100 is past the end",
        "has 12 bytes; the tensor needs 16",
        "offset '-4' is not a decimal number",
        "offset '0x10' is not a decimal number",
        "length '99999999999999999999999' is not a decimal number",
        "without a location",
        "without a location",
        "is not a regular file",
    };
    for (size_t i = 0; i < RLY_ARRAY_LEN(bad); i++)
        expect_ext_err(&bad[i], want[i], (int)i);
    /* external data together with inline data */
    StrBuf t = {0}, kv = {0};
    put_v(&t, 2, OX_FLOAT);
    put_v(&t, 14, 1);
    put_s(&kv, 1, "location");
    put_s(&kv, 2, "weights.bin");
    put_m(&t, 13, &kv);
    put_l(&t, 9, "1234", 4);
    StrBuf mb = model_of_init(&t);
    write_file("both.onnx", mb.data, mb.len);
    sb_free(&mb);
    om = load_tmp("both.onnx");
    CHECK(om == NULL && strstr(g_err, "both raw_data and external data"), "both: %s", g_err);
}

static void test_tensor_files(void) {
    Arena a;
    arena_init(&a);
    /* round trip of a hand-made tensor through encode/decode, all element types */
    static const int32_t types[] = {OX_FLOAT,  OX_UINT8,  OX_INT8,      OX_UINT16,     OX_INT16,
                                    OX_INT32,  OX_INT64,  OX_BOOL,      OX_FLOAT16,    OX_DOUBLE,
                                    OX_UINT32, OX_UINT64, OX_COMPLEX64, OX_COMPLEX128, OX_BFLOAT16};
    for (size_t i = 0; i < RLY_ARRAY_LEN(types); i++) {
        uint8_t data[6 * 16];
        for (size_t k = 0; k < sizeof data; k++)
            data[k] = (uint8_t)(k * 7 + i);
        if (types[i] == OX_BOOL)
            for (size_t k = 0; k < sizeof data; k++)
                data[k] &= 1;
        int64_t dims[] = {2, 3};
        OxTensor t = {.name = "t",
                      .data_type = types[i],
                      .ndim = 2,
                      .dims = dims,
                      .count = 6,
                      .data = data,
                      .nbytes = 6 * ox_elem_size(types[i])};
        StrBuf enc = {0};
        ox_encode_tensor(&t, &enc);
        char err[256];
        OxTensor *u = ox_decode_tensor(enc.data, enc.len, &a, err, sizeof err);
        CHECK(u && same_tensor(&t, u) && !u->borrowed, "round trip of %s: %s",
              ox_type_name(types[i]), u ? "differs" : err);
        sb_free(&enc);
    }
    OxStr strs[] = {{"a", 1}, {"", 0}, {"x\0y", 3}};
    int64_t d3 = 3;
    OxTensor st = {
        .name = "", .data_type = OX_STRING, .ndim = 1, .dims = &d3, .count = 3, .strings = strs};
    StrBuf enc = {0};
    ox_encode_tensor(&st, &enc);
    char err[256];
    OxTensor *u = ox_decode_tensor(enc.data, enc.len, &a, err, sizeof err);
    CHECK(u && same_tensor(&st, u), "string round trip");
    sb_free(&enc);
    u = ox_decode_tensor("\x08", 1, &a, err, sizeof err);
    CHECK(u == NULL && strcmp(err, "TensorProto: truncated varint (at byte 0)") == 0,
          "a truncated tensor: %s", err);
    u = ox_load_tensor_file("/nonexistent/input_0.pb", &a, err, sizeof err);
    CHECK(u == NULL && strstr(err, "/nonexistent/input_0.pb") != NULL, "missing file: %s", err);
    arena_free(&a);
}

/* ==== SequenceProto / OptionalProto values (test data) =========================================
 */

/* A TensorProto of n floats (dims (n)). */
static void put_float_tensor(StrBuf *b, uint32_t f, int n, float base) {
    StrBuf t = {0};
    put_v(&t, 1, (uint64_t)n);
    put_v(&t, 2, OX_FLOAT);
    for (int i = 0; i < n; i++)
        put_f32(&t, 4, base + (float)i);
    put_m(b, f, &t);
}

/* Decode b as kind; must fail with a message starting with the message name and holding want. */
static void expect_value_err_line(StrBuf *b, OxValueKind kind, int line, const char *want) {
    Arena a;
    arena_init(&a);
    char err[512] = "";
    void *copy = malloc(b->len ? b->len : 1);
    if (b->len) memcpy(copy, b->data, b->len);
    OxValue *v = ox_decode_value(copy, b->len, kind, &a, err, sizeof err);
    const char *prefix = kind == OXV_SEQUENCE ? "SequenceProto: " : "OptionalProto: ";
    CHECK(v == NULL && strncmp(err, prefix, strlen(prefix)) == 0 && strstr(err, want) != NULL,
          "line %d: expected an error with '%s', got %s: %s", line, want, v ? "a value" : "error",
          err);
    free(copy);
    arena_free(&a);
    sb_free(b);
}
#define EXPECT_VALUE_ERR(b, kind, w) expect_value_err_line(&(b), kind, __LINE__, w)

static void test_values(void) {
    Arena a;
    arena_init(&a);
    char err[512];
    /* a sequence of two tensors, named; elem_type given */
    StrBuf b = {0};
    put_s(&b, 1, "seq");
    put_v(&b, 2, OXE_TENSOR);
    put_float_tensor(&b, 3, 2, 1.0f);
    put_float_tensor(&b, 3, 3, 5.0f);
    OxValue *v = ox_decode_value(b.data, b.len, OXV_SEQUENCE, &a, err, sizeof err);
    CHECK(v && v->kind == OXV_SEQUENCE && v->n == 2 && v->elem_type == OXE_TENSOR &&
              strcmp(v->name, "seq") == 0 && v->items[1].kind == OXV_TENSOR &&
              v->items[1].tensor->count == 3 &&
              ((const float *)v->items[1].tensor->data)[2] == 7.0f,
          "sequence of tensors: %s", v ? "wrong contents" : err);
    CHECK(v && value_ok(v, 0), "sequence invariants");
    StrBuf enc = {0};
    if (v) ox_encode_value(v, &enc);
    OxValue *u = ox_decode_value(enc.data, enc.len, OXV_SEQUENCE, &a, err, sizeof err);
    CHECK(v && u && same_value(v, u), "sequence round trip: %s", u ? "differs" : err);
    sb_free(&enc);
    sb_free(&b);
    /* an empty sequence (elem_type only) and one whose elem_type is left 0 */
    put_v(&b, 2, OXE_TENSOR);
    v = ox_decode_value(b.data, b.len, OXV_SEQUENCE, &a, err, sizeof err);
    CHECK(v && v->n == 0 && v->elem_type == OXE_TENSOR, "empty sequence: %s", v ? "" : err);
    sb_free(&b);
    put_float_tensor(&b, 3, 1, 0.0f);
    v = ox_decode_value(b.data, b.len, OXV_SEQUENCE, &a, err, sizeof err);
    CHECK(v && v->n == 1 && v->elem_type == OXE_TENSOR, "elem_type from the values: %s",
          v ? "" : err);
    sb_free(&b);
    /* optionals: empty, of a tensor, of a sequence (nested) */
    put_s(&b, 1, "o");
    put_v(&b, 2, OXE_UNDEFINED);
    v = ox_decode_value(b.data, b.len, OXV_OPTIONAL, &a, err, sizeof err);
    CHECK(v && v->kind == OXV_OPTIONAL && v->n == 0 && strcmp(v->name, "o") == 0,
          "empty optional: %s", v ? "" : err);
    sb_free(&b);
    v = ox_decode_value("", 0, OXV_OPTIONAL, &a, err, sizeof err);
    CHECK(v && v->n == 0, "an empty message is an empty optional: %s", v ? "" : err);
    put_v(&b, 2, OXE_TENSOR);
    put_float_tensor(&b, 3, 4, 2.0f);
    v = ox_decode_value(b.data, b.len, OXV_OPTIONAL, &a, err, sizeof err);
    CHECK(v && v->n == 1 && v->items[0].kind == OXV_TENSOR && v->items[0].tensor->count == 4,
          "optional tensor: %s", v ? "" : err);
    sb_free(&b);
    StrBuf inner = {0};
    put_v(&inner, 2, OXE_TENSOR);
    put_float_tensor(&inner, 3, 1, 3.0f);
    put_v(&b, 2, OXE_SEQUENCE);
    put_m(&b, 5, &inner);
    v = ox_decode_value(b.data, b.len, OXV_OPTIONAL, &a, err, sizeof err);
    CHECK(v && v->n == 1 && v->items[0].kind == OXV_SEQUENCE && v->items[0].n == 1 &&
              value_ok(v, 0),
          "optional sequence: %s", v ? "" : err);
    if (v) ox_encode_value(v, &enc);
    u = ox_decode_value(enc.data, enc.len, OXV_OPTIONAL, &a, err, sizeof err);
    CHECK(v && u && same_value(v, u), "optional round trip: %s", u ? "differs" : err);
    sb_free(&enc);
    sb_free(&b);
    /* the tensor kind reads a TensorProto */
    put_v(&b, 1, 2);
    put_v(&b, 2, OX_FLOAT);
    put_f32(&b, 4, 1.0f);
    put_f32(&b, 4, 2.0f);
    v = ox_decode_value(b.data, b.len, OXV_TENSOR, &a, err, sizeof err);
    CHECK(v && v->kind == OXV_TENSOR && v->tensor->count == 2, "tensor value: %s", v ? "" : err);
    sb_free(&b);

    /* hostile and unsupported messages */
    put_v(&b, 2, OXE_TENSOR);
    put_l(&b, 4, "", 0);
    EXPECT_VALUE_ERR(b, OXV_SEQUENCE, "sparse tensor values are not supported");
    put_l(&b, 6, "", 0);
    EXPECT_VALUE_ERR(b, OXV_SEQUENCE, "map values are not supported");
    put_v(&b, 2, OXE_MAP);
    EXPECT_VALUE_ERR(b, OXV_OPTIONAL, "elem_type map is not supported");
    put_v(&b, 2, 9);
    EXPECT_VALUE_ERR(b, OXV_SEQUENCE, "elem_type 9 is not a known element kind");
    put_float_tensor(&b, 3, 1, 0.0f);
    put_l(&b, 5, "", 0);
    EXPECT_VALUE_ERR(b, OXV_SEQUENCE, "holds values of two kinds (tensor and sequence)");
    put_v(&b, 2, OXE_SEQUENCE);
    put_float_tensor(&b, 3, 1, 0.0f);
    EXPECT_VALUE_ERR(b, OXV_SEQUENCE, "elem_type is sequence but it holds tensor values");
    put_v(&b, 2, OXE_UNDEFINED);
    put_float_tensor(&b, 3, 1, 0.0f);
    EXPECT_VALUE_ERR(b, OXV_OPTIONAL, "elem_type is undefined (an empty optional) but it holds");
    put_v(&b, 2, OXE_TENSOR);
    EXPECT_VALUE_ERR(b, OXV_OPTIONAL, "elem_type is tensor but it holds no value");
    put_s(&b, 2, "x");
    EXPECT_VALUE_ERR(b, OXV_SEQUENCE, "field 2 (elem_type) has wire type length-delimited");
    put_v(&b, 3, 1);
    EXPECT_VALUE_ERR(b, OXV_SEQUENCE, "field 3 (tensor_values) has wire type varint");
    put_v(&b, 2, OXE_TENSOR);
    put_l(&b, 3, "\x08", 1); /* a truncated TensorProto inside */
    EXPECT_VALUE_ERR(b, OXV_SEQUENCE, "tensor_values[0]: truncated varint");
    put_l(&b, 3, "\x0a\x05", 2); /* a length past the end */
    EXPECT_VALUE_ERR(b, OXV_OPTIONAL, "");
    /* nesting: an optional of an optional of ... deeper than the limit */
    StrBuf deep = {0};
    for (int i = 0; i < OX_MAX_DEPTH + 2; i++) {
        StrBuf outer = {0};
        put_v(&outer, 2, i == 0 ? OXE_UNDEFINED : OXE_OPTIONAL);
        if (i > 0) put_m(&outer, 7, &deep);
        sb_free(&deep);
        deep = outer;
    }
    EXPECT_VALUE_ERR(deep, OXV_OPTIONAL, "values nested deeper than");
    /* files: the message starts with the path */
    v = ox_load_value_file("/nonexistent/input_0.pb", OXV_SEQUENCE, &a, err, sizeof err);
    CHECK(v == NULL && strstr(err, "/nonexistent/input_0.pb") == err, "missing file: %s", err);
    put_v(&b, 2, OXE_TENSOR);
    put_l(&b, 6, "", 0);
    write_file("seq.pb", b.data, b.len);
    char path[300];
    snprintf(path, sizeof path, "%s/seq.pb", g_tmp);
    v = ox_load_value_file(path, OXV_SEQUENCE, &a, err, sizeof err);
    CHECK(v == NULL && strncmp(err, path, strlen(path)) == 0 &&
              strstr(err, "map values are not supported"),
          "file error: %s", err);
    sb_free(&b);
    /* the real test data: a sequence, an optional sequence, an empty optional */
    static const char *const files[] = {
        "node/test_sequence_insert_at_back/test_data_set_0/input_0.pb",
        "node/test_optional_get_element_sequence/test_data_set_0/input_0.pb",
        "node/test_optional_has_element_empty/test_data_set_0/input_0.pb"};
    static const OxValueKind kinds[] = {OXV_SEQUENCE, OXV_OPTIONAL, OXV_OPTIONAL};
    static const uint32_t counts[] = {3, 1, 0};
    for (size_t i = 0; i < RLY_ARRAY_LEN(files); i++) {
        snprintf(path, sizeof path, "%s/%s", TESTDATA, files[i]);
        if (access(path, R_OK) != 0) continue;
        v = ox_load_value_file(path, kinds[i], &a, err, sizeof err);
        CHECK(v && v->n == counts[i] && value_ok(v, 0), "%s: %s", files[i], v ? "contents" : err);
    }
    arena_free(&a);
}

static void test_names(void) {
    CHECK(ox_elem_size(OX_FLOAT) == 4 && ox_elem_size(OX_BOOL) == 1 &&
              ox_elem_size(OX_COMPLEX128) == 16 && ox_elem_size(OX_BFLOAT16) == 2 &&
              ox_elem_size(OX_STRING) == 0 && ox_elem_size(OX_UNDEFINED) == 0 &&
              ox_elem_size(OX_INT4) == 1 && ox_elem_size(23) == 0 && ox_elem_size(-1) == 0,
          "ox_elem_size");
    CHECK(strcmp(ox_type_name(OX_FLOAT), "float") == 0 &&
              strcmp(ox_type_name(OX_BFLOAT16), "bfloat16") == 0 &&
              strcmp(ox_type_name(OX_INT64), "int64") == 0 &&
              strcmp(ox_type_name(1000), "UNKNOWN(1000)") == 0 &&
              strcmp(ox_type_name(-5), "UNKNOWN(-5)") == 0,
          "ox_type_name");
    char err[256];
    OxModel *m = ox_load_file("/nonexistent/model.onnx", err, sizeof err);
    CHECK(m == NULL && strstr(err, "/nonexistent/model.onnx: cannot open") == err, "%s", err);
    m = ox_load_file("/tmp", err, sizeof err);
    CHECK(m == NULL && strstr(err, "not a regular file"), "%s", err);
    write_file("empty.onnx", "", 0);
    m = load_tmp("empty.onnx");
    CHECK(m == NULL && strstr(g_err, "empty.onnx: no ir_version"), "%s", g_err);
}

static void remove_tree(const char *dir) {
    char **names = list_dir(dir);
    for (size_t i = 0; names && names[i]; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            remove_tree(p);
        else
            unlink(p);
    }
    free_list(names);
    rmdir(dir);
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/test_onnx_reader.XXXXXX");
    if (mkdtemp(g_tmp) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    test_names();
    test_fields();
    test_tensor_fields();
    test_hostile();
    test_depth();
    test_oom();
    test_zero_copy();
    test_external();
    test_tensor_files();
    test_values();
    test_facts();
    test_mutations();
    test_corpus();
    remove_tree(g_tmp);
    return check_summary();
}
