// The feature layout (FeatureSpec) and the containers the parsers fill.
//
// One program = a sequence of at most kSeqLen rows, one per schedule step (Ansor) or trace instruction
// (MetaSchedule), padded with zero rows at the END. A row is
//   [ one-hot of the step/instruction kind (kNumKinds) | numeric content (kNumNumeric) ]
// with every numeric value v stored as sign(v) * log1p(|v|). Plus one workload descriptor of
// kWorkloadDim floats per program. tcl/features.py mirrors these constants and the README documents
// them; bump kSpecVersion whenever anything here changes meaning.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "json.h"

namespace tcl {

constexpr int kSpecVersion = 1;
constexpr int kSeqLen = 64;
constexpr int kNumNumeric = 32;
constexpr int kWorkloadDim = 16;
constexpr int kNumTags = 8;
constexpr size_t kMaxErrors = 20;  // messages kept for skipped lines
constexpr double kMaxDouble = std::numeric_limits<double>::max();
// Size of the kind vocabulary below (a static_assert checks it): a compile-time constant so that
// the row writer's offsets fold into the code.
constexpr int kNumKinds = 67;
constexpr int kRowDim = kNumKinds + kNumNumeric;

// Vocabulary: 0 = unknown kind, then the 14 Ansor step codes, then every MetaSchedule instruction
// kind registered in TVM 0.27.
const std::vector<std::string>& kind_names();
int kind_index(std::string_view name);  // 0 when unknown
constexpr int num_kinds() { return kNumKinds; }
constexpr int row_dim() { return kRowDim; }

// Small integer codes for the strings that carry meaning in a schedule (memory scopes, annotation
// keys); other strings get 0.
double string_code(std::string_view s);
// Ansor's "auto_unroll_max_step$N" pragma -> N; other pragmas -> -1.
double pragma_value(std::string_view s);
// Operator-kind tags from a workload or block name, OR-ed into `tags` (kNumTags bits).
void add_name_tags(std::string_view name, uint32_t& tags);
const std::vector<std::string>& tag_names();

// log1p of small non-negative integers, precomputed: most values in a schedule are such integers.
constexpr int kLogTableSize = 4096;
extern float g_log1p_table[kLogTableSize];

inline float log_scale(double v) {
  if (v >= 0 && v < kLogTableSize && v == static_cast<double>(static_cast<int>(v)))
    return g_log1p_table[static_cast<int>(v)];
  return static_cast<float>(v >= 0 ? std::log1p(v) : -std::log1p(-v));
}

// Builds the rows of one program into a caller-owned [kSeqLen, row_dim] block.
class RowWriter {
 public:
  RowWriter(float* block) : block_(block) {}
  // Starts a row for a step of the given kind; rows past kSeqLen are counted, not written.
  void begin_row(int kind) {
    ++n_rows_;
    row_ = (n_rows_ <= kSeqLen) ? block_ + static_cast<size_t>(n_rows_ - 1) * kRowDim : nullptr;
    n_num_ = 0;
    if (row_) row_[kind] = 1.0f;
  }
  void value(double v) {
    if (row_ && n_num_ < kNumNumeric) row_[kNumKinds + n_num_] = log_scale(v);
    ++n_num_;
  }
  int rows() const { return n_rows_; }
  int length() const { return n_rows_ < kSeqLen ? n_rows_ : kSeqLen; }

 private:
  float* block_;
  float* row_ = nullptr;
  int n_rows_ = 0;
  int n_num_ = 0;
};

// Shape/extent statistics gathered while a program is parsed; becomes the workload descriptor.
struct WorkloadStats {
  uint32_t tags = 0;
  int n_loops = 0;          // tiled loops seen in the trace (Ansor SP / MetaSchedule tile samples)
  double max_extent = 0, min_extent = 0, sum_log_extent = 0;
  int n_tensors = 0;        // tensors named in an Ansor workload key
  double max_tensor = 0, sum_log_tensor = 0;
  // Values read are finite, but a product of them (tile factors, a shape) can overflow to inf or
  // be NaN (inf * 0), and a negative number is no size: none of them is counted, so that the
  // descriptor stays finite (log1p of a number below -1 is NaN).
  void add_extent(double e) {
    if (!(e > 0 && e <= kMaxDouble)) return;
    min_extent = n_loops ? std::min(min_extent, e) : e;
    max_extent = std::max(max_extent, e);
    sum_log_extent += std::log1p(e);
    ++n_loops;
  }
  void add_tensor(double elems) {
    if (!(elems >= 0 && elems <= kMaxDouble)) return;
    max_tensor = std::max(max_tensor, elems);
    sum_log_tensor += std::log1p(elems);
    ++n_tensors;
  }
  // Takes over what a workload key contributes (tags, tensors).
  void add_key_stats(const WorkloadStats& k) {
    tags |= k.tags;
    n_tensors += k.n_tensors;
    max_tensor = std::max(max_tensor, k.max_tensor);
    sum_log_tensor += k.sum_log_tensor;
  }
  void write(float* out, int n_steps) const;
};

// A task seen while parsing: one workload on one target.
struct TaskInfo {
  std::string key;        // workload key / structural hash + target: what makes two tasks the same
  std::string workload;   // Ansor workload key, MetaSchedule structural hash
  std::string target;
  std::vector<int64_t> hardware_params;  // Ansor's 8 ints when present
  int source = -1;        // index of the first source that had it
  int64_t failed = 0;     // failed measurements (error_no != 0, cost 1e10 or <= 0), not in the arrays
};

// Programs parsed from a set of sources. Rows and descriptors are written in place into a buffer
// sized up front (`seq_base`/`workload_base`, room for `capacity` programs): no growing, no copies.
struct Batch {
  float* seq_base = nullptr;     // capacity * kSeqLen * row_dim
  float* workload_base = nullptr;  // capacity * kWorkloadDim
  size_t capacity = 0;
  std::vector<int32_t> length;   // rows used, <= kSeqLen
  std::vector<int32_t> task;     // index into tasks
  std::vector<double> cost;      // mean measured seconds
  std::vector<int32_t> source;   // which input it came from
  std::vector<int64_t> line;     // 1-based line in that input
  std::vector<TaskInfo> tasks;
  std::unordered_map<std::string, int> task_index;
  int64_t skipped = 0;           // malformed lines skipped under errors="skip"
  int64_t truncated = 0;         // programs longer than kSeqLen (rows beyond it dropped)
  std::vector<std::string> errors;  // messages of skipped lines (first few)

  size_t size() const { return length.size(); }
  static size_t block() { return static_cast<size_t>(kSeqLen) * static_cast<size_t>(row_dim()); }
  // The zeroed slot of the next program.
  float* new_program();
  // Zeroes the slot again after a failed or malformed program.
  void drop_last_program();
  // Keeps the program just parsed (or drops it and counts a failure for its task).
  void finish_program(int task, bool failed, double cost, const WorkloadStats& ws,
                      const RowWriter& w, int src, int64_t line);
  // The task of (workload, target), added on first sight.
  int task_id(std::string_view workload, std::string_view target, int src);
  int last_task = -1;
  void append_metadata(Batch&& other);  // concatenates all but the rows, merging task tables
};

enum class OnError { kRaise, kSkip };

// Error raised to Python as tcl.FormatError: names the source, line and what was expected.
struct FormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace tcl
