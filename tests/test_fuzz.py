"""Fuzzing the C++ parsers: mutated real lines must either parse or raise FormatError, never crash,
and what they parse to must be finite (labels in (0, 1]). Then the Python layer: side files,
compressed files, record lines and CLI arguments must raise nothing but FormatError.

Each fuzz runs in a child process so that a crash (segfault, abort) fails the test instead of
killing pytest; each runs for FUZZ_SECONDS (TCL_FUZZ_SECONDS).
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

FUZZ_SECONDS = float(os.environ.get("TCL_FUZZ_SECONDS", "20"))
HERE = Path(__file__).parent

# One mutation of a byte string, pasted into both fuzzing children (their source is text).
MUTATE = textwrap.dedent(
    r"""
    def mutate(b, m):
        pos, op, junk = m
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
        if op == "big":  # digits no float holds
            return b[:i] + b"9" * 400 + b[i:]
        return b[:i] + b[i + len(junk):]
    """
)

CHILD = textwrap.dedent(
    r"""
    import json, random, sys, time
    from pathlib import Path
    import numpy as np
    from hypothesis import given, settings, strategies as st, HealthCheck
    from tcl import _core, FormatError

    seeds = [l for l in Path(sys.argv[1]).read_text().splitlines() if l.strip()]
    traces = [json.dumps(json.loads(l)[1][0]) for l in seeds if l.startswith("[")]
    deadline = time.monotonic() + float(sys.argv[2])
    count = [0]

    def check_finite(arrays):
        for name, a in arrays.items():
            assert np.isfinite(a).all(), f"non-finite {name}"

    def feed(kind, text):
        data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
        src = (kind, "fuzz", data, "wl", b'["1","AA=="]\n') if kind == "metaschedule" else (kind, "fuzz", data, None, None)
        for errors in ("raise", "skip"):
            try:
                out = _core.featurize_files([src], errors, 2)
            except FormatError:
                continue
            check_finite({k: out[k] for k in ("seq", "workload", "label")})
            assert ((out["label"] > 0) & (out["label"] <= 1)).all(), out["label"]
        count[0] += 1

    def feed_trace(text):
        try:
            seq, _, workload = _core.featurize_traces([text], "", 1)
        except FormatError:
            return
        check_finite({"seq": seq, "workload": workload})

    mutation = st.tuples(st.integers(0, 10**6), st.sampled_from(["flip", "cut", "insert", "dup", "delete"]),
                         st.binary(min_size=1, max_size=8))

    MUTATE

    # Each call runs a fresh batch of examples; the loop below repeats it until the time is up.
    @settings(max_examples=300, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.integers(0, len(seeds) - 1), st.lists(mutation, min_size=1, max_size=4))
    def fuzz_lines(k, ms):
        line = seeds[k]
        data = line.encode()
        for m in ms:
            data = mutate(data, m)
        kind = "metaschedule" if line.startswith("[") else "ansor"
        feed(kind, data)
        if kind == "metaschedule" and traces:
            feed_trace(data.decode("utf-8", "replace"))

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
            data = mutate(data, m)
        feed_trace(data.decode("utf-8", "replace"))
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
).replace("\nMUTATE\n", "\n" + MUTATE)


def seed_lines() -> list[str]:
    """Real lines to mutate: stock-TVM database records, real Ansor logs, the hand-made records."""
    seeds = []
    for p in sorted((HERE / "fixtures" / "ms").glob("*/database_tuning_record.json")):
        seeds += p.read_text().splitlines()[:5]
    from test_features import ANSOR_DIRS

    for p in [q for d in ANSOR_DIRS for q in sorted(d.glob("*.json"))[:2] + sorted(d.glob("*.log"))[:1]]:
        seeds += p.read_text().splitlines()[:5]
    from test_features import HANDMADE

    return seeds + [json.dumps(r) for r in HANDMADE]


@pytest.mark.slow
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
    print(r.stdout.strip())  # the number of inputs tried (pytest -rP shows it)
    assert n > 500, r.stdout


