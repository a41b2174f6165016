"""Export the models of the fusion test (tests/models/test_fusion.sh) with Debian's
python3-torch / python3-torchvision:

    /usr/bin/python3 tests/models/test_fusion.py OUTDIR [NAME...]

Writes OUTDIR/<name>.onnx and OUTDIR/<name>.npz (the input) for resnet18 and mobilenet_v2, or
for the torchvision models named (bench/bench_opt.c times `resnet50`). Weights are random, and,
unlike tests/models/export.py, the BatchNormalization nodes are kept: the exporter's eval-mode
peephole would fold each batch norm into its convolution, and the point here is that rly's -O3
pipeline does (SimplifyInference, FoldScaleAxis, FoldConstant) before FuseOps. The batch norms
get random statistics and affine parameters, so that none folds to an identity. Seeded: every
run writes the same models. Opset 13."""
import os
import sys

import numpy as np
import torch


def randomize_bn(model, gen):
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
            m.weight.data.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
            m.bias.data.copy_(torch.randn(c, generator=gen) * 0.1)


def export(model, name, outdir, gen):
    model.eval()
    with torch.no_grad():
        randomize_bn(model, gen)
        img = torch.randn(1, 3, 224, 224, generator=gen)
        path = os.path.join(outdir, name + ".onnx")
        torch.onnx.export(model, img, path, opset_version=13, input_names=["input"],
                          training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=True)
    np.savez(os.path.join(outdir, name + ".npz"), input=img.numpy())
    print("wrote", path)


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    import torchvision.models as tvm
    for name in sys.argv[2:] or ["resnet18", "mobilenet_v2"]:
        export(getattr(tvm, name)(), name, outdir, gen)


if __name__ == "__main__":
    main()
