#!/usr/bin/env bash
# The parsers under AddressSanitizer + UndefinedBehaviorSanitizer: builds _core with both into
# $WORK, runs the parser tests against that build, then fuzzes it with mutated records for SECONDS
# (default 60). Any sanitizer report aborts the run and fails the script. Not part of the pytest
# run (it needs a separate build); CI runs it after the tests, and it is worth running after
# changing csrc/:  bash tests/fuzz_asan.sh [SECONDS]
# Needs cmake, ninja and pybind11 in the Python environment (PYTHON, default python3).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SECONDS_BUDGET=${1:-60}
PY=${PYTHON:-python3}
if [[ -z "${WORK:-}" ]]; then
  WORK=$(mktemp -d)
  trap 'status=$?; if [[ $status -eq 0 ]]; then rm -rf "$WORK"; else echo "fuzz_asan: logs kept in $WORK" >&2; fi' EXIT
fi

# float-cast-overflow is not part of GCC's "undefined" group: it catches a double converted to an
# integer type that cannot hold it. -fno-sanitize-recover makes every report fatal.
SAN="-fsanitize=address,undefined,float-cast-overflow"
SAN="$SAN -fno-sanitize-recover=undefined,float-cast-overflow -fno-omit-frame-pointer"
if ! cmake -S "$ROOT" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS="$SAN" \
    -Dpybind11_DIR="$($PY -c 'import pybind11; print(pybind11.get_cmake_dir())')" \
    -DPython_EXECUTABLE="$(command -v "$PY")" > "$WORK/cmake.log" 2>&1 ||
   ! cmake --build "$WORK/build" > "$WORK/build.log" 2>&1; then
  tail -n 40 "$WORK/cmake.log" "$WORK/build.log" 2>/dev/null >&2 || true
  exit 1
fi

# A copy of the package with the sanitized _core. sitecustomize drops the finders of an editable
# install, which would otherwise import the source tree (and its normal build) ahead of PYTHONPATH.
mkdir -p "$WORK/shadow"
rm -rf "$WORK/shadow/tcl"
cp -r "$ROOT/tcl" "$WORK/shadow/tcl"
find "$WORK/shadow/tcl" \( -name '_core*.so' -o -name __pycache__ \) -prune -exec rm -rf {} +
cp "$WORK"/build/_core*.so "$WORK/shadow/tcl/"
cat > "$WORK/shadow/sitecustomize.py" <<'PYEOF'
import sys
sys.meta_path[:] = [f for f in sys.meta_path if "ScikitBuild" not in type(f).__name__]
PYEOF

export PYTHONPATH="$WORK/shadow"
export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
export ASAN_OPTIONS=detect_leaks=0  # the interpreter itself keeps memory until exit
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
cd "$WORK"
$PY -c "import tcl._core as c, sys; sys.exit(not c.__file__.startswith('$WORK/shadow/'))" ||
  { echo "fuzz_asan: tcl._core is not the sanitized build" >&2; exit 1; }

# The parser tests (hand-made and malformed records, out-of-range numbers, the reference
# comparisons), then the fuzzer. --capture=sys: a report written to fd 2 as the process aborts
# must reach the terminal, not pytest's capture file.
t0=$(date +%s)
$PY -m pytest -q -p no:cacheprovider --capture=sys "$ROOT/tests/test_features.py" \
  "$ROOT/tests/test_fuzz.py::test_seed_features_are_finite"
t1=$(date +%s)
$PY - "$ROOT" <<'PYEOF'
import sys
from pathlib import Path
sys.path.insert(0, str(Path(sys.argv[1]) / "tests"))
import test_fuzz
Path("child.py").write_text(test_fuzz.CHILD)
Path("seeds.txt").write_text("\n".join(test_fuzz.seed_lines()) + "\n")
PYEOF
$PY child.py seeds.txt "$SECONDS_BUDGET"
echo "fuzz_asan: clean (tests $((t1 - t0)) s, fuzz $(($(date +%s) - t1)) s)"
