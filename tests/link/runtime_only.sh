#!/usr/bin/env bash
# runtime_only.sh RLY RUNTIME_ONLY - librly_runtime alone runs what `rly compile` wrote.
# For each program below: `rly compile` (at -O0 and -O3) writes an .rlyx, `rly run --engine
# interp` writes the reference outputs, and runtime_only (linked only against librly_runtime,
# tests/link/runtime_only.c) loads the .rlyx, binds the same inputs through the session API,
# runs and compares. Closes with `N passed, N failed`.
set -u
RLY=${1:?usage: runtime_only.sh RLY RUNTIME_ONLY}
BIN=${2:?usage: runtime_only.sh RLY RUNTIME_ONLY}
T=$(mktemp -d "${TMPDIR:-/tmp}/rly_link.XXXXXX")
trap 'rm -rf "$T"' EXIT
pass=0
fail=0

"$BIN" gen "$T" || { echo "runtime_only gen failed"; echo "0 passed, 1 failed"; exit 1; }

# Two outputs: a fused elementwise chain with a broadcast, and a reduction.
cat >"$T/mlp.rly" <<'RLY'
#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(3), float32]) {
  %0 = add(%x, %y);
  %1 = nn.relu(%0);
  %2 = multiply(%1, 2f);
  (%2, sum(%x, axis=[1]))
}
RLY
# An output that is an input (the session must copy it, not hand out the caller's buffer).
cat >"$T/ident.rly" <<'RLY'
#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(3), float32]) {
  (%x, subtract(%x, %y))
}
RLY

for prog in mlp ident; do
  for opt in 0 3; do
    name="$prog -O$opt"
    if ! "$RLY" compile "$T/$prog.rly" -O$opt -o "$T/$prog$opt.rlyx" 2>"$T/err"; then
      echo "FAIL $name: rly compile: $(head -3 "$T/err")"; fail=$((fail + 1)); continue
    fi
    if ! "$RLY" run "$T/$prog.rly" --engine interp --input x="$T/x.npy" --input y="$T/y.npy" \
        --output "$T/$prog.ref.npz" 2>"$T/err"; then
      echo "FAIL $name: rly run --engine interp: $(head -3 "$T/err")"; fail=$((fail + 1)); continue
    fi
    if "$BIN" check "$T/$prog$opt.rlyx" "$T/$prog.ref.npz" x="$T/x.npy" y="$T/y.npy" >"$T/out" 2>&1; then
      pass=$((pass + 1))
    else
      echo "FAIL $name:"; sed 's/^/  /' "$T/out" | tail -20; fail=$((fail + 1))
    fi
  done
done
# A truncated or foreign file is an error, not a crash.
printf 'RLYX' >"$T/trunc.rlyx"
head -c 100 /dev/urandom >"$T/junk.rlyx"
for f in trunc junk missing; do
  "$BIN" check "$T/$f.rlyx" "$T/mlp.ref.npz" x="$T/x.npy" y="$T/y.npy" >"$T/out" 2>&1
  rc=$?
  if [ $rc -eq 1 ] && grep -q "FAIL load" "$T/out"; then pass=$((pass + 1)); else
    echo "FAIL bad file $f: exit status $rc"; sed 's/^/  /' "$T/out" | head -5; fail=$((fail + 1)); fi
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
