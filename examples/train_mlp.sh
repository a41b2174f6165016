#!/usr/bin/env bash
# Train examples/mlp_loss.rly's perceptron with its gradient: rly grad, then the SGD loop of
# examples/mlp_train.rly through the interpreter. Prints (loss before, loss after).
# Usage: examples/train_mlp.sh [path/to/rly] [higher|first]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rly=${1:-$here/../build/release/rly}
mode=${2:-first}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$rly" grad "$here/mlp_loss.rly" --entry loss --name loss_grad --mode "$mode" -o "$tmp/grad.rly"
tail -n +2 "$here/mlp_train.rly" >>"$tmp/grad.rly"
"$rly" run "$tmp/grad.rly"
