/* fuzz_onnx.c - libFuzzer target for the ONNX reader (src/frontend/onnx/onnx.h).
 *
 * Every input is decoded as a ModelProto (ox_load_bytes), as a lone TensorProto
 * (ox_decode_tensor, what input_N.pb files are) and as a SequenceProto and an OptionalProto
 * (ox_decode_value, test data of sequence and optional inputs):
 * - a failed decode must return NULL with a message that starts with the input's name;
 * - a decoded model must be well-formed all the way down (every subgraph): counts match arrays,
 *   element counts match dims and byte sizes, borrowed payloads lie inside the input, every byte
 *   of every payload and string is readable (ASan checks the reads);
 * - every decoded tensor (initializers, attribute tensors, the lone tensor) survives
 *   ox_encode_tensor -> ox_decode_tensor unchanged, and re-encoding is a fixpoint.
 *
 * Built as the libFuzzer binary `fuzz_onnx` (the `fuzz` preset) and into `fuzz_replay_onnx`
 * (every preset), which runs it over tests/fuzz/corpus/onnx as a CTest test. */
#include <stdio.h>
#include <string.h>

#include "frontend/onnx/onnx.h"
#include "fuzz.h"

bool fuzz_keep_going;
size_t fuzz_n_failures;

static void violated(const char *what) {
    fprintf(stderr, "fuzz_onnx: invariant violated: %s\n", what);
    if (!fuzz_keep_going) abort();
    fuzz_n_failures++;
}

static const uint8_t *g_in;
static size_t g_in_len;
static volatile unsigned g_sink; /* payload bytes are summed here so that every one is read */

