#!/usr/bin/env bash
# test.sh - every test, under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset asan >/dev/null
cmake --build --preset asan
ctest --preset asan -j2 --output-on-failure --no-tests=error
