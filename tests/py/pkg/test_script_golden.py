"""test_script_golden.py - @rly.script goldens: each golden_script/NAME.py defines a script
function `f`; its Relay text (f.text) must equal NAME.rly, and for err_NAME.py the ScriptError
(its message, with the folder's path left out) must equal err_NAME.err. RLY_UPDATE_GOLDEN=1
writes the expectations instead (review them in git)."""
import glob
import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "python"))
if "RLY_LIBRARY" not in os.environ and os.environ.get("RLY_BIN"):
    os.environ["RLY_LIBRARY"] = os.path.join(os.path.dirname(os.environ["RLY_BIN"]), "librly.so")
import rly  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden_script")
CASES = sorted(glob.glob(os.path.join(HERE, "*.py")))
UPDATE = os.environ.get("RLY_UPDATE_GOLDEN") == "1"


def _load(path):
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m.f


@pytest.mark.parametrize("path", CASES, ids=[os.path.basename(c)[:-3] for c in CASES])
def test_golden(path):
    name = os.path.basename(path)[:-3]
    is_err = name.startswith("err_")
    want_path = os.path.join(HERE, name + (".err" if is_err else ".rly"))
    f = _load(path)
    if is_err:
        with pytest.raises(rly.ScriptError) as err:
            f.module
        got = str(err.value).replace(HERE + os.sep, "") + "\n"
    else:
        got = f.text
    if UPDATE:
        with open(want_path, "w") as out:
            out.write(got)
        return
    with open(want_path) as g:
        assert got == g.read()
