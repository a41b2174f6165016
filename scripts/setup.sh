#!/usr/bin/env bash
# setup.sh - install what rly needs on Debian 12 (idempotent).
#   bash scripts/setup.sh           everything: build, tests, the Python tools (.venv)
#   bash scripts/setup.sh --build   only what building the library and the CLI needs
# Missing Debian packages are installed with apt-get: as root directly, otherwise through sudo;
# without either it names the packages to install and exits with status 1.
set -euo pipefail
cd "$(dirname "$0")/.."
only_build=0
case "${1:-}" in
  --build) only_build=1 ;;
  "") ;;
  *) echo "usage: bash scripts/setup.sh [--build]" >&2; exit 2 ;;
esac
# Packages to build the library and the CLI; then those the tests use.
build_pkgs=(cmake ninja-build gcc zlib1g-dev)
test_pkgs=(clang libcmocka-dev python3-venv pkg-config libonnx-testdata python3-torch python3-torchvision
           libedit-dev graphviz)
pkgs=("${build_pkgs[@]}")
[ "$only_build" -eq 1 ] || pkgs+=("${test_pkgs[@]}")
need=()
if command -v dpkg >/dev/null 2>&1; then
  for pkg in "${pkgs[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
else
  echo "setup.sh: no dpkg here (not Debian?): install the equivalents of: ${pkgs[*]}" >&2
  exit 1
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
  elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    echo "setup.sh: missing packages: ${need[*]}" >&2
    echo "setup.sh: not root and no sudo: as root, run  apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  "${SUDO[@]}" apt-get update -qq
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi
[ "$only_build" -eq 1 ] && exit 0
# Python tools for the tests (numpy references, pytest), in a project-local virtualenv.
# (onnxscript: tests/models/current_opsets.py writes a model at opset 21 with it)
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import numpy, pytest, onnx, onnxruntime, onnxscript' 2>/dev/null; then
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check 'numpy>=1.26,<3' 'pytest>=7' 'onnx>=1.14' 'onnxruntime>=1.17' 'onnxscript>=0.5'
fi
# helper opset (issue 18): the node suite of the onnx 1.17.0 wheel (pinned; unpacked into
# build/onnx-1.17 without installing it, so the venv keeps its own onnx) for CTest onnx_suite_1_17.
bash tests/onnx/fetch_wheel_suite.sh ||
  echo "setup.sh: could not fetch the onnx 1.17.0 node suite; CTest onnx_suite_1_17 fails until tests/onnx/fetch_wheel_suite.sh succeeds" >&2
