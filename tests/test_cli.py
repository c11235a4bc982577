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


def _subcommands(parser):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices
    return {}


def test_every_option_says_what_it_does_and_its_default():
    """...or when it is required; `tcl collect`'s come from tcl/tvm/collect_options.py."""
    from tcl.cli import build_parser

    missing = []
    for name, sub in _subcommands(build_parser()).items():
        for action in sub._actions:
            if not action.option_strings or action.help in (None, "==SUPPRESS==") or "-h" in action.option_strings:
                continue
            if action.required:  # e.g. --out: no default to state
                continue
            if "default" not in action.help and "required" not in action.help:
                missing.append(f"tcl {name} {action.option_strings[0]}")
    assert not missing, missing


def test_inputs_are_positional_and_models_are_given_with_model():
    from tcl.cli import build_parser

    subs = _subcommands(build_parser())
    for name in ("featurize", "info", "pack", "train", "eval", "sample", "distill"):
        positional = [a for a in subs[name]._actions if not a.option_strings]
        assert [a.dest for a in positional] == ["paths"], name
    for name in ("eval", "sample", "distill", "tune"):
        assert any("--model" in a.option_strings for a in subs[name]._actions), name
    args = build_parser().parse_args(["tune", "--network", "resnet18"])
    assert args.network == "resnet18" and args.minutes is None and args.trials is None and args.cache_flush
    assert not build_parser().parse_args(["tune", "--network", "resnet18", "--no-cache-flush"]).cache_flush


def test_errors_are_one_line_and_exit_2(tmp_path):
    missing = tmp_path / "nowhere"
    run = subprocess.run([sys.executable, "-m", "tcl.cli", "info", str(missing)], capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stderr.startswith("tcl info: error: ") and run.stderr.count("\n") == 1


def test_sample_defaults_are_the_sampling_config():
    from tcl.cli import build_parser
    from tcl.cli.sample import _config
    from tcl.sampling.sampler import SamplingConfig

    args = build_parser().parse_args(["sample", "d", "--out", "o"])
    assert _config(args, "mamba", None) == SamplingConfig()
