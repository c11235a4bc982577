"""Argument types and the options several subcommands share, so each is spelled, checked and
documented the same way everywhere; options that set a config field take its default from the
config dataclass."""

from __future__ import annotations

import argparse
import dataclasses


def int_at_least(low: int):
    """An argparse type: a whole number >= low."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be {low} or more, got {value}")
        return value

    return parse


positive, non_negative = int_at_least(1), int_at_least(0)


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def fraction(text: str) -> float:
    """An argparse type: a number in [0, 1]."""
    value = _number(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {value}")
    return value


def positive_number(text: str) -> float:
    """An argparse type: a finite number above 0."""
    value = _number(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be above 0, got {value}")
    return value


def non_negative_number(text: str) -> float:
    """An argparse type: a finite number of at least 0."""
    value = _number(text)
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 or above, got {value}")
    return value


def json_object_file(path: str) -> dict:
    """An argparse type: a file holding one JSON object (e.g. --platform-info), read."""
    import json

    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise argparse.ArgumentTypeError(f"{path}: {e}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value


def named_checkpoint(text: str):
    """An argparse type: NAME=CHECKPOINT.pt of an existing file, as (name, Path)."""
    from pathlib import Path

    name, sep, path = text.partition("=")
    if not sep or not name or not Path(path).is_file():
        raise argparse.ArgumentTypeError(f"expected NAME=CHECKPOINT.pt of an existing file, got {text!r}")
    return name, Path(path)


def names(text: str) -> list[str]:
    """An argparse type: one name or a comma-separated list of them."""
    out = [x.strip() for x in text.split(",") if x.strip()]
    if not out:
        raise argparse.ArgumentTypeError("expected one name or a comma-separated list")
    return out


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the description's layout and ends each option's text with its default, unless the text
    already states one or there is none to state (None, False)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if not action.option_strings or "default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        return f"{text} (default: %(default)s)"


def with_default(help: str, default_text: str | None = None) -> str:
    """Help text ending in its default: `default_text`, or the option's own default value."""
    return f"{help} (default: {default_text if default_text is not None else '%(default)s'})"


def add_field(parser, flag: str, config, field: str, help: str, default_text: str | None = None, **kw):
    """An option that sets `field` of the dataclass `config`, its default read from there; a bool
    field becomes --flag / --no-flag."""
    default = {f.name: f for f in dataclasses.fields(config)}[field].default
    if isinstance(default, bool):
        kw.setdefault("action", argparse.BooleanOptionalAction)
        default_text = default_text or ("on" if default else "off")
    return parser.add_argument(flag, dest=field, default=default, help=with_default(help, default_text), **kw)


def config_from_args(config, args, **fixed):
    """An instance of the dataclass `config` from the parsed options named like its fields;
    `fixed` fields are set as given."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(config) if hasattr(args, f.name)}
    return config(**{**values, **fixed})


def add_inputs(parser, help: str = "dataset directories, MetaSchedule databases and/or Ansor log files"):
    parser.add_argument("paths", nargs="+", metavar="DATA", help=help)


def add_output(parser, help: str, required: bool = True, default=None):
    parser.add_argument("--out", required=required, default=default,
                        help=help if required else with_default(help, str(default)))


def add_threads(parser, what: str = "torch threads"):
    parser.add_argument("--threads", type=positive, default=None,
                        help=with_default(f"{what}; 1 on a machine others share", "torch's own choice"))


def add_seed(parser, what: str, default: int = 0):
    parser.add_argument("--seed", type=int, default=default, help=with_default(f"seed of {what}"))


def add_quiet(parser):
    parser.add_argument("--quiet", action="store_true", help="no progress bars (default: shown)")


def add_json(parser):
    parser.add_argument("--json", action="store_true", help="print one JSON object (default: a table)")
