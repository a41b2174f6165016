"""Export random-weight models to ONNX with Debian's python3-torch / python3-torchvision.

    /usr/bin/python3 tests/models/export.py OUTDIR

Writes OUTDIR/<name>.onnx and OUTDIR/<name>.npz (the input, seeded) for: resnet18,
mobilenet_v2, squeezenet1_1 (torchvision architectures, random weights: torchvision's
pretrained weights are not packaged), an LSTM, a GRU and a small transformer encoder. Weights are
seeded, so every run writes the same models. Opset 13 (what torch 1.13 exports well)."""
import os
import sys

import numpy as np
import torch


def export(model, args, name, outdir, input_names, dynamic_axes=None):
    model.eval()
    path = os.path.join(outdir, name + ".onnx")
    with torch.no_grad():
        torch.onnx.export(model, args, path, opset_version=13, input_names=input_names,
                          output_names=None, dynamic_axes=dynamic_axes, do_constant_folding=True)
    arrays = {n: a.numpy() for n, a in zip(input_names, args if isinstance(args, tuple) else (args,))}
    np.savez(os.path.join(outdir, name + ".npz"), **arrays)
    print("wrote", path)


class Rnn(torch.nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(input_size=16, hidden_size=32, num_layers=2, batch_first=False,
                        bidirectional=True)
        self.head = torch.nn.Linear(64, 4)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y[-1])


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                                 dropout=0.0, batch_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, num_layers=2)
        self.emb = torch.nn.Linear(32, 64)

    def forward(self, x):
        return self.enc(self.emb(x))


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    torch.manual_seed(0)
    import torchvision.models as tvm
    img = torch.randn(1, 3, 224, 224)
    export(tvm.resnet18(), img, "resnet18", outdir, ["input"])
    export(tvm.mobilenet_v2(), img, "mobilenet_v2", outdir, ["input"])
    export(tvm.squeezenet1_1(), img, "squeezenet1_1", outdir, ["input"])
    seq = torch.randn(20, 3, 16)
    export(Rnn(torch.nn.LSTM), seq, "lstm", outdir, ["x"])
    export(Rnn(torch.nn.GRU), seq, "gru", outdir, ["x"])
    export(Encoder(), torch.randn(2, 10, 32), "transformer", outdir, ["x"])


if __name__ == "__main__":
    main()
