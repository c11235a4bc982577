// The two record formats: each parser reads one value with a Cursor and appends to a Batch.
#pragma once

#include <string>
#include <vector>

#include "featurize.h"
#include "json.h"

namespace tcl {

// One Ansor/TenSet measure record (a JSON object of one log line).
void parse_ansor_record(Cursor& c, Batch& b, int src, int64_t line);

// One line of a MetaSchedule database_workload.json: returns the structural hash.
std::string parse_ms_workload(Cursor& c);
// One line of a MetaSchedule database_tuning_record.json; `workloads` from the workload file.
void parse_ms_record(Cursor& c, Batch& b, const std::vector<std::string>& workloads, int src,
                     int64_t line);
// A record's args_info [["TENSOR", dtype, shape], ...] -> tensor statistics.
void parse_args_info(Cursor& c, WorkloadStats& ws);
// A MetaSchedule trace in its JSON form [[insts], [decisions]] -> rows and workload statistics.
void parse_ms_trace(Cursor& c, RowWriter& w, WorkloadStats& ws);

// The same trace in the Python form `str(trace)` prints; gives the same rows as the JSON form.
void parse_ms_trace_text(std::string_view text, RowWriter& w, WorkloadStats& ws);

}  // namespace tcl
