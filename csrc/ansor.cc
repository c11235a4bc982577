// Ansor / TenSet measure records (v0.6):
//   {"i": [TASK, STATE], "r": [costs, error_no, all_cost, timestamp], "v": "v0.6"}
#include <cmath>
#include <vector>

#include "parsers.h"

namespace tcl {
namespace {

bool is_hash(std::string_view s) {
  if (s.size() != 32) return false;
  for (char ch : s)
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
  return true;
}

// Walks the workload key's lists: a list of plain numbers (below the top) is one tensor shape of
// prod(list) elements, any other number a tensor of that size; the first string names the workload
// (unless it is a TenSet hash).
void walk_key_list(Cursor& c, WorkloadStats& ws, bool top, std::string& scratch) {
  c.enter();
  c.begin_array();
  bool first = true, numbers_only = true;
  std::vector<double> numbers;
  int index = 0;
  while (c.next_item(first)) {
    char p = c.peek();
    if (p == '[') {
      numbers_only = false;
      walk_key_list(c, ws, false, scratch);
    } else if (p == '"') {
      numbers_only = false;
      std::string_view s = c.string(scratch);
      if (top && index == 0 && !is_hash(s)) add_name_tags(s, ws.tags);
    } else if (c.is_number_start()) {
      numbers.push_back(c.number());
    } else {
      numbers_only = false;
      c.skip_value();
    }
    ++index;
  }
  if (!top && numbers_only && !numbers.empty()) {
    double elems = 1;
    for (double v : numbers) elems *= v;
    ws.add_tensor(elems);
  } else {
    for (double v : numbers) ws.add_tensor(v);
  }
  c.leave();
}

void parse_workload_key(std::string_view key, WorkloadStats& ws) {
  Cursor k(key);
  std::string scratch;
  try {
    if (k.peek() != '[') k.fail("expected a JSON list");
    walk_key_list(k, ws, true, scratch);
    if (!k.at_end()) k.fail("trailing text");
  } catch (const JsonError& e) {
    // The key is JSON inside a JSON string: say so, as the column counts within the key.
    throw JsonError(std::string("workload key: ") + e.what(), e.offset);
  }
}

// Index of an Ansor step code in the vocabulary (1..14), 0 if it is not one; no hashing.
int ansor_kind(std::string_view code) {
  static const std::string_view codes[] = {"AN", "FU", "PR", "RE", "SP", "FSP", "FFSP",
                                           "SA", "CA", "CI", "CR", "CHR", "CHW", "RF"};
  for (int i = 0; i < 14; ++i)
    if (code == codes[i]) return i + 1;
  return 0;
}

// Flattens one step field into the row: numbers as they are, strings through their code.
void step_field(Cursor& c, RowWriter& w, bool pragma, std::string& scratch) {
  char p = c.peek();
  if (p == '[') {
    c.enter();
    c.begin_array();
    bool first = true;
    while (c.next_item(first)) step_field(c, w, false, scratch);
    c.leave();
  } else if (p == '"') {
    const char* at = c.pos();
    std::string_view s = c.string(scratch);
    double v = pragma ? pragma_value(s) : string_code(s);
    if (!std::isfinite(v)) c.fail_at(at, "number out of range");  // auto_unroll_max_step$<400 digits>
    w.value(v);
  } else if (p == 't' || p == 'f') {
    w.value(c.boolean() ? 1 : 0);
  } else if (p == 'n') {
    c.null_literal();
    w.value(0);
  } else {
    w.value(c.number());
  }
}

void parse_steps(Cursor& c, RowWriter& w, WorkloadStats& ws, std::string& scratch) {
  c.begin_array();
  bool first = true;
  while (c.next_item(first)) {
    c.begin_array();
    bool f = true;
    if (!c.next_item(f)) c.fail("expected a step code");
    std::string_view code = c.string(scratch);
    int kind = ansor_kind(code);
    if (kind == 0) c.fail("unknown Ansor step code '" + std::string(code) + "'");
    bool is_pr = code == "PR";
    bool is_sp = code == "SP";
    w.begin_row(kind);
    int field = 0;
    while (c.next_item(f)) {
      // SP stage, iter, extent, ...: the extent is the loop's trip count.
      if (is_sp && field == 2 && c.is_number_start()) {
        double extent = c.number();
        ws.add_extent(extent);
        w.value(extent);
      } else {
        step_field(c, w, is_pr && field == 2, scratch);
      }
      ++field;
    }
  }
}

}  // namespace

void parse_ansor_record(Cursor& c, Batch& b, int src, int64_t line) {
  thread_local std::string scratch, workload_key, target;
  thread_local std::vector<int64_t> hw;
  hw.clear();
  bool have_input = false, have_result = false, failed = false;
  double cost = 0;
  float* block = b.new_program();
  RowWriter w(block);
  WorkloadStats ws;
  try {
    c.expect('{');
    bool first = true;
    while (true) {
      if (first) {
        first = false;
        if (c.consume('}')) break;
      } else if (!c.consume(',')) {
        c.expect('}');
        break;
      }
      std::string key(c.string(scratch));
      c.expect(':');
      if (key == "i") {
        // [TASK, STATE]; TASK = [workload_key, target, hardware_params, target_host, ...]
        c.begin_array();
        bool f = true;
        if (!c.next_item(f)) c.fail("\"i\": expected [task, state]");
        c.begin_array();
        bool ft = true;
        if (!c.next_item(ft)) c.fail("task: expected a workload key");
        workload_key.assign(c.string(scratch));
        if (!c.next_item(ft)) c.fail("task: expected a target string");
        target.assign(c.string(scratch));
        int item = 2;
        while (c.next_item(ft)) {
          if (item == 2 && c.peek() == '[') {
            c.begin_array();
            bool fh = true;
            while (c.next_item(fh)) hw.push_back(c.integer());
          } else {
            c.skip_value();
          }
          ++item;
        }
        if (!c.next_item(f)) c.fail("\"i\": expected a state after the task");
        c.begin_array();  // STATE = [stages, steps]
        bool fs = true;
        if (!c.next_item(fs)) c.fail("state: expected [stages, steps]");
        c.skip_value();
        if (!c.next_item(fs)) c.fail("state: expected a list of steps");
        parse_steps(c, w, ws, scratch);
        while (c.next_item(fs)) c.skip_value();
        while (c.next_item(f)) c.skip_value();
        have_input = true;
      } else if (key == "r") {
        c.begin_array();
        bool f = true;
        if (!c.next_item(f)) c.fail("\"r\": expected [costs, error_no, ...]");
        c.begin_array();
        bool fc = true;
        int n = 0;
        double sum = 0;
        while (c.next_item(fc)) {
          double v = c.number();
          // 1e10 is how TVM writes a failed run; a zero or negative time is no measurement either
          // (it would make a label of inf, NaN or below zero).
          if (!(v > 0 && v < 1e9)) failed = true;
          sum += v;
          ++n;
        }
        if (n == 0) failed = true;
        cost = n ? sum / n : 0;
        if (!c.next_item(f)) c.fail("\"r\": expected an error number after the costs");
        if (c.integer() != 0) failed = true;
        while (c.next_item(f)) c.skip_value();
        have_result = true;
      } else {
        c.skip_value();
      }
    }
    if (!have_input) c.fail("record has no \"i\" (task and schedule)");
    if (!have_result) c.fail("record has no \"r\" (measurement)");
    // Consecutive records usually share their task: parse its key once.
    thread_local std::string cached_key;
    thread_local WorkloadStats cached_stats;
    if (workload_key != cached_key || cached_key.empty()) {
      WorkloadStats key_stats;
      parse_workload_key(workload_key, key_stats);
      cached_key = workload_key;
      cached_stats = key_stats;
    }
    ws.add_key_stats(cached_stats);
    if (!c.at_end()) c.fail("trailing text after the record");
  } catch (...) {
    b.drop_last_program();
    throw;
  }
  int task = b.task_id(workload_key, target, src);
  if (b.tasks[static_cast<size_t>(task)].hardware_params.empty())
    b.tasks[static_cast<size_t>(task)].hardware_params = hw;
  b.finish_program(task, failed, cost, ws, w, src, line);
}

}  // namespace tcl
