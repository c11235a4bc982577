#!/usr/bin/env bash
# The fuzz test's child under AddressSanitizer + UBSan: builds _core with the sanitizers into
# $WORK, then feeds it mutated records for SECONDS (default 240). Not part of the pytest run (it
# needs a separate build); run it after changing the parsers:  bash tests/fuzz_asan.sh [SECONDS]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SECONDS_BUDGET=${1:-240}
WORK=${WORK:-$(mktemp -d)}
PY=${PYTHON:-python3}
cmake -S "$ROOT" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer" \
  -Dpybind11_DIR="$($PY -c 'import pybind11; print(pybind11.get_cmake_dir())')" \
  -DPython_EXECUTABLE="$(command -v $PY)" > "$WORK/cmake.log"
cmake --build "$WORK/build" > "$WORK/build.log"
mkdir -p "$WORK/shadow/tcl"
cp "$ROOT"/tcl/*.py "$WORK/shadow/tcl/"
cp "$WORK"/build/_core*.so "$WORK/shadow/tcl/"
cd "$WORK"
$PY - "$ROOT" <<'PYEOF'
import sys, textwrap
from pathlib import Path
root = Path(sys.argv[1])
sys.path.insert(0, str(root / "tests"))
import test_fuzz
Path("child.py").write_text(test_fuzz.CHILD)
Path("seeds.txt").write_text("\n".join(test_fuzz.seed_lines()) + "\n")
PYEOF
ASAN_OPTIONS=detect_leaks=0 LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)" \
  PYTHONPATH="$WORK/shadow" $PY child.py seeds.txt "$SECONDS_BUDGET"
