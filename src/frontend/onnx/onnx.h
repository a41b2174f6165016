/* onnx.h - the ONNX model reader: a zero-copy protobuf wire decoder over an mmapped file.
 *
 * ox_load_file maps the file and decodes ModelProto into the structs below, in one arena owned by
 * the OxModel. Strings (names, op types, attribute strings) are NUL-terminated copies in the
 * arena; tensor payloads in raw_data are NOT copied: OxTensor.data points into the mapping when
 * the bytes are suitably aligned for the element type (copied into the arena otherwise), so a
 * model's weights stay in the page cache, not on the heap. Typed repeated fields (float_data,
 * int32_data, int64_data, ...), packed or unpacked, are decoded into one little-endian
 * element buffer of the tensor's own data type, so every consumer sees `data` the same way.
 *
 * Hostile input never crashes and never makes the reader allocate more than a small multiple of
 * the file size: lengths are checked against the enclosing message, wire types against the
 * field, element counts against dims, message nesting (subgraphs) against OX_MAX_DEPTH. Errors
 * say what and where: "model.onnx: graph.node[12] (name 'conv1'): attribute 'pads': ...". */
#ifndef RLY_ONNX_H
#define RLY_ONNX_H

#include "support/support.h"

#define OX_MAX_DEPTH 64 /* nesting of graphs in attributes (If inside Loop inside ...) */

/* TensorProto.DataType numbers. */
enum {
    OX_UNDEFINED = 0,
    OX_FLOAT = 1,
    OX_UINT8 = 2,
    OX_INT8 = 3,
    OX_UINT16 = 4,
    OX_INT16 = 5,
    OX_INT32 = 6,
    OX_INT64 = 7,
    OX_STRING = 8,
    OX_BOOL = 9,
    OX_FLOAT16 = 10,
    OX_DOUBLE = 11,
    OX_UINT32 = 12,
    OX_UINT64 = 13,
    OX_COMPLEX64 = 14,
    OX_COMPLEX128 = 15,
    OX_BFLOAT16 = 16,
    /* float8 and 4-bit types (opsets 19 and 21): Relay has no such dtypes; the importer carries
     * them emulated (float8 as float32, int4/uint4 as int8/uint8; docs/onnx.md) */
    OX_FLOAT8E4M3FN = 17,
    OX_FLOAT8E4M3FNUZ = 18,
    OX_FLOAT8E5M2 = 19,
    OX_FLOAT8E5M2FNUZ = 20,
    OX_UINT4 = 21,
    OX_INT4 = 22,
};

/* Is t one of the four float8 types / INT4 or UINT4? */
#define OX_IS_FLOAT8(t) ((t) >= OX_FLOAT8E4M3FN && (t) <= OX_FLOAT8E5M2FNUZ)
#define OX_IS_INT4(t) ((t) == OX_UINT4 || (t) == OX_INT4)

/* The value of a float8 byte b of float8 type t (OX_IS_FLOAT8), exactly, as a float (NaN for
 * the NaN codes, +-inf for e5m2's infinities). */
float ox_float8_value(int32_t t, uint8_t b);

/* AttributeProto.AttributeType numbers. */
enum {
    OXA_UNDEFINED = 0,
    OXA_FLOAT = 1,
    OXA_INT = 2,
    OXA_STRING = 3,
    OXA_TENSOR = 4,
    OXA_GRAPH = 5,
    OXA_FLOATS = 6,
    OXA_INTS = 7,
    OXA_STRINGS = 8,
    OXA_TENSORS = 9,
    OXA_GRAPHS = 10,
    OXA_SPARSE_TENSOR = 11,
    OXA_SPARSE_TENSORS = 12,
    OXA_TYPE_PROTO = 13,
    OXA_TYPE_PROTOS = 14,
};

typedef struct OxStr {
    const char *s; /* NUL-terminated (a copy in the arena); may contain NULs for bytes */
    size_t n;
} OxStr;