# ---------------------------------------------------------------------------------------------
# The Python layer: side files, compressed files and CLI arguments. Anything but FormatError from
# the library (FileNotFoundError for a path that is not there), or from tcl.cli.main anything but a
# return of 0 or 2 or argparse's SystemExit(0 or 2), fails.

PY_CHILD = textwrap.dedent(
    r"""
    import contextlib, gzip, io, json, lzma, os, shutil, sys, time
    from pathlib import Path
    from hypothesis import given, settings, strategies as st, HealthCheck, Phase
    import tcl
    from tcl import FormatError
    from tcl.cli import dataset_info, main
    from tcl.hardware import hardware_vector, task_platform
    from tcl.records import read

    lines = [l for l in Path(sys.argv[1]).read_text().splitlines() if l.strip()]
    seeds = [l for l in lines if l.startswith("{")]
    deadline = time.monotonic() + float(sys.argv[2])
    fixture = Path(sys.argv[3])
    root = Path.cwd() / "py"
    count = [0]

    TASK = {"name": "mm", "shash": "1", "flops": 1e6, "weight": 2, "weights": {"resnet18": 2},
            "networks": ["resnet18"], "split": "test"}
    PLATFORM = {"cpu_model": "x", "host_cores": 2, "threads": 2, "base_clock_ghz": 2.5, "turbo_clock_ghz": None,
                "l1d_kb": 32, "l2_kb": 1024, "l3_kb": 32768, "memory_gb": 23.5, "host_vector_bits": 512,
                "target": '{"kind":"llvm","mcpu":"znver4"}', "target_kind": "llvm", "cores": 1,
                "vector_bits": 256, "sm_count": None, "max_shared_memory_per_block": 49152}

    db = root / "db"
    shutil.copytree(fixture, db)
    logs = root / "logs"
    logs.mkdir()
    (logs / "a.json").write_text("\n".join(seeds[:20]) + "\n")
    packed = root / "packed"
    packed.mkdir()
    ORIGINAL = {
        "xz-db": (packed / "db" / "database_tuning_record.json.xz", (fixture / "database_tuning_record.json").read_bytes(), lzma.compress),
        "xz-wl": (packed / "db" / "database_workload.json.xz", (fixture / "database_workload.json").read_bytes(), lzma.compress),
        "gz-db": (packed / "gzdb" / "database_tuning_record.json.gz", (fixture / "database_tuning_record.json").read_bytes(), gzip.compress),
        "gz-log": (packed / "log.json.gz", (logs / "a.json").read_bytes(), gzip.compress),
        "xz-log": (packed / "log.json.xz", (logs / "a.json").read_bytes(), lzma.compress),
    }
    for p, raw, pack in ORIGINAL.values():
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(pack(raw))
    (packed / "db" / "database_workload.json.xz").write_bytes(lzma.compress((fixture / "database_workload.json").read_bytes()))
    (packed / "gzdb" / "database_workload.json").write_bytes((fixture / "database_workload.json").read_bytes())
    ORIGINAL = {k: (p, pack(raw)) for k, (p, raw, pack) in ORIGINAL.items()}

    os.symlink(root / "loop_b", root / "loop_a")
    os.symlink(root / "loop_a", root / "loop_b")
    os.symlink(root / "missing", root / "dangling")
    (root / "garbage.pt").write_bytes(b"PK\x03\x04" + os.urandom(200))
    (root / "deep.json").write_text("[" * 20000 + "\n")
    (root / "\x1b[2Jctl\r.json").write_text('{"i": [["\x1b[31m", "\r"]]}\n')
    shutil.copytree(fixture, root / "bad_side")
    (root / "bad_side" / "task.json").write_text('{"weight": "heavy"}')
    model = root / "m.pt"
    try:
        import torch  # noqa: F401
        from tcl.architectures import build_model
        from tcl.checkpoint import save_checkpoint
        save_checkpoint(model, build_model("mamba", d_model=8), "mamba", {"data": []})
    except ImportError:
        model = None

    MUTATE

    mutation = st.tuples(st.integers(0, 10**6), st.sampled_from(["flip", "cut", "insert", "dup", "delete", "big"]),
                         st.binary(min_size=1, max_size=8))
    values = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.sampled_from([10**400, -10**400])
                          | st.floats() | st.text(max_size=6),
                          lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
                          max_leaves=8)
    SETTINGS = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck),
                    phases=[Phase.generate])

    def expect_format_error(f, *args, **kw):
        try:
            return f(*args, **kw)
        except FormatError:
            return None

    def side_file_content(seed, how, key, value, ms):
        if how == "field":  # one field of a valid file set to any JSON value
            return json.dumps({**seed, list(seed)[key % len(seed)]: value}).encode()
        if how == "whole":
            return json.dumps(value).encode()
        data = json.dumps(seed, indent=1).encode()
        for m in ms:
            data = mutate(data, m)
        return data

    @settings(max_examples=200, **SETTINGS)
    @given(st.sampled_from(["task.json", "platform.json"]), st.sampled_from(["field", "whole", "bytes"]),
           st.integers(0, 100), values, st.lists(mutation, min_size=1, max_size=4))
    def fuzz_side_files(name, how, key, value, ms):
        for n in ("task.json", "platform.json"):
            (db / n).unlink(missing_ok=True)
        (db / name).write_bytes(side_file_content(TASK if name == "task.json" else PLATFORM, how, key, value, ms))
        fs = expect_format_error(tcl.featurize, db)
        if fs is not None:
            for t in fs.tasks:
                hardware_vector(task_platform(t))
            json.dumps([t.__dict__ for t in fs.tasks])  # what FeatureSet.save writes
            dataset_info([db], fs)
        count[0] += 1

    @settings(max_examples=100, **SETTINGS)
    @given(st.sampled_from(sorted(ORIGINAL)), st.lists(mutation, min_size=1, max_size=3))
    def fuzz_compressed(kind, ms):
        path, data = ORIGINAL[kind]
        for m in ms:
            data = mutate(data, m)
        path.write_bytes(data)
        target = path if kind.endswith("log") else path.parent
        for errors in ("raise", "skip"):
            expect_format_error(read, target, errors=errors)
            expect_format_error(tcl.featurize, target, errors=errors)
        path.write_bytes(ORIGINAL[kind][1])
        count[0] += 1

    # tcl.records' Python parsers (the C++ ones are fuzzed above)
    line_db = root / "line_db"
    shutil.copytree(fixture, line_db)

    @settings(max_examples=200, **SETTINGS)
    @given(st.integers(0, len(lines) - 1), st.lists(mutation, min_size=1, max_size=4))
    def fuzz_record_lines(k, ms):
        data = lines[k].encode()
        for m in ms:
            data = mutate(data, m)
        if lines[k].startswith("["):
            path = line_db / "database_tuning_record.json"
            target = line_db
        else:
            path = target = root / "line.json"
        path.write_bytes(data + b"\n")
        for errors in ("raise", "skip"):
            expect_format_error(read, target, errors=errors)
        count[0] += 1

    out = str(root / "out.npz")
    BASES = [["info", str(db)], ["info", "--json", str(logs)], ["featurize", str(db), "--out", out],
             ["featurize", str(logs), str(packed), "--out", out, "--errors", "skip"]]
    if model is not None:
        BASES += [["eval", str(db), "--model", str(model), "--all"], ["eval", str(logs / "a.json"), "--model", str(model), "--json"]]
    TOKENS = [str(db), str(logs), str(logs / "a.json"), str(packed), str(root / "loop_a"), str(root / "dangling"),
              str(root / "nope.json"), str(root / "garbage.pt"), str(root / "out.npz"), str(root), str(db / "database_workload.json"),
              str(model or root), str(root / "deep.json"), str(root / "\x1b[2Jctl\r.json"), str(root / "bad_side"),
              "", "-", "--", "--json", "--all", "--errors", "skip", "raise", "bogus", "--threads", "0",
              "-1", "1", "2", "x", "--out", "--model", "\x1b[31m", "a\rb", "--help", "info", "featurize", "eval"]

    @settings(max_examples=40, **SETTINGS)
    @given(st.integers(0, len(BASES) - 1),
           st.lists(st.tuples(st.sampled_from(["drop", "insert", "replace", "swap"]), st.integers(0, 20),
                              st.integers(0, 20), st.sampled_from(TOKENS)), min_size=1, max_size=3))
    def fuzz_cli(base, edits):
        argv = list(BASES[base])
        for op, i, j, tok in edits:
            i, j = i % (len(argv) + 1), j % max(len(argv), 1)
            if op == "drop" and argv:
                del argv[j]
            elif op == "insert":
                argv.insert(i, tok)
            elif op == "replace" and argv:
                argv[j] = tok
            elif op == "swap" and argv:
                argv[i % len(argv)], argv[j] = argv[j], argv[i % len(argv)]
        err = io.StringIO()
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                rc = main(argv)
        except SystemExit as e:  # argparse: --help, or a usage error
            rc = e.code
            assert rc in (0, 2), (argv, rc)
        else:
            assert rc in (0, 2), (argv, rc)
            if rc == 2:
                last = err.getvalue().strip().splitlines()[-1]
                assert last.startswith("tcl ") and ": error: " in last, (argv, last)
                assert "\x1b" not in err.getvalue() and "\r" not in err.getvalue(), (argv, err.getvalue())
        count[0] += 1

    while time.monotonic() < deadline:
        fuzz_side_files()
        fuzz_compressed()
        fuzz_record_lines()
        fuzz_cli()
    print("fuzzed", count[0])
    """
).replace("\nMUTATE\n", "\n" + MUTATE)


