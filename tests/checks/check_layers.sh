#!/usr/bin/env bash
# The dependency rule: support <- ir <- ops <- types <- {frontend, passes, eval, backend};
# support <- kernels <- runtime. runtime/, kernels/ and support/ never include the compiler.
set -u
cd "$1"
fail=0
check() { # dir, forbidden include pattern
  local hits
  hits=$(grep -rnE "#include \"($2)/" "src/$1" 2>/dev/null || true)
  if [ -n "$hits" ]; then echo "src/$1 must not include $2:"; echo "$hits"; fail=$((fail+1)); fi
}
check support 'ir|types|ops|frontend|passes|eval|backend|runtime|kernels|api'
check runtime 'ir|types|ops|frontend|passes|eval|backend|api'
check kernels 'ir|types|ops|frontend|passes|eval|backend|runtime|api'
check ir 'types|ops|frontend|passes|eval|backend|api'
check ops 'types|frontend|passes|eval|backend|api'
check types 'frontend|passes|eval|backend|api'
if [ $fail -eq 0 ]; then echo "6 passed, 0 failed"; else echo "$((6-fail)) passed, $fail failed"; exit 1; fi
