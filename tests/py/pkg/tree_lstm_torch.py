"""tree_lstm_torch.py - the reference for test_models.py's TreeLSTM: a child-sum TreeLSTM in
PyTorch eager over the complete binary tree of the features of an .npz (node i's children are
2i + 1 and 2i + 2, `depth` levels below the root), the root's (h, c) to another .npz. Run by
Debian's python3 (python3-torch)."""
import sys

import numpy as np
import torch

z = {k: torch.from_numpy(v) for k, v in np.load(sys.argv[1]).items()}
H = z["u_f"].shape[0]
depth = int(z["depth"])


def node(i, d):
    x = z["feats"][i].unsqueeze(0)
    kids = [node(2 * i + 1, d - 1), node(2 * i + 2, d - 1)] if d > 0 else []
    hs = sum((h for h, _ in kids), torch.zeros(1, H))
    fc = torch.zeros(1, H)
    for h, c in kids:
        f = torch.sigmoid(x @ z["w_f"].T + h @ z["u_f"].T + z["b_f"])
        fc = fc + f * c
    iou = x @ z["w_iou"].T + hs @ z["u_iou"].T + z["b_iou"]
    i_, o, u = iou.split(H, dim=1)
    c = torch.sigmoid(i_) * torch.tanh(u) + fc
    return torch.sigmoid(o) * torch.tanh(c), c


with torch.no_grad():
    h, c = node(0, depth)
np.savez(sys.argv[2], h=h.numpy(), c=c.numpy())
