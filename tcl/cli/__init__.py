"""The `tcl` command: one module per group of subcommands, one function per subcommand to add its
parser and one to run it. Heavy dependencies (torch, tvm) are imported only by the subcommands that
run with them, so `tcl --help` stays fast.

An error a user can fix (bad data, a missing dependency, an unreadable path) prints one line
`tcl <command>: error: ...` on stderr and exits with status 2, as argparse does for bad options.
"""

from __future__ import annotations

import argparse
import sys

from ..atomic import check_writable
from ..errors import FormatError, MissingDependencyError, escape_controls
from . import datasets, distill, models, sample, tvm_commands
from .datasets import dataset_info

__all__ = ["build_parser", "dataset_info", "main"]

GROUPS = (datasets, models, sample, distill, tvm_commands)  # in --help order


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tcl", description="TCL: fast, portable cost models for tensor-program tuning in Apache TVM.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.add_parsers(sub)
    return p


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    try:
        if getattr(args, "out_is_file", False):  # a bad output path fails before any work
            check_writable(args.out)
        args.run(args)
    except (FormatError, MissingDependencyError, OSError) as e:  # OSError: unreadable paths
        print(f"tcl {args.command}: error: {escape_controls(str(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM where a command turns it into one
        print(f"tcl {args.command}: interrupted", file=sys.stderr)
        return 130
    return 0
