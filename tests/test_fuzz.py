"""Fuzzing the C++ parsers: mutated real lines must either parse or raise FormatError, never crash.

Runs in a child process so that a crash (segfault, abort) fails the test instead of killing pytest;
the time budget is fixed by FUZZ_SECONDS.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

FUZZ_SECONDS = float(os.environ.get("TCL_FUZZ_SECONDS", "20"))
HERE = Path(__file__).parent

CHILD = textwrap.dedent(
    r"""
    import json, random, sys, time
    from pathlib import Path
    from hypothesis import given, settings, strategies as st, HealthCheck
    from tcl import _core, FormatError

    seeds = [l for l in Path(sys.argv[1]).read_text().splitlines() if l.strip()]
    traces = [json.dumps(json.loads(l)[1][0]) for l in seeds if l.startswith("[")]
    deadline = time.monotonic() + float(sys.argv[2])
    count = [0]

    def feed(kind, text):
        data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
        src = (kind, "fuzz", data, "wl", b'["1","AA=="]\n') if kind == "metaschedule" else (kind, "fuzz", data, None, None)
        for errors in ("raise", "skip"):
            try:
                _core.featurize_files([src], errors, 2)
            except FormatError:
                pass
        count[0] += 1

    mutation = st.tuples(st.integers(0, 10**6), st.sampled_from(["flip", "cut", "insert", "dup", "delete"]),
                         st.binary(min_size=1, max_size=8))

    def mutate(line, m):
        pos, op, junk = m
        b = line.encode()
        i = pos % (len(b) + 1)
        if op == "flip" and b:
            j = i % len(b)
            return b[:j] + bytes([b[j] ^ junk[0]]) + b[j + 1:]
        if op == "cut":
            return b[:i]
        if op == "insert":
            return b[:i] + junk + b[i:]
        if op == "dup":
            return b[:i] + b[i:i + 64] + b[i:]
        return b[:i] + b[i + len(junk):]

    # Each call runs a fresh batch of examples; the loop below repeats it until the time is up.
    @settings(max_examples=300, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.integers(0, len(seeds) - 1), st.lists(mutation, min_size=1, max_size=4))
    def fuzz_lines(k, ms):
        line = seeds[k]
        data = line.encode()
        for m in ms:
            data = mutate(data.decode("latin-1"), m)
        kind = "metaschedule" if line.startswith("[") else "ansor"
        feed(kind, data)
        if kind == "metaschedule" and traces:
            try:
                _core.featurize_traces([data.decode("utf-8", "replace")], "", 1)
            except FormatError:
                pass

    # str(trace) text, the form the search loop featurizes
    TEXT = "\n".join([
        "# from tvm import s_tir",
        "def apply_trace(sch: s_tir.Schedule) -> None:",
        '  b0 = sch.get_sblock(name="C", func_name="main")',
        '  sch.annotate(block_or_loop=b0, ann_key="meta_schedule.tiling_structure", ann_val="SSRSRS")',
        "  l2, l3, l4 = sch.get_loops(block=b0)",
        "  v5, v6 = sch.sample_perfect_tile(loop=l2, n=2, max_innermost_factor=64, decision=[8, 16])",
        "  l7, l8 = sch.split(loop=l2, factors=[v5, v6], preserve_unit_iters=True, disable_predication=False)",
        "  v9 = sch.sample_categorical(candidates=[0, 16, 64, 512], probs=[0.25, 0.25, 0.25, 0.25], decision=3)",
        "  b10, = sch.get_child_blocks(b0)",
        "  sch.transform_layout(block=b0, buffer_index=1, index_map=lambda i, j: (j, i), pad_value=None)",
    ])

    @settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(mutation, min_size=1, max_size=6))
    def fuzz_text(ms):
        data = TEXT.encode()
        for m in ms:
            data = mutate(data.decode("latin-1"), m)
        try:
            _core.featurize_traces([data.decode("utf-8", "replace")], "", 1)
        except FormatError:
            pass
        count[0] += 1

    @settings(max_examples=200, deadline=None, database=None)
    @given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=3), c, max_size=3)))
    def fuzz_structures(value):
        feed("ansor", json.dumps({"i": value, "r": value}))
        feed("metaschedule", json.dumps([0, value]))

    feed("ansor", "[" * 100000)  # nesting far beyond the parser's limit
    feed("metaschedule", "[0,[[[" + "[" * 100000)
    fuzz_structures()
    while time.monotonic() < deadline:
        fuzz_lines()
        fuzz_text()
    print("fuzzed", count[0])
    """
)


def seed_lines() -> list[str]:
    """Real lines to mutate: stock-TVM database records, shared Ansor logs, the hand-made records."""
    seeds = []
    for p in sorted((HERE / "fixtures" / "ms").glob("*/database_tuning_record.json")):
        seeds += p.read_text().splitlines()[:5]
    shared = HERE.parent.parent / "shared" / "data" / "ansor"
    for p in sorted(shared.glob("*.json"))[:2] + sorted(shared.glob("*.log"))[:1]:
        seeds += p.read_text().splitlines()[:5]
    from test_features import HANDMADE

    return seeds + [json.dumps(r) for r in HANDMADE]


def test_fuzz_parsers_never_crash(tmp_path):
    seeds = seed_lines()
    seed_file = tmp_path / "seeds.txt"
    seed_file.write_text("\n".join(seeds) + "\n")
    child = tmp_path / "fuzz_child.py"
    child.write_text(CHILD)
    r = subprocess.run([sys.executable, str(child), str(seed_file), str(FUZZ_SECONDS)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=FUZZ_SECONDS + 120)
    assert r.returncode == 0, f"parser crashed or failed (rc {r.returncode}):\n{r.stderr[-3000:]}"
    n = int(r.stdout.split()[-1])
    assert n > 500, r.stdout
