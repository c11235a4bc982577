#include "driver.h"

#include <algorithm>
#include <cstring>
#include <new>

#include <sys/mman.h>

#include "parallel.h"
#include "parsers.h"

namespace tcl {
FloatBuffer::FloatBuffer(size_t n_floats) : bytes(n_floats * sizeof(float)) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  madvise(p, bytes, MADV_HUGEPAGE);  // a hint: ignored where THP is off
  data = static_cast<float*>(p);
}

void FloatBuffer::release_memory(float* p, size_t bytes) {
  if (p) munmap(p, bytes);
}

namespace {

constexpr size_t kChunkBytes = 1 << 18;

struct Chunk {
  int src;
  const char* begin;
  const char* end;
  int64_t first_line;
  size_t lines;  // lines in [begin, end), the last one counted even without its newline
  Batch batch;
  std::string error;  // first error under errors="raise"
};

// Calls fn(line_begin, line_end, line_number) for each line that holds a value (not blank, not #).
template <class F>
void for_each_line(const char* p, const char* end, int64_t line, F&& fn) {
  while (p < end) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    const char* e = nl ? nl : end;
    const char* q = p;
    while (q < e && (*q == ' ' || *q == '\t' || *q == '\r')) ++q;
    if (q < e && *q != '#') {
      if (!fn(q, e, line)) return;
    }
    ++line;
    p = nl ? nl + 1 : end;
  }
}

// Newlines in [p, end): memchr is vectorised, a byte loop is not.
size_t count_newlines(const char* p, const char* end) {
  size_t n = 0;
  while (p < end && (p = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p))))) {
    ++n;
    ++p;
  }
  return n;
}

std::string where(const Source& s, int64_t line) {
  return s.path + ":" + std::to_string(line) + ": ";
}

void cut_chunks(int src, std::string_view text, std::vector<Chunk>& out) {
  const char* p = text.data();
  const char* end = p + text.size();
  int64_t line = 1;
  while (p < end) {
    const char* stop = std::min(end, p + kChunkBytes);
    const char* nl = static_cast<const char*>(std::memchr(stop, '\n', static_cast<size_t>(end - stop)));
    const char* e = (stop == end || !nl) ? end : nl + 1;
    size_t newlines = count_newlines(p, e);
    Chunk c{src, p, e, line, newlines + (e > p && e[-1] != '\n' ? 1 : 0), {}, {}};
    out.push_back(std::move(c));
    line += static_cast<int64_t>(newlines);
    p = e;
  }
}

}  // namespace

