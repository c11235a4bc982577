"""In-loop featurization from TVM objects: str(trace) parsed in C++ gives exactly the rows of the
database's JSON form of the same trace."""

import json

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
from tvm.s_tir import meta_schedule as ms  # noqa: E402

import tcl  # noqa: E402
from test_features import MS_FIXTURE  # noqa: E402

pytestmark = pytest.mark.tvm


def as_json_text(trace) -> str:
    # Trace.as_json() leaves IntImm/FloatImm leaves in the lists; their .value is the number.
    return json.dumps(trace.as_json(), default=lambda o: o.value)


@pytest.mark.parametrize("db_dir", sorted(d for d in MS_FIXTURE.iterdir() if d.is_dir()), ids=lambda d: d.name)
def test_python_text_equals_json_form(db_dir):
    records = ms.database.JSONDatabase(work_dir=str(db_dir)).get_all_tuning_records()
    cands = [r.as_measure_candidate() for r in records]
    args_info = json.dumps([a.as_json() for a in cands[0].args_info], default=lambda o: o.value)
    text = tcl.featurize_traces([str(c.sch.trace) for c in cands], args_info=args_info)
    js = tcl.featurize_traces([as_json_text(c.sch.trace) for c in cands], args_info=args_info)
    for a, b in zip(text, js):
        np.testing.assert_array_equal(a, b)
    # and both equal what the files give for the same programs (the database may reorder them)
    fs = tcl.featurize(db_dir)
    on_disk = {fs.seq[i].tobytes() for i in range(len(fs))}
    assert all(text[0][i].tobytes() in on_disk for i in range(len(cands)))


def test_bad_text_trace_raises():
    with pytest.raises(tcl.FormatError, match="trace 0: line 1: .*expected"):
        tcl.featurize_traces(["b0 = sch.get_sblock(name=\"x\", func_name="])
    with pytest.raises(tcl.FormatError, match="unbalanced"):
        tcl.featurize_traces(["sch.transform_layout(block=b0, index_map=lambda i: (i, [)"])


def test_text_skips_expressions_without_numbers():
    # An index_map lambda carries nothing the features use; the rest of the call still counts.
    seq, length, _ = tcl.featurize_traces([
        "sch.transform_layout(block=b0, buffer_index=1, index_map=lambda i, j: (j, i), pad_value=None)"])
    kinds, numeric = seq[0, 0, : tcl.SPEC.num_kinds], seq[0, 0, tcl.SPEC.num_kinds:]
    assert length[0] == 1 and tcl.SPEC.kind_names[int(kinds.argmax())] == "TransformLayout"
    # [n_outputs 0, attrs: buffer_index 1, pad_value None -> 0, inputs: b0 -> 0]
    np.testing.assert_allclose(numeric[:4], np.log1p([0, 1, 0, 0]).astype(np.float32))