static void touch(const void *p, size_t n) {
    unsigned s = 0;
    for (size_t i = 0; i < n; i++)
        s += ((const uint8_t *)p)[i];
    g_sink += s;
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

static void check_tensor(const OxTensor *t, bool may_borrow) {
    if (t->name == NULL || (t->ndim > 0 && t->dims == NULL)) {
        violated("tensor without name or dims");
        return;
    }
    int64_t count = 1;
    for (uint32_t i = 0; i < t->ndim; i++) {
        if (t->dims[i] < 0) violated("negative dim accepted");
        count *= t->dims[i];
    }
    if (count != t->count) violated("count is not the product of dims");
    if (t->data_type == OX_STRING) {
        if (t->count > 0 && t->strings == NULL) violated("string tensor without strings");
        for (int64_t i = 0; t->strings && i < t->count; i++) {
            touch(t->strings[i].s, t->strings[i].n + 1);
            if (t->strings[i].s[t->strings[i].n] != '\0') violated("string not NUL-terminated");
        }
    } else {
        size_t es = ox_elem_size(t->data_type);
        if (es == 0) violated("tensor of a type without an element size");
        if (t->nbytes != (size_t)t->count * es) violated("nbytes != count * element size");
        if ((t->count > 0) != (t->data != NULL)) violated("data present iff count > 0");
        if (t->data) touch(t->data, t->nbytes);
        if (t->borrowed) {
            const uint8_t *p = t->data;
            if (!may_borrow) violated("a decoded lone tensor borrows the input");
            if (p < g_in || p + t->nbytes > g_in + g_in_len)
                violated("borrowed data outside input");
            if ((uintptr_t)p % (es >= 8 ? 8 : es) != 0 && t->data_type != OX_COMPLEX64)
                violated("borrowed data misaligned");
        }
    }
    /* encode -> decode round trip, and encoding is a fixpoint */
    Arena a;
    arena_init(&a);
    StrBuf e1 = {0}, e2 = {0};
    char err[512];
    ox_encode_tensor(t, &e1);
    OxTensor *u = ox_decode_tensor(e1.data, e1.len, &a, err, sizeof err);
    if (u == NULL) {
        violated("an encoded tensor does not decode");
    } else {
        if (!same_tensor(t, u)) violated("the round trip changed the tensor");
        ox_encode_tensor(u, &e2);
        if (e1.len != e2.len || memcmp(e1.data, e2.data, e1.len) != 0)
            violated("encoding is not a fixpoint");
    }
    sb_free(&e1);
    sb_free(&e2);
    arena_free(&a);
}

static void check_type(const OxType *t, int depth) {
    if (depth > OX_MAX_DEPTH + 1) violated("type nesting past the limit");
    if (t->ndim > 0 && t->dims == NULL) violated("type dims missing");
    for (int32_t i = 0; i < t->ndim; i++) {
        if (t->dims[i].value < -1) violated("dim value below -1");
        if (t->dims[i].param) touch(t->dims[i].param, strlen(t->dims[i].param));
    }
    if (t->elem) check_type(t->elem, depth + 1);
}

static void check_graph(const OxGraph *g, int depth) {
    if (depth > OX_MAX_DEPTH) violated("graph nesting past the limit");
    if (g == NULL || g->name == NULL) {
        violated("graph missing");
        return;
    }
    for (uint32_t i = 0; i < g->n_inits; i++)
        check_tensor(&g->inits[i], true);
    const OxValueInfo *lists[3] = {g->inputs, g->outputs, g->value_infos};
    uint32_t counts[3] = {g->n_inputs, g->n_outputs, g->n_value_infos};
    for (int l = 0; l < 3; l++)
        for (uint32_t i = 0; i < counts[l]; i++) {
            touch(lists[l][i].name, strlen(lists[l][i].name));
            check_type(&lists[l][i].type, 0);
        }
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const OxNode *n = &g->nodes[i];
        if (n->index != i || n->op_type == NULL || n->op_type[0] == '\0')
            violated("node index or op_type");
        for (uint32_t k = 0; k < n->n_inputs; k++)
            touch(n->inputs[k], strlen(n->inputs[k]));
        for (uint32_t k = 0; k < n->n_outputs; k++)
            touch(n->outputs[k], strlen(n->outputs[k]));
        for (uint32_t k = 0; k < n->n_attrs; k++) {
            const OxAttr *a = &n->attrs[k];
            if (a->type < 0 || a->type > OXA_TYPE_PROTOS) violated("attribute type out of range");
            if (a->name == NULL || a->name[0] == '\0') violated("attribute without a name");
            touch(a->ints, a->n_ints * sizeof(int64_t));
            touch(a->floats, a->n_floats * sizeof(float));
            touch(a->s.s, a->s.n);
            for (uint32_t j = 0; j < a->n_strings; j++)
                touch(a->strings[j].s, a->strings[j].n + 1);
            if (a->t) check_tensor(a->t, true);
            for (uint32_t j = 0; j < a->n_tensors; j++)
                check_tensor(&a->tensors[j], true);
            if (a->g) check_graph(a->g, depth + 1);
            for (uint32_t j = 0; j < a->n_graphs; j++)
                check_graph(a->graphs[j], depth + 1);
            if (a->tp) check_type(a->tp, 0);
            for (uint32_t j = 0; j < a->n_type_protos; j++)
                check_type(&a->type_protos[j], 0);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    g_in = data;
    g_in_len = size;
    char err[1024] = "";
    OxModel *m = ox_load_bytes(data, size, "fuzz.onnx", err, sizeof err);
    if (m == NULL) {
        if (strncmp(err, "fuzz.onnx: ", 11) != 0 || err[11] == '\0')
            violated("model: a failed decode without a proper message");
    } else {
        if (m->ir_version < 3 || m->graph == NULL) violated("model header");
        for (uint32_t i = 0; i < m->n_opsets; i++)
            if (m->opsets[i].domain == NULL) violated("opset domain");
        (void)ox_opset(m, "");
        check_graph(m->graph, 1);
        ox_model_free(m);
    }
    Arena a;
    arena_init(&a);
    err[0] = '\0';
    OxTensor *t = ox_decode_tensor(data, size, &a, err, sizeof err);
    if (t == NULL) {
        if (strncmp(err, "TensorProto: ", 13) != 0 || err[13] == '\0')
            violated("tensor: a failed decode without a proper message");
    } else {
        check_tensor(t, false);
    }
    /* the same bytes as a SequenceProto and an OptionalProto (test data of sequence/optional
     * inputs): a clear message or a value whose re-encoding decodes to the same encoding */
    static const OxValueKind kinds[2] = {OXV_SEQUENCE, OXV_OPTIONAL};
    static const char *const prefix[2] = {"SequenceProto: ", "OptionalProto: "};
    for (int k = 0; k < 2; k++) {
        err[0] = '\0';
        OxValue *v = ox_decode_value(data, size, kinds[k], &a, err, sizeof err);
        if (v == NULL) {
            if (strncmp(err, prefix[k], strlen(prefix[k])) != 0 || err[strlen(prefix[k])] == '\0')
                violated("value: a failed decode without a proper message");
            continue;
        }
        StrBuf e1 = {0}, e2 = {0};
        ox_encode_value(v, &e1);
        OxValue *w = ox_decode_value(e1.data, e1.len, kinds[k], &a, err, sizeof err);
        if (w == NULL) {
            violated("value: its encoding does not decode");
        } else {
            ox_encode_value(w, &e2);
            if (e1.len != e2.len || (e1.len && memcmp(e1.data, e2.data, e1.len) != 0))
                violated("value: re-encoding is not a fixpoint");
        }
        sb_free(&e1);
        sb_free(&e2);
    }
    arena_free(&a);
    return 0;
}