Featurized featurize_sources(const std::vector<Source>& sources, OnError on_error, int threads) {
  threads = resolve_threads(threads);
  std::vector<std::vector<std::string>> workloads(sources.size());
  Batch head;  // collects what is skipped while reading workload files
  for (size_t i = 0; i < sources.size(); ++i) {
    if (!sources[i].metaschedule) continue;
    std::string_view wtext = sources[i].workload_text;
    for_each_line(wtext.data(), wtext.data() + wtext.size(), 1,
                  [&](const char* b, const char* e, int64_t line) {
                    try {
                      Cursor c(b, e);
                      std::string hash = parse_ms_workload(c);
                      if (!c.at_end()) c.fail("trailing text after the workload");
                      workloads[i].push_back(std::move(hash));
                    } catch (const JsonError& err) {
                      std::string msg = sources[i].workload_path + ":" + std::to_string(line) +
                                        ": " + err.what();
                      if (on_error == OnError::kRaise) throw FormatError(msg);
                      ++head.skipped;
                      if (head.errors.size() < kMaxErrors) head.errors.push_back(msg);
                      workloads[i].emplace_back();  // keeps later indices aligned
                    }
                    return true;
                  });
  }
  std::vector<Chunk> chunks;
  for (size_t i = 0; i < sources.size(); ++i) cut_chunks(static_cast<int>(i), sources[i].text, chunks);

  // One zeroed buffer with a slot per line; each chunk fills its slots from the front. Untouched
  // pages are never faulted in, so slots of blank lines and failures cost nothing.
  size_t total = 0;
  for (const Chunk& ch : chunks) total += ch.lines;
  Featurized out;
  out.seq = FloatBuffer(std::max<size_t>(total, 1) * Batch::block());
  out.workload = FloatBuffer(std::max<size_t>(total, 1) * kWorkloadDim);
  // Each thread takes a contiguous range of chunks (balanced by bytes) and fills them in order,
  // each chunk right after the programs the previous one kept. Gaps (failed or blank lines) can
  // then only remain between ranges: none on one thread, at most threads - 1 to close.
  size_t workers = std::min<size_t>(chunks.size(), static_cast<size_t>(std::max(1, threads)));
  workers = std::max<size_t>(workers, 1);
  std::vector<size_t> range_begin(workers + 1, chunks.size());
  {
    size_t bytes = 0, all = 0;
    for (const Chunk& ch : chunks) all += static_cast<size_t>(ch.end - ch.begin);
    size_t r = 0;
    for (size_t k = 0; k < chunks.size(); ++k) {
      while (r < workers && bytes >= all * r / workers) range_begin[r++] = k;
      bytes += static_cast<size_t>(chunks[k].end - chunks[k].begin);
    }
    range_begin[0] = 0;
  }
  std::vector<size_t> range_slot(workers, 0);  // first slot of each range
  for (size_t r = 1; r < workers; ++r) {
    range_slot[r] = range_slot[r - 1];
    for (size_t k = range_begin[r - 1]; k < range_begin[r]; ++k) range_slot[r] += chunks[k].lines;
  }

  parallel_for(workers, static_cast<int>(workers), [&](size_t r) {
    size_t kept = range_slot[r];
    for (size_t k = range_begin[r]; k < range_begin[r + 1]; ++k) {
      Chunk& ch = chunks[k];
      ch.batch.capacity = ch.lines;
      ch.batch.seq_base = out.seq.data + kept * Batch::block();
      ch.batch.workload_base = out.workload.data + kept * kWorkloadDim;
      const Source& s = sources[static_cast<size_t>(ch.src)];
      const auto& wl = workloads[static_cast<size_t>(ch.src)];
      for_each_line(ch.begin, ch.end, ch.first_line, [&](const char* b, const char* e, int64_t line) {
        try {
          Cursor c(b, e);
          if (s.metaschedule) {
            parse_ms_record(c, ch.batch, wl, ch.src, line);
          } else {
            parse_ansor_record(c, ch.batch, ch.src, line);
          }
        } catch (const JsonError& err) {
          std::string msg = where(s, line) + err.what();
          if (on_error == OnError::kRaise) {
            ch.error = msg;
            return false;
          }
          ++ch.batch.skipped;
          if (ch.batch.errors.size() < kMaxErrors) ch.batch.errors.push_back(msg);
        }
        return true;
      });
      if (!ch.error.empty()) return;
      kept += ch.batch.size();
    }
  });
  for (const Chunk& ch : chunks)
    if (!ch.error.empty()) throw FormatError(ch.error);

  // Close the gaps that failed, skipped and blank lines left between chunks.
  out.meta = std::move(head);
  for (Chunk& ch : chunks) {
    size_t n = ch.batch.size();
    float* seq_dst = out.seq.data + out.meta.size() * Batch::block();
    float* wl_dst = out.workload.data + out.meta.size() * kWorkloadDim;
    if (n && seq_dst != ch.batch.seq_base) {
      std::memmove(seq_dst, ch.batch.seq_base, n * Batch::block() * sizeof(float));
      std::memmove(wl_dst, ch.batch.workload_base, n * kWorkloadDim * sizeof(float));
    }
    out.meta.append_metadata(std::move(ch.batch));
  }
  return out;
}

void featurize_traces(const std::vector<std::string_view>& traces, std::string_view args_info,
                      float* seq, int32_t* length, float* workload, int threads) {
  WorkloadStats shared;
  if (!args_info.empty()) {
    try {
      Cursor c(args_info);
      parse_args_info(c, shared);
      if (!c.at_end()) c.fail("trailing text after args_info");
    } catch (const JsonError& err) {
      throw FormatError(std::string("args_info: ") + err.what());
    }
  }
  const size_t block = static_cast<size_t>(kSeqLen) * row_dim();
  std::vector<std::string> errors(traces.size());
  parallel_for((traces.size() + 63) / 64, threads, [&](size_t k) {
    size_t lo = k * 64, hi = std::min(traces.size(), lo + 64);
    for (size_t i = lo; i < hi; ++i) {
      float* rows = seq + i * block;
      std::fill(rows, rows + block, 0.0f);
      RowWriter w(rows);
      WorkloadStats ws = shared;
      try {
        Cursor c(traces[i]);
        if (c.peek() == '[') {
          parse_ms_trace(c, w, ws);
          if (!c.at_end()) c.fail("trailing text after the trace");
        } else {
          parse_ms_trace_text(traces[i], w, ws);
        }
      } catch (const JsonError& err) {
        errors[i] = "trace " + std::to_string(i) + ": " + err.what();
        length[i] = 0;
        continue;
      }
      length[i] = w.length();
      ws.write(workload + i * kWorkloadDim, w.rows());
    }
  });
  for (const auto& e : errors)
    if (!e.empty()) throw FormatError(e);
}

}  // namespace tcl
