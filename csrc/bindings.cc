// Python bindings of the native core: numpy arrays out without copies, the GIL released while
// parsing, and FormatError raised as tcl.errors.FormatError.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <limits>

#include "driver.h"
#include "featurize.h"
#include "rdu.h"

namespace py = pybind11;
using namespace tcl;

namespace {

// Hands a vector's buffer to numpy; the array owns it through a capsule.
template <class T>
py::array_t<T> to_numpy(std::vector<T>&& v, std::vector<py::ssize_t> shape) {
  auto* owned = new std::vector<T>(std::move(v));
  if (owned->empty()) owned->reserve(1);  // a valid data pointer even for zero programs
  py::capsule owner(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(shape, owned->data(), owner);
}

// Hands a FloatBuffer to numpy; the capsule unmaps it with the array.
py::array_t<float> adopt(FloatBuffer& buf, std::vector<py::ssize_t> shape) {
  auto* owned = new FloatBuffer(std::move(buf));
  py::capsule owner(owned, [](void* q) { delete static_cast<FloatBuffer*>(q); });
  return py::array_t<float>(shape, owned->data, owner);
}

// Input bytes may be any garbage: text handed back to Python replaces invalid UTF-8.
py::str text(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

py::list texts(const std::vector<std::string>& v) {
  py::list out;
  for (const auto& s : v) out.append(text(s));
  return out;
}

OnError parse_errors(const std::string& errors) {
  if (errors == "raise") return OnError::kRaise;
  if (errors == "skip") return OnError::kSkip;
  throw py::value_error("errors must be 'raise' or 'skip', not '" + errors + "'");
}

// sources: [(kind, path, data, workload_path, workload_data)], kind 'ansor' or 'metaschedule'.
py::dict featurize_files(const py::list& srcs, const std::string& errors, int threads) {
  std::vector<Source> sources;
  auto view = [](const py::handle& h) {
    if (h.is_none()) return std::string_view();
    char* data = nullptr;
    Py_ssize_t size = 0;
    if (PyBytes_AsStringAndSize(h.ptr(), &data, &size) != 0) throw py::error_already_set();
    return std::string_view(data, static_cast<size_t>(size));
  };
  for (const py::handle& item : srcs) {
    auto t = item.cast<py::tuple>();
    if (t.size() != 5) throw py::value_error("each source is (kind, path, data, workload_path, workload_data)");
    auto kind = t[0].cast<std::string>();
    if (kind != "ansor" && kind != "metaschedule")
      throw py::value_error("source kind must be 'ansor' or 'metaschedule', not '" + kind + "'");
    Source s;
    s.metaschedule = kind == "metaschedule";
    s.path = t[1].cast<std::string>();
    s.text = view(t[2]);  // the list keeps the bytes alive while the GIL is released
    s.workload_path = t[3].is_none() ? "" : t[3].cast<std::string>();
    s.workload_text = view(t[4]);
    sources.push_back(std::move(s));
  }
  OnError on_error = parse_errors(errors);
  Featurized f;
  std::vector<float> label;
  {
    py::gil_scoped_release release;
    f = featurize_sources(sources, on_error, threads);
    Batch& b = f.meta;
    // Label = best latency of the task / latency: normalised throughput in (0, 1]. Costs are in
    // (0, 1e9) (the parsers count anything else as failed); the floor keeps a ratio too small for
    // a float from becoming 0.
    std::vector<double> best(b.tasks.size(), std::numeric_limits<double>::infinity());
    for (size_t i = 0; i < b.size(); ++i)
      best[static_cast<size_t>(b.task[i])] = std::min(best[static_cast<size_t>(b.task[i])], b.cost[i]);
    label.resize(b.size());
    for (size_t i = 0; i < b.size(); ++i)
      label[i] = std::max(static_cast<float>(best[static_cast<size_t>(b.task[i])] / b.cost[i]),
                          std::numeric_limits<float>::denorm_min());
  }
  Batch& b = f.meta;
  const auto n = static_cast<py::ssize_t>(b.size());
  py::dict out;
  out["seq"] = adopt(f.seq, {n, kSeqLen, row_dim()});
  out["length"] = to_numpy(std::move(b.length), {n});
  out["task"] = to_numpy(std::move(b.task), {n});
  out["cost"] = to_numpy(std::move(b.cost), {n});
  out["label"] = to_numpy(std::move(label), {n});
  out["workload"] = adopt(f.workload, {n, kWorkloadDim});
  out["source"] = to_numpy(std::move(b.source), {n});
  out["line"] = to_numpy(std::move(b.line), {n});
  py::list tasks;
  for (const TaskInfo& t : b.tasks) {
    py::dict d;
    d["workload"] = text(t.workload);
    d["target"] = text(t.target);
    d["hardware_params"] = t.hardware_params;
    d["source"] = t.source;
    d["failed"] = t.failed;
    tasks.append(d);
  }
  out["tasks"] = tasks;
  out["skipped"] = b.skipped;
  out["truncated"] = b.truncated;
  out["errors"] = texts(b.errors);
  return out;
}

py::tuple featurize_trace_texts(const py::list& traces, const std::string& args_info, int threads) {
  std::vector<std::string_view> views;
  views.reserve(traces.size());
  for (const py::handle& h : traces) {
    if (!PyUnicode_Check(h.ptr())) throw py::type_error("traces must be a list of str (trace JSON)");
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(h.ptr(), &size);  // cached by the str object
    if (!data) throw py::error_already_set();
    views.emplace_back(data, static_cast<size_t>(size));
  }
  const auto n = static_cast<py::ssize_t>(views.size());
  py::array_t<float> seq({n, static_cast<py::ssize_t>(kSeqLen), static_cast<py::ssize_t>(row_dim())});
  py::array_t<int32_t> length(n);
  py::array_t<float> workload({n, static_cast<py::ssize_t>(kWorkloadDim)});
  float* s = seq.mutable_data();
  int32_t* l = length.mutable_data();
  float* w = workload.mutable_data();
  {
    py::gil_scoped_release release;
    featurize_traces(views, args_info, s, l, w, threads);
  }
  return py::make_tuple(seq, length, workload);
}

using F32 = py::array_t<float, py::array::c_style | py::array::forcecast>;
using I32 = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;
using I64 = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
using U8 = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>;

int check_rows(const F32& x, const char* name) {
  if (x.ndim() != 2) throw py::value_error(std::string(name) + " must be a 2-D array [n, d]");
  return static_cast<int>(x.shape(1));
}

void check_len(py::ssize_t got, py::ssize_t n, const char* name) {
  if (got != n) throw py::value_error(std::string(name) + " must have one entry per row of x");
}

py::array_t<float> knn_mean_distance_py(const F32& x, const I32& group, int k, int threads) {
  int d = check_rows(x, "x");
  py::ssize_t n = x.shape(0);
  check_len(group.size(), n, "group");
  py::array_t<float> out(n);
  const float* xp = x.data();
  const int32_t* gp = group.data();
  float* op = out.mutable_data();
  {
    py::gil_scoped_release release;
    knn_mean_distance(xp, n, d, gp, k, threads, op);
  }
  return out;
}

py::array_t<float> min_distance_py(const F32& x, const F32& y, int threads) {
  int d = check_rows(x, "x");
  if (check_rows(y, "y") != d) throw py::value_error("x and y must have the same width");
  py::array_t<float> out(x.shape(0));
  const float* xp = x.data();
  const float* yp = y.data();
  float* op = out.mutable_data();
  py::ssize_t n = x.shape(0), m = y.shape(0);
  {
    py::gil_scoped_release release;
    min_distance(xp, n, yp, m, d, threads, op);
  }
  return out;
}

py::array_t<int64_t> greedy_select_py(const F32& x, const I32& group, const I64& budget, const F32& r,
                                      const F32& u, const U8& selected, float wr, float wd, float wu,
                                      int coverage_k, int threads) {
  int d = check_rows(x, "x");
  py::ssize_t n = x.shape(0);
  check_len(group.size(), n, "group");
  check_len(r.size(), n, "r");
  check_len(u.size(), n, "u");
  check_len(selected.size(), n, "selected");
  std::vector<int64_t> picks;
  {
    py::gil_scoped_release release;
    picks = greedy_select(x.data(), n, d, group.data(), budget.data(), budget.size(), r.data(),
                          u.data(), selected.data(), wr, wd, wu, coverage_k, threads);
  }
  auto m = static_cast<py::ssize_t>(picks.size());
  return to_numpy(std::move(picks), {m});
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "TCL native core: schedule-trajectory featurization";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const FormatError& e) {
      py::object cls = py::module_::import("tcl.errors").attr("FormatError");
      PyErr_SetObject(cls.ptr(), text(e.what()).ptr());
    }
  });
  m.attr("SPEC_VERSION") = kSpecVersion;
  m.attr("SEQ_LEN") = kSeqLen;
  m.attr("NUM_NUMERIC") = kNumNumeric;
  m.attr("WORKLOAD_DIM") = kWorkloadDim;
  m.attr("KIND_NAMES") = kind_names();
  m.attr("TAG_NAMES") = tag_names();
  m.def("featurize_files", &featurize_files, py::arg("sources"), py::arg("errors") = "raise",
        py::arg("threads") = 0,
        "Featurize in-memory sources [(kind, path, data, workload_path, workload_data)].");
  m.def("featurize_traces", &featurize_trace_texts, py::arg("traces"), py::arg("args_info") = "",
        py::arg("threads") = 1, "Featurize trace JSON strings -> (seq, length, workload).");
  m.def("knn_mean_distance", &knn_mean_distance_py, py::arg("x"), py::arg("group"), py::arg("k"),
        py::arg("threads") = 0, "Mean distance to the k nearest neighbours within each group.");
  m.def("min_distance", &min_distance_py, py::arg("x"), py::arg("y"), py::arg("threads") = 0,
        "Distance from each row of x to the nearest row of y.");
  m.def("greedy_select", &greedy_select_py, py::arg("x"), py::arg("group"), py::arg("budget"),
        py::arg("r"), py::arg("u"), py::arg("selected"), py::arg("wr"), py::arg("wd"), py::arg("wu"),
        py::arg("coverage_k") = 0, py::arg("threads") = 0,
        "Greedy R+D+U batch selection per group (R: r, or the kNN coverage gain when coverage_k > 0); "
        "returns row indices.");
  m.def("string_code", [](const std::string& s) { return string_code(s); });
  m.def("pragma_value", [](const std::string& s) { return pragma_value(s); });
  m.def("name_tags", [](const std::string& s) {
    uint32_t t = 0;
    add_name_tags(s, t);
    return t;
  });
}
