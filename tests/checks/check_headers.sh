#!/usr/bin/env bash
# Each public header compiles alone as pedantic C11 and as C++.
set -u
cd "$1"
pass=0; fail=0
for h in include/rly/*.h; do
  if echo "#include \"${h#include/}\"" | cc -std=c11 -pedantic -Wall -Wextra -Werror -Iinclude -x c -fsyntax-only - &&
     { ! command -v c++ >/dev/null || echo "#include \"${h#include/}\"" | c++ -std=c++11 -pedantic -Wall -Werror -Iinclude -x c++ -fsyntax-only -; }; then
    pass=$((pass+1)); else echo "FAIL $h"; fail=$((fail+1)); fi
done
echo "$pass passed, $fail failed"; [ $fail -eq 0 ]
