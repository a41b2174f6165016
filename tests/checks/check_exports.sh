#!/usr/bin/env bash
# The shared library exports only rly_* symbols (everything else is hidden).
set -u
lib="$1"
bad=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^rly_' | grep -v '^_' || true)
if [ -n "$bad" ]; then echo "non-rly symbols exported:"; echo "$bad"; echo "0 passed, 1 failed"; exit 1; fi
echo "1 passed, 0 failed"
