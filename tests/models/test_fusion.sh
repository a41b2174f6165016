#!/usr/bin/env bash
# test_fusion.sh TEST_FUSION WORKDIR - the groups FuseOps forms on ResNet-18 and MobileNetV2
# (issue 14's fusion test): tests/models/test_fusion.py exports them with Debian's python3-torch
# (random weights, batch norms kept) into WORKDIR/fusion once, then test_fusion (test_fusion.c)
# optimizes each at -O3, prints its groups, checks every convolution's tail and compares the
# -O3 and -O0 outputs.
set -eu
bin=$1
work=$2/fusion
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
if [ ! -f "$work/mobilenet_v2.onnx" ] || [ "$here/test_fusion.py" -nt "$work/mobilenet_v2.onnx" ]; then
  /usr/bin/python3 "$here/test_fusion.py" "$work" > "$work/export.log" 2>&1 || { cat "$work/export.log"; exit 1; }
fi
"$bin" "$work" resnet18 mobilenet_v2
