"""char_rnn_torch.py - the reference for test_models.py's char-RNN: PyTorch's nn.RNN (tanh) and a
linear layer with log_softmax on the weights and characters of an .npz, output to another .npz.
Run by Debian's python3 (python3-torch): `python3 char_rnn_torch.py IN.npz OUT.npz`."""
import sys

import numpy as np
import torch

z = np.load(sys.argv[1])
E, H = z["w_ih"].shape[1], z["w_ih"].shape[0]
rnn = torch.nn.RNN(E, H, nonlinearity="tanh")
with torch.no_grad():
    rnn.weight_ih_l0.copy_(torch.from_numpy(z["w_ih"]))
    rnn.weight_hh_l0.copy_(torch.from_numpy(z["w_hh"]))
    rnn.bias_ih_l0.copy_(torch.from_numpy(z["b"]))
    rnn.bias_hh_l0.zero_()
    x = torch.from_numpy(z["emb"])[torch.from_numpy(z["chars"]).long()].unsqueeze(1)  # (T, 1, E)
    _, h = rnn(x)
    out = torch.log_softmax(h[0] @ torch.from_numpy(z["w_out"]).T + torch.from_numpy(z["b_out"]), -1)
np.savez(sys.argv[2], out=out.numpy())
