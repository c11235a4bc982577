"""The `tcl` command's surface: help without optional dependencies."""

import subprocess
import sys


def test_collect_help_needs_no_tvm():
    code = ("import sys, tcl.cli as c; p = c.build_parser(); "
            "assert not any(m.split('.')[0] in ('tvm', 'torch') for m in sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)
    out = subprocess.run([sys.executable, "-m", "tcl.cli", "collect", "--help"], capture_output=True, text=True,
                         check=True).stdout
    assert "--measure-cpus" in out and "default 200" in out and "wav2vec_features" in out
