// TVM MetaSchedule JSONDatabase files and traces.
//   database_workload.json:       ["<structural hash>", "<base64 of the IRModule>"]
//   database_tuning_record.json:  [workload_index, [TRACE, run_secs, target, args_info]]
//   TRACE = [[inst...], [[inst_index, decision]...]], inst = [kind, inputs, attrs, outputs]
// Row numeric content of an instruction: [n_outputs, decision..., attrs..., inputs...] where random
// variables (b0, l1, v2: blocks, loops, values) appear as their index and quoted string literals
// through their string code.
#include <cmath>
#include <vector>

#include "parsers.h"

namespace tcl {
namespace {

// "b12" / "l3" / "v7" -> 12 / 3 / 7; -1 if the string is not a random-variable name.
double rv_index(std::string_view s) {
  if (s.size() < 2 || (s[0] != 'b' && s[0] != 'l' && s[0] != 'v')) return -1;
  double v = 0;
  for (size_t i = 1; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

void flatten(Cursor& c, std::vector<double>& out, bool inputs, std::string& scratch) {
  char p = c.peek();
  if (p == '[') {
    c.enter();
    c.begin_array();
    bool first = true;
    while (c.next_item(first)) flatten(c, out, inputs, scratch);
    c.leave();
  } else if (p == '"') {
    const char* at = c.pos();
    std::string_view s = c.string(scratch);
    double rv = inputs ? rv_index(s) : -1;
    if (std::isinf(rv)) c.fail_at(at, "number out of range");  // "b<400 digits>"
    if (rv >= 0) {
      out.push_back(rv);
    } else if (s.size() >= 2 && s.front() == '"' && s.back() == '"') {
      out.push_back(string_code(s.substr(1, s.size() - 2)));
    } else {
      out.push_back(string_code(s));
    }
  } else if (p == 't' || p == 'f') {
    out.push_back(c.boolean() ? 1 : 0);
  } else if (p == 'n') {
    c.null_literal();
    out.push_back(0);
  } else if (p == '{') {
    c.skip_value();  // no instruction kind in TVM 0.27 carries a map; ignore it if one appears
  } else {
    out.push_back(c.number());
  }
}

struct Inst {
  int kind;
  int n_outputs;
  size_t attrs_begin, inputs_begin, end;  // ranges in TraceScratch::values
  int decision = -1;                      // index into TraceScratch::decisions
};

struct TraceScratch {
  std::vector<Inst> insts;
  std::vector<double> values, inputs;
  std::vector<std::vector<double>> decisions;
  std::string str;
};

}  // namespace

void parse_ms_trace(Cursor& c, RowWriter& w, WorkloadStats& ws) {
  thread_local TraceScratch t;
  t.insts.clear();
  t.values.clear();
  size_t n_decisions = 0;
  static const int kGetSBlock = kind_index("GetSBlock");
  static const int kTile = kind_index("SamplePerfectTile");
  static const int kPartTile = kind_index("SamplePartitionedTile");

  c.begin_array();
  bool ft = true;
  if (!c.next_item(ft)) c.fail("trace: expected [instructions, decisions]");
  c.begin_array();
  bool fi = true;
  while (c.next_item(fi)) {
    c.begin_array();
    bool f = true;
    if (!c.next_item(f)) c.fail("instruction: expected [kind, inputs, attrs, outputs]");
    Inst inst{};
    inst.kind = kind_index(c.string(t.str));
    if (inst.kind >= 1 && inst.kind <= 14) c.fail("an Ansor step code inside a MetaSchedule trace");
    if (!c.next_item(f)) c.fail("instruction: expected inputs");
    t.inputs.clear();
    flatten(c, t.inputs, true, t.str);
    if (!c.next_item(f)) c.fail("instruction: expected attrs");
    inst.attrs_begin = t.values.size();
    if (inst.kind == kGetSBlock && c.peek() == '[') {
      // GetSBlock attrs = [block name, function name]: the block name tells the operator kind.
      c.begin_array();
      bool fa = true;
      bool name = true;
      while (c.next_item(fa)) {
        if (name && c.peek() == '"') {
          add_name_tags(c.string(t.str), ws.tags);
          t.values.push_back(0);  // names carry no number; the slot keeps the layout
        } else {
          flatten(c, t.values, false, t.str);
        }
        name = false;
      }
    } else {
      flatten(c, t.values, false, t.str);
    }
    inst.inputs_begin = t.values.size();
    t.values.insert(t.values.end(), t.inputs.begin(), t.inputs.end());
    inst.end = t.values.size();
    if (!c.next_item(f)) c.fail("instruction: expected outputs");
    c.begin_array();
    bool fo = true;
    while (c.next_item(fo)) {
      c.skip_value();
      ++inst.n_outputs;
    }
    while (c.next_item(f)) c.skip_value();
    t.insts.push_back(inst);
  }
  if (c.next_item(ft)) {
    c.begin_array();
    bool fd = true;
    while (c.next_item(fd)) {
      c.begin_array();
      bool f = true;
      if (!c.next_item(f)) c.fail("decision: expected [instruction index, value]");
      int64_t idx = c.integer();
      if (idx < 0 || idx >= static_cast<int64_t>(t.insts.size()))
        c.fail("decision refers to instruction " + std::to_string(idx) + " of " +
               std::to_string(t.insts.size()));
      if (!c.next_item(f)) c.fail("decision: expected a value");
      if (t.decisions.size() <= n_decisions) t.decisions.emplace_back();
      std::vector<double>& d = t.decisions[n_decisions];
      d.clear();
      flatten(c, d, false, t.str);
      while (c.next_item(f)) c.skip_value();
      Inst& inst = t.insts[static_cast<size_t>(idx)];
      inst.decision = static_cast<int>(n_decisions++);
      if (inst.kind == kTile || inst.kind == kPartTile) {
        // The tile factors multiply to the extent of the loop being tiled.
        double extent = 1;
        for (double v : d) extent *= v;
        ws.add_extent(extent);
      }
    }
    while (c.next_item(ft)) c.skip_value();
  }

  for (const Inst& inst : t.insts) {
    w.begin_row(inst.kind);
    w.value(inst.n_outputs);
    if (inst.decision >= 0)
      for (double v : t.decisions[static_cast<size_t>(inst.decision)]) w.value(v);
    for (size_t i = inst.attrs_begin; i < inst.end; ++i) w.value(t.values[i]);
  }
}

std::string parse_ms_workload(Cursor& c) {
  std::string scratch;
  c.begin_array();
  bool f = true;
  if (!c.next_item(f)) c.fail("workload: expected [structural hash, base64 IRModule]");
  std::string hash(c.string(scratch));
  if (!c.next_item(f)) c.fail("workload: expected the base64 IRModule after the hash");
  c.string(scratch);
  while (c.next_item(f)) c.skip_value();
  return hash;
}

// args_info = [["TENSOR", dtype, [shape...]], ...]: one tensor per argument.
void parse_args_info(Cursor& c, WorkloadStats& ws) {
  c.begin_array();
  bool f = true;
  while (c.next_item(f)) {
    if (c.peek() != '[') {
      c.skip_value();
      continue;
    }
    c.begin_array();
    bool fa = true;
    while (c.next_item(fa)) {
      if (c.peek() == '[') {
        c.begin_array();
        bool fs = true;
        double elems = 1;
        while (c.next_item(fs)) elems *= c.number();
        ws.add_tensor(elems);
      } else {
        c.skip_value();
      }
    }
  }
}

void parse_ms_record(Cursor& c, Batch& b, const std::vector<std::string>& workloads, int src,
                     int64_t line) {
  float* block = b.new_program();
  RowWriter w(block);
  WorkloadStats ws;
  bool failed = false;
  double cost = 0;
  int64_t widx = -1;
  std::string target;
  try {
    c.begin_array();
    bool f = true;
    if (!c.next_item(f)) c.fail("record: expected [workload index, tuning record]");
    widx = c.integer();
    if (widx < 0 || widx >= static_cast<int64_t>(workloads.size()))
      c.fail("workload index " + std::to_string(widx) + " is not in database_workload.json (" +
             std::to_string(workloads.size()) + " workloads)");
    if (!c.next_item(f)) c.fail("record: expected the tuning record after the workload index");
    c.begin_array();
    bool fr = true;
    if (!c.next_item(fr)) c.fail("tuning record: expected [trace, run_secs, target, args_info]");
    parse_ms_trace(c, w, ws);
    if (!c.next_item(fr)) c.fail("tuning record: expected run_secs after the trace");
    if (c.null_literal()) {
      failed = true;  // committed without a measurement
    } else {
      c.begin_array();
      bool fs = true;
      int n = 0;
      double sum = 0;
      while (c.next_item(fs)) {
        double v = c.number();
        // 1e10 marks a failed build or run; a zero or negative time is no measurement either.
        if (!(v > 0 && v < 1e9)) failed = true;
        sum += v;
        ++n;
      }
      if (n == 0) failed = true;
      cost = n ? sum / n : 0;
    }
    if (c.next_item(fr)) {
      target = std::string(c.skip_value());
      if (c.next_item(fr)) {
        if (!c.null_literal()) parse_args_info(c, ws);
        while (c.next_item(fr)) c.skip_value();
      }
    }
    while (c.next_item(f)) c.skip_value();
    if (!c.at_end()) c.fail("trailing text after the record");
  } catch (...) {
    b.drop_last_program();
    throw;
  }
  const std::string& hash = workloads[static_cast<size_t>(widx)];
  int task = b.task_id(hash, target, src);
  b.finish_program(task, failed, cost, ws, w, src, line);
}

}  // namespace tcl