typedef struct OxTensor {
    const char *name; /* "" when unnamed */
    int32_t data_type;
    uint32_t ndim;
    int64_t *dims;
    int64_t count; /* product of dims (1 for a scalar) */
    /* Elements, little-endian, sup-style sizes (bool 1 byte, float16/bfloat16 2 bytes, ...);
     * count * element size bytes. NULL when count == 0. For OX_STRING: strings[] instead.
     * float8 types: the format's byte per element, as stored. INT4/UINT4 (packed two a byte in
     * the file, low nibble first) are unpacked: one byte per element, int4 sign-extended (an
     * int8), so data is never borrowed for them; the encoder packs them again. */
    const void *data;
    size_t nbytes;
    bool borrowed;  /* data points into the mapped file */
    OxStr *strings; /* OX_STRING only, count entries */
    const char *doc;
} OxTensor;

/* Element size in bytes of an ONNX data type in OxTensor.data (1 for the unpacked INT4/UINT4);
 * 0 for STRING/UNDEFINED/unknown and the other sub-byte types. */
size_t ox_elem_size(int32_t data_type);
/* "float", "int64", ... as ONNX names them ("UNKNOWN(23)" in a static buffer otherwise). */
const char *ox_type_name(int32_t data_type);

typedef struct OxDim {
    int64_t value;     /* >= 0 when known */
    const char *param; /* dim_param name, or NULL; value -1 when neither is set */
} OxDim;

typedef enum OxTypeKind {
    OXT_NONE = 0, /* no type given */
    OXT_TENSOR,
    OXT_SEQUENCE,
    OXT_MAP,
    OXT_OPTIONAL,
    OXT_SPARSE_TENSOR,
} OxTypeKind;

typedef struct OxType {
    uint8_t kind;      /* OxTypeKind */
    int32_t elem_type; /* tensor: data type; sequence/optional: of the element tensor if known */
    int32_t ndim;      /* -1 when the shape is absent (rank unknown) */
    OxDim *dims;
    struct OxType *elem; /* sequence/optional: the element type */
    /* map: elem_type is the key type and elem the value type; sparse tensor: as a tensor. */
} OxType;

typedef struct OxValueInfo {
    const char *name;
    OxType type;
    const char *doc;
} OxValueInfo;

struct OxGraph;

typedef struct OxAttr {
    const char *name;
    int32_t type; /* OXA_*; inferred from the fields set when the file leaves it 0 */
    float f;
    int64_t i;
    OxStr s;
    OxTensor *t;
    struct OxGraph *g;
    uint32_t n_floats, n_ints, n_strings, n_tensors, n_graphs;
    float *floats;
    int64_t *ints;
    OxStr *strings;
    OxTensor *tensors;
    struct OxGraph **graphs;
    const char *ref_attr_name; /* inside functions; NULL otherwise */
    /* Added: OXA_TYPE_PROTO / OXA_TYPE_PROTOS values (tp; type_protos). Sparse tensor values
     * (OXA_SPARSE_TENSOR(S)) are not decoded: only the type says they were there. */
    OxType *tp;
    uint32_t n_type_protos;
    OxType *type_protos;
} OxAttr;

typedef struct OxNode {
    uint32_t index;   /* position in its graph's node list */
    const char *name; /* "" when unnamed */
    const char *op_type;
    const char *domain; /* "" = ai.onnx */
    uint32_t n_inputs, n_outputs, n_attrs;
    const char **inputs; /* "" marks an omitted optional input */
    const char **outputs;
    OxAttr *attrs;
} OxNode;

typedef struct OxGraph {
    const char *name;
    uint32_t n_nodes, n_inits, n_inputs, n_outputs, n_value_infos, n_sparse_inits;
    OxNode *nodes;
    OxTensor *inits;
    OxValueInfo *inputs;
    OxValueInfo *outputs;
    OxValueInfo *value_infos;
} OxGraph;

typedef struct OxOpset {
    const char *domain; /* "" and "ai.onnx" both mean the default domain */
    int64_t version;
} OxOpset;

