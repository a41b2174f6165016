#!/usr/bin/env bash
# demo.sh - the main job on its built-in default: build the rly CLI (release) and run `rly demo`.
# Builds only the CLI target and prints only the demo's result after one status line; the set-up
# and build logs go to build/demo-*.log and are shown only when a step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build
step() { # step NAME CMD...: run CMD with its output in build/demo-NAME.log; show it on failure
  local log=build/demo-$1.log
  shift
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    echo "demo.sh: '$*' failed (log: $log)" >&2
    exit 1
  fi
}
step setup bash scripts/setup.sh --build
step configure cmake --preset release
step build cmake --build --preset release --target rly_cli
echo "built build/release/rly" >&2
./build/release/rly demo
