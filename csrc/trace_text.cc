// MetaSchedule traces in the Python form that `str(trace)` prints, e.g.
//   v10, v11 = sch.sample_perfect_tile(loop=l3, n=4, max_innermost_factor=64, decision=[4, 2])
// Getting this text out of TVM costs ~0.1 ms per candidate, 8x less than the JSON form
// (Trace.as_json converts every leaf to Python), so the search loop uses it. The rows must equal
// those of the JSON form of the same trace: inputs and attrs are told apart by keyword (the
// keywords below are attrs in TVM's instruction traits), and both forms list them in the same order.
#include <cctype>
#include <cmath>
#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "parsers.h"

namespace tcl {
namespace {

// Python method name of each instruction kind: snake_case of the kind, with TVM's own exceptions.
const std::unordered_map<std::string, int>& method_kinds() {
  static const std::unordered_map<std::string, int> table = [] {
    std::unordered_map<std::string, int> m;
    const auto& names = kind_names();
    for (int i = 15; i < static_cast<int>(names.size()); ++i) {
      const std::string& n = names[static_cast<size_t>(i)];
      std::string s;
      for (size_t j = 0; j < n.size(); ++j) {
        char ch = n[j];
        if (std::isupper(static_cast<unsigned char>(ch)) && j > 0 &&
            std::islower(static_cast<unsigned char>(n[j - 1])))
          s += '_';
        s += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      }
      m[s] = i;
    }
    m["get_sblock"] = kind_index("GetSBlock");
    m["get_block"] = kind_index("GetSBlock");
    m["rfactor"] = kind_index("RFactor");
    m["reindex"] = kind_index("ReIndex");
    m["unsafe_set_dtype"] = kind_index("UnsafeSetDType");
    return m;
  }();
  return table;
}

bool is_attr_keyword(std::string_view kw) {
  static const std::unordered_set<std::string_view> attrs = {
      "name", "func_name", "n", "max_innermost_factor", "partition_pos", "innerpart_factor",
      "candidates", "probs", "preserve_unit_iters", "disable_predication", "preserve_unit_loops",
      "index", "ann_key", "read_buffer_index", "write_buffer_index", "buffer_index",
      "storage_scope", "index_map", "buffer_index_type", "cse_thresh", "factor_axis", "axis",
      "factor", "offset", "thread_axis", "tensor_intrin", "pad_value",
      "assume_injective_transform", "padding", "dtype", "new_order"};
  return attrs.count(kw) > 0;
}

// The JSON cursor's peek/consume/expect/fail plus what Python call syntax needs: names, keywords,
// and raw positions for skipping expressions.
class TextCursor : public Cursor {
 public:
  using Cursor::Cursor;
  std::string_view ident() {
    skip_ws();
    const char* s = p_;
    while (p_ < end_ && (std::isalnum(static_cast<unsigned char>(*p_)) || *p_ == '_')) ++p_;
    if (s == p_) fail("expected a name");
    return std::string_view(s, static_cast<size_t>(p_ - s));
  }
  bool starts_with(std::string_view w) {
    skip_ws();
    return static_cast<size_t>(end_ - p_) >= w.size() && std::string_view(p_, w.size()) == w;
  }
  void skip(size_t n) { p_ += n; }
  void set_pos(const char* p) { p_ = p; }
  const char* end() const { return end_; }
};

void skip_expression(TextCursor& c) {
  int depth = 0;
  while (c.pos() < c.end()) {
    char ch = *c.pos();
    if (ch == '"' || ch == '\'') {
      c.skip(1);
      while (c.pos() < c.end() && *c.pos() != ch) c.skip(*c.pos() == '\\' ? 2 : 1);
      if (c.pos() >= c.end()) c.fail("unterminated string");
    } else if (ch == '(' || ch == '[' || ch == '{') {
      ++depth;
    } else if (ch == ')' || ch == ']' || ch == '}') {
      if (depth == 0) return;
      --depth;
    } else if (ch == ',' && depth == 0) {
      return;
    }
    c.skip(1);
  }
  c.fail("unbalanced brackets");
}

// Appends the numbers of one Python literal / name, as flatten() does for the JSON form.
void py_value(TextCursor& c, std::vector<double>& out, std::string* first_string, int depth = 0) {
  if (depth > 64) c.fail("nesting too deep");
  char p = c.peek();
  if (p == '[' || p == '(') {
    char close = p == '[' ? ']' : ')';
    c.skip(1);
    if (c.consume(close)) return;
    do {
      if (c.peek() == close) break;  // trailing comma
      py_value(c, out, nullptr, depth + 1);
    } while (c.consume(','));
    c.expect(close);
  } else if (p == '"' || p == '\'') {
    // A string literal: its content (escapes kept as written; codes only match plain words).
    c.skip(1);
    const char* s = c.pos();
    while (c.pos() < c.end() && *c.pos() != p) c.skip(*c.pos() == '\\' ? 2 : 1);
    if (c.pos() >= c.end()) c.fail("unterminated string");
    std::string_view str(s, static_cast<size_t>(c.pos() - s));
    c.skip(1);
    if (first_string) *first_string = std::string(str);
    out.push_back(string_code(str));
  } else if (p == '-' || p == '+' || p == '.' || (p >= '0' && p <= '9')) {
    if (p == '+') c.skip(1);
    out.push_back(c.number());  // fails on 1e400, as in the JSON form
  } else {
    const char* at = c.pos();
    std::string_view id = c.ident();
    if (id == "True") {
      out.push_back(1);
    } else if (id == "False") {
      out.push_back(0);
    } else if (id == "None") {
      out.push_back(0);
    } else if (id.size() >= 2 && (id[0] == 'b' || id[0] == 'l' || id[0] == 'v') &&
               id.find_first_not_of("0123456789", 1) == std::string_view::npos) {
      double v = 0;
      for (size_t i = 1; i < id.size(); ++i) v = v * 10 + (id[i] - '0');
      if (std::isinf(v)) c.fail_at(at, "number out of range");
      out.push_back(v);
    } else {
      // Any other expression (an index_map lambda, T.int64(..)) carries no number we use:
      // skip it up to the ',' or ')' that ends the argument.
      skip_expression(c);
    }
  }
}

struct LineScratch {
  std::vector<double> inputs, attrs, decision;
  std::string str;
};

void parse_line(TextCursor& c, RowWriter& w, WorkloadStats& ws, LineScratch& s) {
  static const int kGetSBlock = kind_index("GetSBlock");
  static const int kTile = kind_index("SamplePerfectTile");
  static const int kPartTile = kind_index("SamplePartitionedTile");
  int n_outputs = 0;
  if (!c.starts_with("sch.")) {
    // outputs: "a, b, c =" (a single output may be written "a, =")
    while (true) {
      c.ident();
      ++n_outputs;
      if (!c.consume(',')) break;
      if (c.peek() == '=') break;
    }
    c.expect('=');
    if (!c.starts_with("sch.")) c.fail("expected 'sch.' after '='");
  }
  c.skip(4);
  std::string_view method = c.ident();
  const auto& kinds = method_kinds();
  auto it = kinds.find(std::string(method));
  int kind = it == kinds.end() ? 0 : it->second;
  s.inputs.clear();
  s.attrs.clear();
  s.decision.clear();
  bool has_decision = false;
  c.expect('(');
  if (!c.consume(')')) {
    do {
      if (c.peek() == ')') break;
      // keyword argument?
      const char* save = c.pos();
      std::string_view kw;
      if (std::isalpha(static_cast<unsigned char>(c.peek())) || c.peek() == '_') {
        std::string_view id = c.ident();
        if (c.peek() == '=') {
          c.skip(1);
          kw = id;
        } else {
          c.set_pos(save);
        }
      }
      if (kw == "decision") {
        has_decision = true;
        py_value(c, s.decision, nullptr);
      } else if (!kw.empty() && is_attr_keyword(kw)) {
        bool name = kind == kGetSBlock && kw == "name" && (c.peek() == '"' || c.peek() == '\'');
        s.str.clear();
        py_value(c, s.attrs, name ? &s.str : nullptr);
        if (name) {
          add_name_tags(s.str, ws.tags);
          s.attrs.back() = 0;  // a string literal pushed one code; names carry no number
        }
      } else {
        py_value(c, s.inputs, nullptr);
      }
    } while (c.consume(','));
    c.expect(')');
  }
  if (c.peek() != '\0' && c.peek() != '#') c.fail("trailing text after the call");
  if (has_decision && (kind == kTile || kind == kPartTile)) {
    double extent = 1;
    for (double v : s.decision) extent *= v;
    ws.add_extent(extent);
  }
  w.begin_row(kind);
  w.value(n_outputs);
  for (double v : s.decision) w.value(v);
  for (double v : s.attrs) w.value(v);
  for (double v : s.inputs) w.value(v);
}

}  // namespace

void parse_ms_trace_text(std::string_view text, RowWriter& w, WorkloadStats& ws) {
  thread_local LineScratch s;
  const char* p = text.data();
  const char* end = p + text.size();
  int line_no = 0;
  while (p < end) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    const char* e = nl ? nl : end;
    ++line_no;
    TextCursor c(p, e);
    char first = c.peek();
    // Skip the header ("# from tvm import s_tir", "def apply_trace(sch...") and blank lines.
    if (first != '\0' && first != '#' && !c.starts_with("def ")) {
      try {
        parse_line(c, w, ws, s);
      } catch (const JsonError& err) {
        throw JsonError("line " + std::to_string(line_no) + ": " + err.what(), err.offset);
      }
    }
    p = nl ? nl + 1 : end;
  }
}

}  // namespace tcl