typedef struct OxModel {
    const char *path; /* as given to ox_load_file, or the name given to ox_load_bytes */
    int64_t ir_version;
    const char *producer_name, *producer_version, *domain, *doc;
    int64_t model_version;
    uint32_t n_opsets, n_functions;
    OxOpset *opsets;
    OxGraph *graph;
    /* private */
    Arena arena;
    void *map; /* the mapping (munmap on free), NULL for ox_load_bytes */
    size_t map_len;
    struct OxExtMap *ext_maps; /* external-data files mapped (munmap on free); list in arena */
} OxModel;

/* Map and decode a model. NULL on error with a message in err ("path: ..."). External-data
 * tensors (data_location = EXTERNAL) are mapped from files next to the model (a location that
 * escapes the model's directory, or a range past the end of its file, is an error). */
OxModel *ox_load_file(const char *path, char *err, size_t err_cap);
/* Decode from memory (borrowed; must outlive the model). External data is an error here. */
OxModel *ox_load_bytes(const void *data, size_t len, const char *name, char *err, size_t err_cap);
void ox_model_free(OxModel *m);
/* The opset version the model imports for a domain ("" = ai.onnx); 0 when not imported. */
int64_t ox_opset(const OxModel *m, const char *domain);

/* A serialized TensorProto file (ONNX test data: input_0.pb, output_0.pb). The tensor's memory
 * lives in *arena (copied, not mapped). NULL on error with a message. */
OxTensor *ox_load_tensor_file(const char *path, Arena *arena, char *err, size_t err_cap);
/* Decode a TensorProto from memory into arena (copies what it keeps). */
OxTensor *ox_decode_tensor(const void *data, size_t len, Arena *arena, char *err, size_t err_cap);

/* Encode a tensor as a TensorProto (raw_data form) into out (for `rly test` tools and tests). */
void ox_encode_tensor(const OxTensor *t, StrBuf *out);

/* ---- values of test data: TensorProto, SequenceProto, OptionalProto ----------------------------
 * A test-data file does not say which message it holds; the model's type of the value it feeds
 * does, so the caller names the kind. */

/* SequenceProto.DataType / OptionalProto.DataType numbers (the kind of the elements). */
enum {
    OXE_UNDEFINED = 0,
    OXE_TENSOR = 1,
    OXE_SPARSE_TENSOR = 2,
    OXE_SEQUENCE = 3,
    OXE_MAP = 4,
    OXE_OPTIONAL = 5,
};

typedef enum OxValueKind {
    OXV_TENSOR,   /* tensor */
    OXV_SEQUENCE, /* items[0..n): the elements, all of one kind */
    OXV_OPTIONAL, /* n == 0: empty (elem_type OXE_UNDEFINED); n == 1: items[0] is the value */
} OxValueKind;

typedef struct OxValue {
    uint8_t kind;      /* OxValueKind */
    const char *name;  /* "" when unnamed */
    int32_t elem_type; /* sequence/optional: OXE_* of the elements (of the values held when the
                        * file leaves it 0); OXE_UNDEFINED for an empty optional */
    OxTensor *tensor;  /* OXV_TENSOR */
    uint32_t n;
    struct OxValue *items;
} OxValue;

/* Decode a message of the given kind (a TensorProto, SequenceProto or OptionalProto) into arena
 * (copying what it keeps). Elements may be tensors, sequences or optionals, nested at most
 * OX_MAX_DEPTH deep; sparse tensors and maps are errors, as are values of more than one kind in
 * a sequence and an elem_type that disagrees with the values present. NULL on error with a
 * message that starts with "TensorProto: ", "SequenceProto: " or "OptionalProto: ". */
OxValue *ox_decode_value(const void *data, size_t len, OxValueKind kind, Arena *arena, char *err,
                         size_t err_cap);
/* The same from a file (messages start with the path). */
OxValue *ox_load_value_file(const char *path, OxValueKind kind, Arena *arena, char *err,
                            size_t err_cap);
/* Encode a value as its message into out (tensors in raw_data form). */
void ox_encode_value(const OxValue *v, StrBuf *out);

#endif /* RLY_ONNX_H */
