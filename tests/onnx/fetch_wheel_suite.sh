#!/usr/bin/env bash
# fetch_wheel_suite.sh [DIR] - the node suite of the onnx 1.17.0 wheel (pinned), for
# run_wheel_suite.sh: downloads the wheel with the project venv's pip (no install: the venv keeps
# its own onnx) and unpacks onnx/backend/test/data/node into DIR/node (default
# build/onnx-1.17, not committed). Does nothing when DIR/node is already there.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$root/build/onnx-1.17}
version=1.17.0
if [ -f "$dir/node/.complete-$version" ]; then exit 0; fi
mkdir -p "$dir/wheel"
pip="$root/.venv/bin/pip"
[ -x "$pip" ] || { echo "fetch_wheel_suite.sh: $pip not found (run scripts/setup.sh)" >&2; exit 1; }
whl=$(ls "$dir/wheel"/onnx-$version-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$whl" ]; then
  "$pip" download -q --disable-pip-version-check --no-deps "onnx==$version" -d "$dir/wheel"
  whl=$(ls "$dir/wheel"/onnx-$version-*.whl | head -n 1)
fi
rm -rf "$dir/node.tmp"
"$root/.venv/bin/python" - "$whl" "$dir/node.tmp" <<'PY'
import os, sys, zipfile
whl, out = sys.argv[1], sys.argv[2]
prefix = "onnx/backend/test/data/node/"
n = 0
with zipfile.ZipFile(whl) as z:
    for info in z.infolist():
        if not info.filename.startswith(prefix) or info.is_dir():
            continue
        rel = info.filename[len(prefix):]
        if rel.startswith("/") or ".." in rel.split("/"):
            sys.exit("unsafe path in wheel: " + info.filename)
        dst = os.path.join(out, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with z.open(info) as src, open(dst, "wb") as f:
            f.write(src.read())
        n += 1
if n == 0:
    sys.exit("no node suite in " + whl)
PY
rm -rf "$dir/node"
mv "$dir/node.tmp" "$dir/node"
touch "$dir/node/.complete-$version"
echo "onnx $version node suite: $(ls -d "$dir/node"/*/ | wc -l) cases in $dir/node"
