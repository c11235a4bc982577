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

// A zero-filled float buffer from anonymous memory with transparent huge pages requested:
// featurizing is bound by first-touch page faults of its large output, and 2 MB pages cut
// their number 512-fold. numpy takes the buffer over without a copy (see bindings.cc).
struct FloatBuffer {
  float* data = nullptr;
  size_t bytes = 0;
  FloatBuffer() = default;
  explicit FloatBuffer(size_t n_floats);
  FloatBuffer(const FloatBuffer&) = delete;
  FloatBuffer& operator=(const FloatBuffer&) = delete;
  FloatBuffer(FloatBuffer&& o) noexcept : data(o.data), bytes(o.bytes) { o.data = nullptr; }
  FloatBuffer& operator=(FloatBuffer&& o) noexcept {
    std::swap(data, o.data);
    std::swap(bytes, o.bytes);
    return *this;
  }
  ~FloatBuffer() { release_memory(data, bytes); }
  static void release_memory(float* p, size_t bytes);
};

struct Featurized {
  Batch meta;          // per-program metadata and the task table
  FloatBuffer seq;     // meta.size() programs of [kSeqLen, row_dim]
  FloatBuffer workload;  // meta.size() x kWorkloadDim
};

Featurized featurize_sources(const std::vector<Source>& sources, OnError on_error, int threads);

// In-memory traces for the search loop, each either JSON text of [[insts], [decisions]] or the
// Python text of str(trace): writes the rows, lengths and workload descriptors straight into
// caller buffers sized for traces.size() programs.
// `args_info` (JSON, may be empty) describes the task's tensors and is shared by all traces.
void featurize_traces(const std::vector<std::string_view>& traces, std::string_view args_info,
                      float* seq, int32_t* length, float* workload, int threads);

}  // namespace tcl
