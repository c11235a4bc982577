"""Type stub of the C++ extension (csrc/bindings.cc): the featurizer and the RDU sampler kernels.

Call it through tcl.features (featurize, featurize_traces) and tcl.sampling.kernels, which convert
and check their arguments; these are the raw entry points. Arrays come back as numpy arrays that own
their memory; the GIL is released while the C++ code runs.
"""

from typing import TypedDict

import numpy as np
import numpy.typing as npt

SPEC_VERSION: int  # changes whenever the features change meaning
SEQ_LEN: int  # L: rows per program
NUM_NUMERIC: int  # numeric slots per row, after the one-hot of the kind
WORKLOAD_DIM: int  # W: floats of the workload descriptor
KIND_NAMES: list[str]  # the one-hot vocabulary; index 0 = unknown kind
TAG_NAMES: list[str]  # operator tags of the workload descriptor

class TaskDict(TypedDict):
    workload: str  # Ansor workload key, or MetaSchedule structural hash
    target: str
    hardware_params: list[int]  # Ansor's 8 hardware params when present
    source: int  # index into the sources passed in
    failed: int  # failed measurements, not among the programs

class FeaturizedDict(TypedDict):
    seq: npt.NDArray[np.float32]  # [N, SEQ_LEN, row_dim]
    length: npt.NDArray[np.int32]  # [N]
    task: npt.NDArray[np.int32]  # [N] index into tasks
    cost: npt.NDArray[np.float64]  # [N] mean measured seconds
    label: npt.NDArray[np.float32]  # [N] best latency of the task / latency, in (0, 1]
    workload: npt.NDArray[np.float32]  # [N, WORKLOAD_DIM]
    source: npt.NDArray[np.int32]  # [N] index into the sources passed in
    line: npt.NDArray[np.int64]  # [N] line in that source
    tasks: list[TaskDict]
    skipped: int  # malformed lines skipped under errors="skip"
    truncated: int  # programs longer than SEQ_LEN
    errors: list[str]  # the first messages of the skipped lines

def featurize_files(
    sources: list[tuple[str, str, bytes, str | None, bytes | None]],
    errors: str = "raise",
    threads: int = 0,
) -> FeaturizedDict:
    """Featurize in-memory sources [(kind, path, data, workload_path, workload_data)]: kind "ansor"
    (a log; workload_path and workload_data None) or "metaschedule" (database_tuning_record.json
    and database_workload.json). errors: "raise" (tcl.errors.FormatError at the first bad line) or
    "skip". threads: 0 = all cores."""

def featurize_traces(
    traces: list[str], args_info: str = "", threads: int = 1
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int32], npt.NDArray[np.float32]]:
    """Featurize MetaSchedule trace JSON strings -> (seq [N, SEQ_LEN, row_dim], length [N],
    workload [N, WORKLOAD_DIM]); args_info: the task's argument info as JSON, or ""."""

def knn_mean_distance(
    x: npt.ArrayLike, group: npt.ArrayLike, k: int, threads: int = 0
) -> npt.NDArray[np.float32]:
    """Mean distance from each row of x [n, d] to its k nearest other rows of the same group
    (group: [n] ids >= 0); 0 for a group of one."""

def min_distance(x: npt.ArrayLike, y: npt.ArrayLike, threads: int = 0) -> npt.NDArray[np.float32]:
    """Distance from each row of x [n, d] to the nearest row of y [m, d] (inf when m == 0)."""

def greedy_select(
    x: npt.ArrayLike,
    group: npt.ArrayLike,
    budget: npt.ArrayLike,
    r: npt.ArrayLike,
    u: npt.ArrayLike,
    selected: npt.ArrayLike,
    wr: float,
    wd: float,
    wu: float,
    coverage_k: int = 0,
    threads: int = 0,
) -> npt.NDArray[np.int64]:
    """Greedy wr * R + wd * D + wu * u batch selection per group: budget[g] new rows of each group
    g, none of `selected` ([n] uint8). R is r, or with coverage_k > 0 the coverage gain on each
    group's kNN graph. Returns the picked row indices, group by group, in pick order."""

def string_code(s: str, /) -> float:
    """The small integer code of a string that carries meaning in a schedule (0 for others)."""

def pragma_value(s: str, /) -> float:
    """N of Ansor's "auto_unroll_max_step$N" pragma; -1 for other pragmas."""

def name_tags(s: str, /) -> int:
    """The operator tags (bits over TAG_NAMES) a workload or block name carries."""

