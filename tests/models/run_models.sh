#!/usr/bin/env bash
# run_models.sh RLY WORKDIR [-O N] [--engine E] - real models through rly vs onnxruntime (issue 5's model
# check): random-weight ResNet-18, MobileNetV2, SqueezeNet 1.1, LSTM, GRU and a transformer
# encoder exported by Debian's python3-torch (tests/models/export.py), then the pretrained Silero
# VAD model from PyPI's silero-vad wheel over consecutive chunks (tests/models/silero.py).
# Exports and the wheel are cached in WORKDIR (a build folder). With -O N rly optimizes each
# model first (`rly run -O N`) and Silero runs 2 chunks instead of 6: the optimizer's
# differential test on the models (docs/passes.md), with the same tolerances. --engine E runs
# them on engine E (vm or interp; the VM's differential test, docs/vm.md).
set -eu
rly=$1
work=$2
opt=()
chunks=6
shift 2
while [ $# -ge 2 ]; do
  case "$1" in
    -O | --engine) opt+=("$1" "$2"); chunks=2; shift 2 ;;
    *) echo "run_models.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
py=$here/../../.venv/bin/python
mkdir -p "$work"
if [ ! -f "$work/models/transformer.onnx" ] || [ "$here/export.py" -nt "$work/models/transformer.onnx" ]; then
  /usr/bin/python3 "$here/export.py" "$work/models" > "$work/export.log" 2>&1 || { cat "$work/export.log"; exit 1; }
fi
"$py" "$here/compare.py" "${opt[@]}" "$rly" "$work/models"
# The pretrained Silero VAD model from PyPI's silero-vad wheel, over consecutive chunks.
if [ ! -f "$work/silero/silero_vad.onnx" ]; then
  mkdir -p "$work/silero"
  "$py" -m pip download -q --disable-pip-version-check --no-deps 'silero-vad==6.2.3' -d "$work/silero"
  "$py" - "$work/silero" <<'PY'
import glob, sys, zipfile
d = sys.argv[1]
with zipfile.ZipFile(glob.glob(d + "/silero_vad-*.whl")[0]) as z:
    open(d + "/silero_vad.onnx", "wb").write(z.read("silero_vad/data/silero_vad.onnx"))
PY
fi
"$py" "$here/silero.py" "${opt[@]}" "$rly" "$work/silero/silero_vad.onnx" "$chunks"
