/* import_misc.c - ONNX converters: Resize, vision and quantization operators. */
#include "frontend/onnx/import.h"

const ImpConv imp_conv_misc[] = {
    {NULL, NULL, 0, NULL},
};
