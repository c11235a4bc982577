"""Every bench script starts and explains itself, and bench/results holds only their summaries."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted((ROOT / "bench").glob("*.py"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_help_explains_every_option(script):
    out = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage:")
    options = [line.split()[0] for line in out.stdout.splitlines() if line.startswith("  --")]
    assert options, out.stdout
    # argparse puts an option's text after two or more spaces, or on the lines below, indented
    lines = out.stdout.splitlines() + [""]
    bare = [line.strip() for line, below in zip(lines, lines[1:])
            if line.startswith("  -") and not re.search(r"\S {2,}\S", line.strip())
            and not (below.startswith(" " * 8) and below.strip())]
    assert not bare, f"{script.name}: options without a text: {bare}"


def committed_results() -> list[str]:
    out = subprocess.run(["git", "ls-files", "bench/results"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("not a git checkout: what is committed is unknown")
    return [Path(p).name for p in out.stdout.split()]


def test_results_are_one_summary_per_script():
    names = committed_results()
    scripts = {p.stem for p in SCRIPTS}
    assert names and len(names) <= 25
    plots = []
    for name in names:
        stem = Path(name).stem
        assert not stem.endswith("_details"), f"{name}: per-run details are regenerated, not committed"
        owner = [s for s in scripts if stem == s or stem.startswith(s + "_")]
        assert owner, f"{name}: no bench script writes it"
        if name.endswith(".png"):
            plots.append(owner[0])
    assert len(plots) == len(set(plots)), "at most one plot per script"


def test_every_scripts_summary_can_be_committed():
    """What a script writes to bench/results by default is not ignored by git: docs/results.md cites
    those summaries, and an ignored one is silently never committed."""
    written = sorted({name for script in SCRIPTS
                      for name in re.findall(r'results" / "(\w+\.(?:json|png))"', script.read_text())})
    assert "network_tuning.json" in written
    out = subprocess.run(["git", "check-ignore", *[f"bench/results/{n}" for n in written]], cwd=ROOT,
                         capture_output=True, text=True)
    if out.returncode == 128:
        pytest.skip("not a git checkout")
    assert not out.stdout.strip(), f"ignored by .gitignore: {out.stdout.split()}"