@pytest.mark.slow
def test_fuzz_python_layer_raises_only_format_errors(tmp_path):
    seed_file = tmp_path / "seeds.txt"
    seed_file.write_text("\n".join(seed_lines()) + "\n")
    child = tmp_path / "fuzz_py_child.py"
    child.write_text(PY_CHILD)
    fixture = HERE / "fixtures" / "ms" / "matmul_128"
    r = subprocess.run([sys.executable, str(child), str(seed_file), str(FUZZ_SECONDS), str(fixture)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=FUZZ_SECONDS + 300, check=False)
    assert r.returncode == 0, f"an input raised something else than FormatError (rc {r.returncode}):\n{r.stderr[-4000:]}"
    n = int(r.stdout.split()[-1])
    print(r.stdout.strip())
    assert n > 100, r.stdout


def test_seed_features_are_finite():
    # Every seed (and the edge cases of test_features: out-of-range products, negative sizes,
    # extreme cost ratios) featurizes to finite numbers with labels in (0, 1].
    import numpy as np

    import tcl
    from test_features import MS_WORKLOAD, ansor_line, ms_line

    lines = seed_lines() + [
        ansor_line(key_extra="[1e200, 1e200], [-1, 3], -5, [1e300, 1e300, 0]"),
        ansor_line(costs="1e-300"), ansor_line(costs="1e8"), ansor_line(costs="0"),
        ms_line(decision="1e200, 1e200", shape="1e300, 1e300"), ms_line(run_secs="[-0.0]"),
    ]
    ansor = "\n".join(l for l in lines if not l.startswith("[")).encode()
    ms = "\n".join(l for l in lines if l.startswith("[")).encode()  # all of workload 0
    out = tcl._core.featurize_files([("ansor", "a", ansor, None, None),
                                     ("metaschedule", "m", ms, "w", MS_WORKLOAD.encode())], "raise", 1)
    assert len(out["label"]) >= 10  # the fixtures alone give 16 rows; the shared Ansor logs add more
    for k in ("seq", "workload", "label"):
        assert np.isfinite(out[k]).all(), k
    assert np.all(out["label"] > 0) and np.all(out["label"] <= 1)
    traces = [json.dumps(json.loads(l)[1][0]) for l in lines if l.startswith("[")]
    seq, _, workload = tcl.featurize_traces(traces)
    assert np.isfinite(seq).all() and np.isfinite(workload).all()
