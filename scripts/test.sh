#!/usr/bin/env bash
# test.sh - every test, under AddressSanitizer + UndefinedBehaviorSanitizer, then once more in
# the release build (-O2 -DNDEBUG): bugs that only optimization shows, and the checks that
# sanitizers distort (peak RSS of the ONNX reader and writers).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset asan >/dev/null
cmake --build --preset asan
ctest --preset asan -j2 --output-on-failure --no-tests=error
cmake --preset release >/dev/null
cmake --build --preset release
ctest --preset release -j2 --output-on-failure --no-tests=error
# The Python package as a user installs it: `pip install .` into a fresh virtualenv.
bash scripts/test_pip.sh
