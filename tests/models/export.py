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


class Block(torch.nn.Module):
    """A pre-norm transformer encoder block written out (torch 1.13's nn.TransformerEncoderLayer
    takes a fused fast path in eval mode that its ONNX exporter cannot export)."""

    def __init__(self, d=64, heads=4, ff=128):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.ln1 = torch.nn.LayerNorm(d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.ff1 = torch.nn.Linear(d, ff)
        self.ff2 = torch.nn.Linear(ff, d)

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q = q.reshape(b, t, h, d // h).transpose(1, 2)
        k = k.reshape(b, t, h, d // h).transpose(1, 2)
        v = v.reshape(b, t, h, d // h).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-1, -2) / (d // h) ** 0.5, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.ff2(torch.nn.functional.gelu(self.ff1(self.ln2(x))))


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Linear(32, 64)
        self.blocks = torch.nn.Sequential(Block(), Block())

    def forward(self, x):
        return self.blocks(self.emb(x))


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
