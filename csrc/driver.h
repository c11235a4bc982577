// Featurizing whole inputs: cut into line-aligned chunks, parsed on threads, merged in order.
#pragma once

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

Batch featurize_sources(const std::vector<Source>& sources, OnError on_error, int threads);

// In-memory traces (JSON text of [[insts], [decisions]]) for the search loop: writes the rows,
// lengths and workload descriptors straight into caller buffers sized for traces.size() programs.
// `args_info` (JSON, may be empty) describes the task's tensors and is shared by all traces.
void featurize_traces(const std::vector<std::string_view>& traces, std::string_view args_info,
                      float* seq, int32_t* length, float* workload, int threads);

}  // namespace tcl
