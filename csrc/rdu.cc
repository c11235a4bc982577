// RDU sampler kernels: Representativeness (k-nearest-neighbour distance), Diversity (running
// minimum distance to the selected set) and the greedy batch selection that combines them with an
// Uncertainty vector. Everything is computed within groups (one group = one task's candidates):
// measuring budgets are per task, and programs of different tasks are never compared. Distances are
// computed on the fly in blocks of rows, so no N x N matrix is ever held.
#include "rdu.h"

#include "parallel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <stdexcept>

namespace tcl {
namespace {

// Squared Euclidean distance; the simd reduction lets the compiler use vector lanes.
inline float sqdist(const float* a, const float* b, int d) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < d; ++i) {
    float t = a[i] - b[i];
    s += t * t;
  }
  return s;
}

}  // namespace

std::vector<std::vector<int64_t>> group_members(const int32_t* group, int64_t n) {
  int32_t max_g = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (group[i] < 0) throw std::invalid_argument("group ids must be >= 0");
    max_g = std::max(max_g, group[i]);
  }
  std::vector<std::vector<int64_t>> members(static_cast<size_t>(max_g + 1));
  for (int64_t i = 0; i < n; ++i) members[static_cast<size_t>(group[i])].push_back(i);
  return members;
}

void knn_mean_distance(const float* x, int64_t n, int d, const int32_t* group, int k, int threads,
                       float* out) {
  if (k < 1) throw std::invalid_argument("k must be >= 1");
  auto members = group_members(group, n);
  // Work items are rows, so one big group still spreads over all threads.
  std::vector<std::pair<size_t, size_t>> rows;
  for (size_t g = 0; g < members.size(); ++g)
    for (size_t r = 0; r < members[g].size(); ++r) rows.emplace_back(g, r);
  parallel_for((rows.size() + 63) / 64, threads, [&](size_t blk) {
    std::priority_queue<float> heap;  // the k smallest squared distances seen (max on top)
    for (size_t t = blk * 64; t < std::min(rows.size(), blk * 64 + 64); ++t) {
      const auto& m = members[rows[t].first];
      int64_t i = m[rows[t].second];
      const float* xi = x + i * d;
      heap = {};
      for (int64_t j : m) {
        if (j == i) continue;
        float s = sqdist(xi, x + j * d, d);
        if (static_cast<int>(heap.size()) < k) {
          heap.push(s);
        } else if (s < heap.top()) {
          heap.pop();
          heap.push(s);
        }
      }
      double sum = 0;
      size_t cnt = heap.size();
      while (!heap.empty()) {
        sum += std::sqrt(static_cast<double>(heap.top()));
        heap.pop();
      }
      out[i] = cnt ? static_cast<float>(sum / static_cast<double>(cnt)) : 0.0f;
    }
  });
}

void min_distance(const float* x, int64_t n, const float* y, int64_t m, int d, int threads,
                  float* out) {
  parallel_for((static_cast<size_t>(n) + 255) / 256, threads, [&](size_t blk) {
    int64_t lo = static_cast<int64_t>(blk) * 256, hi = std::min<int64_t>(n, lo + 256);
    for (int64_t i = lo; i < hi; ++i) {
      float best = std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < m; ++j) best = std::min(best, sqdist(x + i * d, y + j * d, d));
      out[i] = std::sqrt(best);
    }
  });
}

std::vector<int64_t> greedy_select(const float* x, int64_t n, int d, const int32_t* group,
                                   const int64_t* budget, int64_t n_groups, const float* r,
                                   const float* u, const uint8_t* selected, float wr, float wd,
                                   float wu, int threads) {
  auto members = group_members(group, n);
  if (static_cast<int64_t>(members.size()) > n_groups)
    throw std::invalid_argument("budget has fewer entries than there are groups");
  members.resize(static_cast<size_t>(n_groups));
  std::vector<std::vector<int64_t>> picks(members.size());
  parallel_for(members.size(), threads, [&](size_t g) {
    const auto& m = members[g];
    std::vector<int64_t> cand, chosen;
    for (int64_t i : m) (selected[i] ? chosen : cand).push_back(i);
    // md: distance of each candidate to the nearest selected program (infinite when none yet).
    std::vector<float> md(cand.size(), std::numeric_limits<float>::infinity());
    for (size_t c = 0; c < cand.size(); ++c)
      for (int64_t s : chosen)
        md[c] = std::min(md[c], std::sqrt(sqdist(x + cand[c] * d, x + s * d, d)));
    std::vector<uint8_t> taken(cand.size(), 0);
    int64_t want = std::min<int64_t>(budget[g], static_cast<int64_t>(cand.size()));
    for (int64_t step = 0; step < want; ++step) {
      // Diversity is normalised over the remaining candidates at every pick.
      float max_md = 0;
      for (size_t c = 0; c < cand.size(); ++c)
        if (!taken[c] && std::isfinite(md[c])) max_md = std::max(max_md, md[c]);
      size_t best = cand.size();
      float best_score = -std::numeric_limits<float>::infinity();
      for (size_t c = 0; c < cand.size(); ++c) {
        if (taken[c]) continue;
        float dn = !std::isfinite(md[c]) ? 1.0f : (max_md > 0 ? md[c] / max_md : 0.0f);
        float score = wr * r[cand[c]] + wd * dn + wu * u[cand[c]];
        if (score > best_score) {
          best_score = score;
          best = c;
        }
      }
      taken[best] = 1;
      picks[g].push_back(cand[best]);
      const float* xb = x + cand[best] * d;
      for (size_t c = 0; c < cand.size(); ++c)
        if (!taken[c]) md[c] = std::min(md[c], std::sqrt(sqdist(x + cand[c] * d, xb, d)));
    }
  });
  std::vector<int64_t> out;
  for (auto& p : picks) out.insert(out.end(), p.begin(), p.end());
  return out;
}

}  // namespace tcl
