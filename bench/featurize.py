"""Featurization speed, measured side by side in one run.

1. Ansor records per second: tcl.featurize (C++, 1 thread and all threads, from the files to the
   arrays) against the plain-Python reference featurizer (tcl/reference_featurizer.py) on the same
   logs (default: ../shared/data/ansor).
2. MetaSchedule candidates: microseconds per candidate from a MeasureCandidate to features, TCL
   (str(trace) -> C++) against TVM's own PerStoreFeature, on the same candidates, 1 thread each
   (needs apache-tvm).

Prints a table and writes bench/results/featurize.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("TVM_NUM_THREADS", "1")  # PerStoreFeature's thread pool: 1 thread, like ours
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # its idle threads spin on 2 cores and steal the timed one

ROOT = Path(__file__).resolve().parent.parent

import numpy as np  # noqa: E402

import tcl  # noqa: E402
from tcl.atomic import write_text  # noqa: E402
from tcl.cli.options import HelpFormatter  # noqa: E402


def timed(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def fresh_output(n):
    """Allocate a zeroed [n, L, D] float32 array and touch each 4 KiB page once: the least that
    any featurizer returning fresh arrays of this shape pays (page faults and the kernel's zeroing),
    before reading a byte of input."""
    seq = np.zeros((n, tcl.SPEC.seq_len, tcl.SPEC.row_dim), np.float32)
    seq.reshape(-1)[::1024] = 0.0


def bench_ansor(paths, repeats):
    from tcl.reference_featurizer import reference_featurize

    n = len(tcl.featurize(paths))
    cold = timed(lambda: tcl.featurize(paths, threads=1), 1)[0]
    one = timed(lambda: tcl.featurize(paths, threads=1), repeats)
    many = timed(lambda: tcl.featurize(paths), repeats)
    ref = timed(lambda: reference_featurize(paths), max(1, repeats // 3))
    alloc = timed(lambda: fresh_output(n), repeats)
    return {
        "records": n,
        "cpp_records_per_s_1thread": n / statistics.median(one),
        "cpp_records_per_s_all_threads": n / statistics.median(many),
        "cpp_records_per_s_1thread_first_call": n / cold,
        "python_records_per_s": n / statistics.median(ref),
        "output_allocation_records_per_s": n / statistics.median(alloc),
        "threads": os.cpu_count(),
        "seconds_1thread": one,
        "seconds_all_threads": many,
        "seconds_python": ref,
        "seconds_output_allocation": alloc,
    }


def bench_metaschedule(db_dirs, repeats):
    try:
        from tvm.s_tir import meta_schedule as ms
    except ImportError:
        return None
    out = {}
    for d in db_dirs:
        db = ms.database.JSONDatabase(work_dir=str(d))
        records = db.get_all_tuning_records()
        cands = [r.as_measure_candidate() for r in records]
        mod = records[0].workload.mod
        target = records[0].target
        ctx = ms.TuneContext(mod=mod, target=target, num_threads=1)
        extractor = ms.feature_extractor.PerStoreFeature()
        args_info = json.dumps([a.as_json() for a in cands[0].args_info], default=lambda o: o.value)

        def ours():
            tcl.featurize_traces([str(c.sch.trace) for c in cands], args_info=args_info, threads=1)

        def theirs():
            extractor.extract_from(ctx, cands)

        ours()
        theirs()
        t_ours, t_theirs = [], []
        for _ in range(repeats):  # interleaved so that both see the same machine load
            t_ours += timed(ours, 1)
            t_theirs += timed(theirs, 1)
        n = len(cands)
        out[Path(d).name] = {
            "candidates": n,
            "tcl_us_per_candidate": statistics.median(t_ours) / n * 1e6,
            "perstore_us_per_candidate": statistics.median(t_theirs) / n * 1e6,
        }
    tcl_us = statistics.mean(v["tcl_us_per_candidate"] for v in out.values())
    ps_us = statistics.mean(v["perstore_us_per_candidate"] for v in out.values())
    return {"workloads": out, "ms_tcl_us_per_candidate": tcl_us, "ms_perstore_us_per_candidate": ps_us}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--ansor", nargs="+", default=[str(ROOT.parent / "shared" / "data" / "ansor")],
                   help="Ansor logs or directories to featurize")
    p.add_argument("--ms", nargs="+", default=sorted(str(d) for d in (ROOT / "tests" / "fixtures" / "ms").iterdir() if d.is_dir()),
                   help="MetaSchedule database directories whose records become the candidates")
    p.add_argument("--repeats", type=int, default=7, help="timed repeats per path (the median is reported)")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "featurize.json"), help="the summary JSON")
    args = p.parse_args(argv)

    res = {"load_average_before": os.getloadavg()}
    a = bench_ansor(args.ansor, args.repeats)
    res.update({k: v for k, v in a.items()})
    res["cpp_vs_python_1thread"] = a["cpp_records_per_s_1thread"] / a["python_records_per_s"]
    m = bench_metaschedule(args.ms, args.repeats)
    if m is not None:
        res.update(m)
        res["perstore_vs_tcl"] = m["ms_perstore_us_per_candidate"] / m["ms_tcl_us_per_candidate"]
    res["load_average_after"] = os.getloadavg()

    print(f"Ansor records ({a['records']} from {', '.join(args.ansor)}):")
    print(f"  {'path':<28}{'records/s':>12}{'vs Python':>11}")
    for name, key in [("C++, 1 thread", "cpp_records_per_s_1thread"),
                      (f"C++, {a['threads']} threads", "cpp_records_per_s_all_threads"),
                      ("C++, 1 thread, first call", "cpp_records_per_s_1thread_first_call"),
                      ("Python reference", "python_records_per_s"),
                      ("fresh output array alone", "output_allocation_records_per_s")]:
        print(f"  {name:<28}{a[key]:>12,.0f}{a[key] / a['python_records_per_s']:>10.1f}x")
    if m is not None:
        print("MetaSchedule candidates, MeasureCandidate -> features, 1 thread (us per candidate):")
        print(f"  {'workload':<28}{'TCL':>8}{'PerStoreFeature':>17}{'ratio':>8}")
        for name, v in m["workloads"].items():
            r = v["perstore_us_per_candidate"] / v["tcl_us_per_candidate"]
            print(f"  {name:<28}{v['tcl_us_per_candidate']:>8.1f}{v['perstore_us_per_candidate']:>17.1f}{r:>7.1f}x")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_text(Path(args.out), json.dumps(res, indent=2) + "\n")
    print(f"load average before/after: {res['load_average_before'][0]:.2f} / {res['load_average_after'][0]:.2f}")
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
