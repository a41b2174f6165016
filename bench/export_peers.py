"""Export the peer-benchmark models of issue 16 to ONNX with fixed random weights.

    /usr/bin/python3 bench/export_peers.py OUTDIR

Uses Debian's python3-torch / python3-torchvision (1.13, CPU). Writes OUTDIR/<name>.onnx and
OUTDIR/<name>.npz (the seeded input) for: resnet18, mobilenet_v2, squeezenet1_1, vgg16
(torchvision architectures, batch 1, 3x224x224), dqn (the Nature DQN: 4x84x84 frames, 18
actions), lstm and gru (one layer, sequence 32, input and hidden 256, batch 1) and bert_tiny (a
BERT-like post-norm encoder: 2 layers, hidden 128, 2 heads, feed-forward 512, sequence 128, GELU).
Every run writes the same models (seed 0). The torchvision models' biases and batch-norm
parameters are random too (trained_like). Opset 13. bench/bench_peers.py times them."""
import math
import os
import sys

import numpy as np
import torch


def export(model, args, name, outdir, input_names):
    model.eval()
    path = os.path.join(outdir, name + ".onnx")
    with torch.no_grad():
        torch.onnx.export(model, args, path, opset_version=13, input_names=input_names,
                          do_constant_folding=True)
    arrays = {n: a.numpy() for n, a in zip(input_names, args if isinstance(args, tuple) else (args,))}
    np.savez(os.path.join(outdir, name + ".npz"), **arrays)
    print("wrote", path)


class Dqn(torch.nn.Module):
    """Mnih et al. 2015: three convolutions and two dense layers over 4 stacked 84x84 frames."""

    def __init__(self, actions=18):
        super().__init__()
        self.c1 = torch.nn.Conv2d(4, 32, 8, stride=4)
        self.c2 = torch.nn.Conv2d(32, 64, 4, stride=2)
        self.c3 = torch.nn.Conv2d(64, 64, 3, stride=1)
        self.f1 = torch.nn.Linear(64 * 7 * 7, 512)
        self.f2 = torch.nn.Linear(512, actions)

    def forward(self, x):
        x = torch.relu(self.c1(x))
        x = torch.relu(self.c2(x))
        x = torch.relu(self.c3(x))
        x = torch.relu(self.f1(x.flatten(1)))
        return self.f2(x)


class Rnn(torch.nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(input_size=256, hidden_size=256, num_layers=1)

    def forward(self, x):
        y, _ = self.rnn(x)
        return y


class BertLayer(torch.nn.Module):
    """A post-norm encoder layer written out (torch 1.13's TransformerEncoderLayer takes a fused
    path in eval mode that its ONNX exporter cannot export)."""

    def __init__(self, d=128, heads=2, ff=512):
        super().__init__()
        self.heads = heads
        self.q = torch.nn.Linear(d, d)
        self.k = torch.nn.Linear(d, d)
        self.v = torch.nn.Linear(d, d)
        self.o = torch.nn.Linear(d, d)
        self.ln1 = torch.nn.LayerNorm(d, eps=1e-12)
        self.ln2 = torch.nn.LayerNorm(d, eps=1e-12)
        self.ff1 = torch.nn.Linear(d, ff)
        self.ff2 = torch.nn.Linear(ff, d)

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads

        def split(y):
            return y.reshape(b, t, h, d // h).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // h), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = self.ln1(x + self.o(y))
        return self.ln2(x + self.ff2(torch.nn.functional.gelu(self.ff1(x))))


class BertTiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(BertLayer(), BertLayer())

    def forward(self, x):
        return self.layers(x)


def trained_like(model):
    """Random values where torchvision's initialisation leaves constants: convolution and linear
    biases (zero), batch-norm scales and shifts (one, zero) and running statistics (zero mean,
    unit variance). Trained weights have none of these, and with them the exported models had
    all-zero biases (batch norm folds into a zero bias), so a runtime whose bias add is slow
    looked fast here. Seeded like everything else."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)) and m.bias is not None:
                m.bias.uniform_(-0.1, 0.1)
            elif isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    return model


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    torch.manual_seed(0)
    import torchvision.models as tvm
    img = torch.randn(1, 3, 224, 224)
    export(trained_like(tvm.resnet18()), img, "resnet18", outdir, ["input"])
    export(trained_like(tvm.mobilenet_v2()), img, "mobilenet_v2", outdir, ["input"])
    export(trained_like(tvm.squeezenet1_1()), img, "squeezenet1_1", outdir, ["input"])
    export(trained_like(tvm.vgg16()), img, "vgg16", outdir, ["input"])
    export(Dqn(), torch.rand(1, 4, 84, 84), "dqn", outdir, ["frames"])
    seq = torch.randn(32, 1, 256)
    export(Rnn(torch.nn.LSTM), seq, "lstm", outdir, ["x"])
    export(Rnn(torch.nn.GRU), seq, "gru", outdir, ["x"])
    export(BertTiny(), torch.randn(1, 128, 128), "bert_tiny", outdir, ["x"])


if __name__ == "__main__":
    main()
