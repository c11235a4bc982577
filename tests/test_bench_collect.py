"""bench/collect.py's bookkeeping: the runs kept in `speedups` across invocations with the same
settings, and dropped when the settings change."""


from bench_module import load_bench

bench = load_bench("collect")

SETTINGS = {"network": "resnet18", "tasks": 16, "programs_per_task": 32,
            "after_settings": {"workers": 2, "measure_cpus": [1]}}


def _summary(before, after, failed=0, **settings):
    return {**SETTINGS, **settings, "programs_per_hour_before": before, "programs_per_hour": after,
            "speedup": round(after / before, 2), "runs": {"after": {"failed": failed}}}


def test_a_summary_without_a_list_counts_as_one_earlier_run():
    old = _summary(3000, 6000, failed=1)
    assert bench.earlier_speedups(old, SETTINGS) == [{"before": 3000, "after": 6000, "speedup": 2.0, "failed": 1}]


def test_runs_accumulate_with_the_same_settings_only():
    old = _summary(3000, 6000)
    old["speedups"] = [bench.speedup_entry(_summary(3000, 4500)), bench.speedup_entry(old)]
    assert [e["speedup"] for e in bench.earlier_speedups(old, SETTINGS)] == [1.5, 2.0]
    assert bench.earlier_speedups(old, {**SETTINGS, "tasks": 10}) == []
    assert bench.earlier_speedups({}, SETTINGS) == []  # no summary yet
