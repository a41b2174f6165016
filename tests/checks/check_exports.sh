#!/usr/bin/env bash
# check_exports.sh LIB [--runtime HEADER]
# The shared library exports only rly_* symbols (everything else is hidden). With --runtime,
# LIB is librly_runtime: it must export exactly the functions HEADER (rly_runtime.h) declares
# with RLY_API - each of them, and nothing of the compiler's API.
set -u
lib="$1"
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort)
bad=$(echo "$exported" | grep -v '^rly_' | grep -v '^_' | grep -v '^$' || true)
if [ -n "$bad" ]; then echo "non-rly symbols exported:"; echo "$bad"; echo "0 passed, 1 failed"; exit 1; fi
if [ "${2:-}" = "--runtime" ]; then
  header="$3"
  declared=$(grep -o '^RLY_API [^(]*(' "$header" | sed 's/.*[^a-z0-9_]\(rly_[a-z0-9_]*\)($/\1/' | sort -u)
  if [ -z "$declared" ]; then echo "no RLY_API functions found in $header"; echo "1 passed, 1 failed"; exit 1; fi
  missing=$(comm -23 <(echo "$declared") <(echo "$exported" | grep '^rly_'))
  extra=$(comm -13 <(echo "$declared") <(echo "$exported" | grep '^rly_'))
  if [ -n "$missing$extra" ]; then
    [ -n "$missing" ] && { echo "declared in $header but not exported:"; echo "$missing"; }
    [ -n "$extra" ] && { echo "exported but not in $header (compiler code in the runtime?):"; echo "$extra"; }
    echo "1 passed, 1 failed"; exit 1
  fi
  echo "2 passed, 0 failed"
  exit 0
fi
echo "1 passed, 0 failed"
