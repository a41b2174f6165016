/* dlpack.h - the DLPack tensor descriptor (ABI version 0.8 layout), as rly's kernels and runtime
 * exchange tensors. Written from the DLPack specification: a tensor is a data pointer, a device,
 * a rank, an element type, a shape and optional strides (in elements; NULL = compact row-major),
 * plus a byte offset from `data` to the first element. */
#ifndef RLY_DLPACK_H
#define RLY_DLPACK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    kDLCPU = 1,
    kDLCUDA = 2,
    kDLCUDAHost = 3,
    kDLOpenCL = 4,
    kDLVulkan = 7,
    kDLMetal = 8,
    kDLVPI = 9,
    kDLROCM = 10,
    kDLROCMHost = 11,
    kDLExtDev = 12,
    kDLCUDAManaged = 13,
    kDLOneAPI = 14,
    kDLWebGPU = 15,
    kDLHexagon = 16,
} DLDeviceType;

typedef struct {
    DLDeviceType device_type;
    int32_t device_id;
} DLDevice;

typedef enum {
    kDLInt = 0,
    kDLUInt = 1,
    kDLFloat = 2,
    kDLOpaqueHandle = 3,
    kDLBfloat = 4,
    kDLComplex = 5,
    kDLBool = 6,
} DLDataTypeCode;

typedef struct {
    uint8_t code;   /* DLDataTypeCode */
    uint8_t bits;   /* bits per lane: 8, 16, 32, 64 */
    uint16_t lanes; /* 1 for scalars */
} DLDataType;

typedef struct DLTensor {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;       /* ndim entries */
    int64_t *strides;     /* ndim entries in elements, or NULL for compact row-major */
    uint64_t byte_offset; /* from data to the first element */
} DLTensor;

#ifdef __cplusplus
}
#endif
#endif /* RLY_DLPACK_H */
