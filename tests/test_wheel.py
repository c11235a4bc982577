"""`pip wheel .` builds a wheel that installs into a fresh venv and works with numpy alone."""

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-w", str(dist)],
                   check=True, capture_output=True)
    wheels = list(dist.glob("tcl_tune-*.whl"))
    assert len(wheels) == 1, wheels
    import zipfile

    names = set(zipfile.ZipFile(wheels[0]).namelist())
    for shipped in ("tcl/data/default_model.onnx", "tcl/data/default_model.pt",  # the pretrained default
                    "tcl/_core.pyi", "tcl/py.typed"):  # the extension's types, for type checkers
        assert shipped in names, shipped
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    subprocess.run([py, "-m", "pip", "install", "-q", str(wheels[0])], check=True)
    code = (
        "import sys, tcl\n"
        "assert 'torch' not in sys.modules and 'tvm' not in sys.modules\n"
        f"fs = tcl.featurize({str(ROOT / 'tests' / 'fixtures' / 'ms')!r})\n"
        "assert len(fs) > 0 and fs.seq.shape[1:] == (tcl.SPEC.seq_len, tcl.SPEC.row_dim)\n"
        "print(len(fs))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([py, "-c", code], check=True, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert int(out.stdout.strip()) > 0
    # The console script is installed too.
    subprocess.run([env_dir / "bin" / "tcl", "featurize", "--help"], check=True, capture_output=True)
