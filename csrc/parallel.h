// A minimal thread pool for the native core: items 0..n-1 handed out one at a time.
#pragma once

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace tcl {

// threads <= 0 means all cores.
inline int resolve_threads(int threads) {
  if (threads > 0) return threads;
  unsigned hc = std::thread::hardware_concurrency();
  return hc ? static_cast<int>(hc) : 1;
}

// Calls fn(i) for i in [0, n) on up to `threads` threads (the caller's thread when one suffices).
template <class F>
void parallel_for(size_t n, int threads, F&& fn) {
  size_t workers = std::min<size_t>(n, static_cast<size_t>(resolve_threads(threads)));
  if (workers <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (size_t w = 0; w < workers; ++w)
    pool.emplace_back([&] {
      for (size_t i = next++; i < n; i = next++) fn(i);
    });
  for (auto& t : pool) t.join();
}

}  // namespace tcl
