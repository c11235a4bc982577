// Featurizing whole inputs: cut into line-aligned chunks, parsed on threads, merged in order.
#pragma once

#include <cstdlib>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

#include "featurize.h"

namespace tcl {

// One input, already in memory (Python reads and decompresses files); names are for messages.
struct Source {
  bool metaschedule = false;  // false: an Ansor log; true: a JSONDatabase's two files
  std::string path;           // Ansor log, or database_tuning_record.json
  std::string_view text;
  std::string workload_path;  // database_workload.json (MetaSchedule only)
  std::string_view workload_text;
};

// malloc'ed float buffer, freed with free() (numpy's capsule takes it over without a copy).
struct FloatBuffer {
  float* data = nullptr;
  FloatBuffer() = default;
  FloatBuffer(const FloatBuffer&) = delete;
  FloatBuffer& operator=(const FloatBuffer&) = delete;
  FloatBuffer(FloatBuffer&& o) noexcept : data(o.data) { o.data = nullptr; }
  FloatBuffer& operator=(FloatBuffer&& o) noexcept {
    std::swap(data, o.data);
    return *this;
  }
  ~FloatBuffer() { std::free(data); }
  float* release() {
    float* p = data;
    data = nullptr;
    return p;
  }
};

struct Featurized {
  Batch meta;          // per-program metadata and the task table
  FloatBuffer seq;     // meta.size() programs of [kSeqLen, row_dim]
  FloatBuffer workload;  // meta.size() x kWorkloadDim
};

Featurized featurize_sources(const std::vector<Source>& sources, OnError on_error, int threads);

// In-memory traces (JSON text of [[insts], [decisions]]) for the search loop: writes the rows,
// lengths and workload descriptors straight into caller buffers sized for traces.size() programs.
// `args_info` (JSON, may be empty) describes the task's tensors and is shared by all traces.
void featurize_traces(const std::vector<std::string_view>& traces, std::string_view args_info,
                      float* seq, int32_t* length, float* workload, int threads);

}  // namespace tcl
