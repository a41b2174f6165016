#!/usr/bin/env bash
# demo.sh - the main job on its built-in default: build rly (release) and run `rly demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release
./build/release/rly demo
