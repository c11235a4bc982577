// Vocabulary, string codes, workload tags, and the driver that featurizes whole files on threads.
#include "featurize.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <stdexcept>

namespace tcl {

namespace {
constexpr std::string_view kKindNames[] = {
    "<unknown>",
    // Ansor transform steps, in the order of REFERENCES.md.
    "AN", "FU", "PR", "RE", "SP", "FSP", "FFSP", "SA", "CA", "CI", "CR", "CHR", "CHW", "RF",
    // MetaSchedule instruction kinds registered in TVM 0.27 (InstructionKindGet accepts each).
    "AddUnitLoop", "Annotate", "AnnotateBufferAccess", "Bind", "Blockize", "CacheIndex",
    "CacheInplace", "CacheRead", "CacheWrite", "ComputeAt", "ComputeInline", "DecomposePadding",
    "DecomposeReduction", "EnterPostproc", "Fuse", "FuseReductionEpilogue", "GetChildBlocks",
    "GetConsumers", "GetLoops", "GetOutputBlocks", "GetProducers", "GetSBlock", "LoopPartition",
    "Merge", "PadEinsum", "Parallel", "RFactor", "ReIndex", "ReadAt", "ReindexCacheRead",
    "ReindexCacheWrite", "Reorder", "ReorderBlockIterVar", "ReverseComputeAt",
    "ReverseComputeInline", "RollingBuffer", "SampleCategorical", "SampleComputeLocation",
    "SamplePartitionedTile", "SamplePerfectTile", "SetScope", "Split", "StorageAlign", "Tensorize",
    "TransformBlockLayout", "TransformLayout", "Unannotate", "Unroll", "UnsafeHideBufferAccess",
    "UnsafeSetDType", "Vectorize", "WriteAt",
};
static_assert(std::size(kKindNames) == kNumKinds, "kNumKinds must match the kind vocabulary");
}  // namespace

const std::vector<std::string>& kind_names() {
  static const std::vector<std::string> names(std::begin(kKindNames), std::end(kKindNames));
  return names;
}

int kind_index(std::string_view name) {
  static const std::unordered_map<std::string_view, int> index = [] {
    std::unordered_map<std::string_view, int> m;
    const auto& names = kind_names();
    for (size_t i = 1; i < names.size(); ++i) m.emplace(names[i], static_cast<int>(i));
    return m;
  }();
  // TVM before 0.22 called GetSBlock "GetBlock": same instruction.
  if (name == "GetBlock") name = "GetSBlock";
  auto it = index.find(name);
  return it == index.end() ? 0 : it->second;
}

double string_code(std::string_view s) {
  static const std::unordered_map<std::string_view, int> codes = {
      // memory scopes
      {"global", 1}, {"shared", 2}, {"shared.dyn", 3}, {"local", 4}, {"warp", 5},
      {"wmma.matrix_a", 6}, {"wmma.matrix_b", 6}, {"wmma.accumulator", 6},
      // MetaSchedule annotation keys
      {"meta_schedule.parallel", 10}, {"meta_schedule.vectorize", 11},
      {"meta_schedule.unroll_explicit", 12}, {"meta_schedule.unroll_implicit", 13},
      {"meta_schedule.cooperative_fetch", 14}, {"meta_schedule.tiling_structure", 15},
      {"meta_schedule.auto_tensorize", 16}, {"meta_schedule.thread_extent_low_inclusive", 17},
      {"meta_schedule.thread_extent_high_inclusive", 18}, {"pragma_auto_unroll_max_step", 19},
      {"pragma_unroll_explicit", 20}, {"meta_schedule.random_compute_producer", 21},
      {"meta_schedule.layout_rewrite_preproc", 22}, {"software_pipeline_stage", 23},
      {"software_pipeline_order", 24},
  };
  auto it = codes.find(s);
  return it == codes.end() ? 0.0 : it->second;
}

double pragma_value(std::string_view s) {
  constexpr std::string_view prefix = "auto_unroll_max_step$";
  if (s.substr(0, prefix.size()) != prefix) return -1;
  double v = 0;
  for (char c : s.substr(prefix.size())) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

const std::vector<std::string>& tag_names() {
  static const std::vector<std::string> names = {
      "conv", "depthwise", "matmul", "batch_matmul", "pool", "reduce", "elementwise", "unknown"};
  return names;
}

void add_name_tags(std::string_view name, uint32_t& tags) {
  std::string s(name);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  auto has = [&](const char* w) { return s.find(w) != std::string::npos; };
  uint32_t t = 0;
  if (has("conv")) t |= 1u << 0;
  if (has("depthwise")) t |= (1u << 1) | (1u << 0);
  if (has("batch_matmul") || has("batch_mm")) t |= 1u << 3;
  else if (has("matmul") || has("dense") || has("gemm") || has("_mm") || s == "mm") t |= 1u << 2;
  if (has("pool")) t |= 1u << 4;
  if (has("softmax") || has("norm") || has("sum") || has("mean") || has("reduce") ||
      has("max") || has("min"))
    t |= 1u << 5;
  if (t == 0 && !s.empty()) t |= 1u << 6;  // any other named compute: injective / elementwise
  tags |= t;
}

void WorkloadStats::write(float* out, int n_steps) const {
  for (int i = 0; i < kNumTags; ++i) out[i] = (tags >> i) & 1u ? 1.0f : 0.0f;
  // A workload with nothing but elementwise blocks or no names at all is marked unknown.
  if ((tags & 0x3Fu) == 0) out[7] = 1.0f;
  out[8] = log_scale(n_loops);
  out[9] = log_scale(max_extent);
  out[10] = log_scale(min_extent);
  out[11] = static_cast<float>(sum_log_extent);
  out[12] = log_scale(n_tensors);
  out[13] = log_scale(max_tensor);
  out[14] = static_cast<float>(sum_log_tensor);
  out[15] = log_scale(n_steps);
}

float g_log1p_table[kLogTableSize];
[[maybe_unused]] static const bool log_table_ready = [] {
  for (int i = 0; i < kLogTableSize; ++i) g_log1p_table[i] = static_cast<float>(std::log1p(i));
  return true;
}();

float* Batch::new_program() {
  if (size() >= capacity) throw std::logic_error("Batch: more programs than lines");
  return seq_base + size() * block();
}

void Batch::drop_last_program() {
  std::memset(seq_base + size() * block(), 0, block() * sizeof(float));
  std::memset(workload_base + size() * kWorkloadDim, 0, kWorkloadDim * sizeof(float));
}

void Batch::finish_program(int t, bool failed, double c, const WorkloadStats& ws,
                           const RowWriter& w, int src, int64_t ln) {
  if (failed) {
    drop_last_program();
    ++tasks[static_cast<size_t>(t)].failed;
    return;
  }
  ws.write(workload_base + size() * kWorkloadDim, w.rows());
  length.push_back(w.length());
  if (w.rows() > kSeqLen) ++truncated;
  task.push_back(t);
  cost.push_back(c);
  source.push_back(src);
  line.push_back(ln);
}

int Batch::task_id(std::string_view wkl, std::string_view target, int src) {
  // Records of one task usually come one after another: skip building and hashing the key.
  if (last_task >= 0) {
    const TaskInfo& t = tasks[static_cast<size_t>(last_task)];
    if (t.workload == wkl && t.target == target) return last_task;
  }
  std::string key;
  key.reserve(wkl.size() + target.size() + 1);
  key.append(wkl).append(1, '\x1f').append(target);
  auto it = task_index.find(key);
  if (it != task_index.end()) return last_task = it->second;
  int id = static_cast<int>(tasks.size());
  TaskInfo info;
  info.key = key;
  info.workload = std::string(wkl);
  info.target = std::string(target);
  info.source = src;
  tasks.push_back(std::move(info));
  task_index.emplace(std::move(key), id);
  return last_task = id;
}

void Batch::append_metadata(Batch&& o) {
  std::vector<int32_t> remap(o.tasks.size());
  for (size_t i = 0; i < o.tasks.size(); ++i) {
    TaskInfo& t = o.tasks[i];
    auto it = task_index.find(t.key);
    if (it == task_index.end()) {
      remap[i] = static_cast<int32_t>(tasks.size());
      task_index.emplace(t.key, remap[i]);
      tasks.push_back(std::move(t));
    } else {
      remap[i] = it->second;
      tasks[static_cast<size_t>(it->second)].failed += t.failed;
    }
  }
  length.insert(length.end(), o.length.begin(), o.length.end());
  for (int32_t t : o.task) task.push_back(remap[static_cast<size_t>(t)]);
  cost.insert(cost.end(), o.cost.begin(), o.cost.end());
  source.insert(source.end(), o.source.begin(), o.source.end());
  line.insert(line.end(), o.line.begin(), o.line.end());
  skipped += o.skipped;
  truncated += o.truncated;
  for (auto& e : o.errors)
    if (errors.size() < kMaxErrors) errors.push_back(std::move(e));
}

}  // namespace tcl
