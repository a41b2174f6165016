#!/usr/bin/env bash
# setup.sh - install what rly needs to build and test on Debian 12 (idempotent).
set -euo pipefail
need=()
for pkg in cmake ninja-build gcc clang libcmocka-dev zlib1g-dev python3-venv libonnx-testdata python3-torch python3-torchvision; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
# Python tools for the tests (numpy references, pytest), in a project-local virtualenv.
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import numpy, pytest, onnx, onnxruntime' 2>/dev/null; then
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check 'numpy>=1.26,<3' 'pytest>=7' 'onnx>=1.14' 'onnxruntime>=1.17'
fi
