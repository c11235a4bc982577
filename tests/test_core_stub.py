"""tcl/_core.pyi describes the extension as built: the same names, the same parameters."""

import ast
import re
from pathlib import Path

import tcl
from tcl import _core

STUB = Path(tcl.__file__).parent / "_core.pyi"


def stub_entries():
    tree = ast.parse(STUB.read_text())
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    constants = {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign)}
    return functions, constants


def bound_parameters(fn) -> list[tuple[str, bool]]:
    """(name, has a default) of each parameter, from the signature line pybind11 writes."""
    signature = fn.__doc__.split("\n", 1)[0]
    inside = signature[signature.index("(") + 1:signature.rindex(") ->")]
    depth, parts, cur = 0, [], ""
    for ch in inside:  # split at the commas outside brackets
        depth += ch in "[(" and 1 or ch in "])" and -1 or 0
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [(re.match(r"\s*(\w+)", p).group(1), "=" in p) for p in parts if p.strip()]


def test_the_stub_names_what_the_extension_has():
    functions, constants = stub_entries()
    public = {n for n in dir(_core) if not n.startswith("_")}
    assert set(functions) | constants == public
    for name in constants:
        assert not callable(getattr(_core, name)), name
    for name, node in functions.items():
        bound = bound_parameters(getattr(_core, name))
        args = node.args
        if args.posonlyargs:  # bound without names (arg0, ...): positional only in the stub
            assert [a for a, _ in bound] == [f"arg{i}" for i in range(len(args.posonlyargs))], name
            continue
        stub = [(a.arg, i >= len(args.args) - len(args.defaults)) for i, a in enumerate(args.args)]
        assert stub == bound, name
