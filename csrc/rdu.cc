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
#include <memory>
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

// The k nearest other members of m[p] as (squared distance, member position), nearest first; ties
// go to the lower position. A max-heap of the best k seen, so memory is O(k).
void nearest(const float* x, int d, const std::vector<int64_t>& m, size_t p, size_t k,
             std::vector<std::pair<float, size_t>>& out) {
  out.clear();
  if (k == 0) return;
  const float* xp = x + m[p] * d;
  for (size_t j = 0; j < m.size(); ++j) {
    if (j == p) continue;
    std::pair<float, size_t> c(sqdist(xp, x + m[j] * d, d), j);
    if (out.size() < k) {
      out.push_back(c);
      std::push_heap(out.begin(), out.end());
    } else if (c < out.front()) {
      std::pop_heap(out.begin(), out.end());
      out.back() = c;
      std::push_heap(out.begin(), out.end());
    }
  }
  std::sort_heap(out.begin(), out.end());
}

// R as a coverage gain over one group's kNN graph (facility location): programs j are covered by
// the chosen program most similar to them among j itself and its k nearest neighbours, with
// sim = exp(-dist / scale), scale = the group's mean kNN distance. gain[i] = how much choosing i
// would raise the total coverage; it is updated incrementally after every pick, touching only the
// neighbourhoods the pick changed (O(k^2) per pick instead of a pass over the group).
class Coverage {
 public:
  Coverage(const float* x, int d, const std::vector<int64_t>& m, int k,
           const std::vector<uint8_t>& chosen)
      : nbr_(m.size()), rev_(m.size()), best_(m.size(), 0.0), gain_(m.size(), 0.0) {
    size_t n = m.size();
    size_t kk = std::min<size_t>(static_cast<size_t>(k), n ? n - 1 : 0);
    std::vector<std::pair<float, size_t>> near;
    double total = 0;
    for (size_t j = 0; j < n; ++j) {
      nearest(x, d, m, j, kk, near);
      for (auto& [sq, i] : near) {
        double dist = std::sqrt(static_cast<double>(sq));
        nbr_[j].emplace_back(i, dist);  // a distance for now, a similarity below
        total += dist;
      }
    }
    double scale = kk ? total / static_cast<double>(n * kk) : 0.0;
    for (size_t j = 0; j < n; ++j) {
      for (auto& [i, v] : nbr_[j]) v = scale > 0 ? std::exp(-v / scale) : 1.0;
      nbr_[j].emplace_back(j, 1.0);
      for (auto& [i, v] : nbr_[j]) rev_[i].emplace_back(j, v);
    }
    for (size_t c = 0; c < n; ++c)
      if (chosen[c])
        for (auto& [j, v] : rev_[c]) best_[j] = std::max(best_[j], v);
    for (size_t j = 0; j < n; ++j)
      for (auto& [i, v] : nbr_[j]) gain_[i] += std::max(0.0, v - best_[j]);
  }
  double gain(size_t i) const { return gain_[i]; }
  void choose(size_t b) {
    for (auto& [j, v] : rev_[b]) {
      if (v <= best_[j]) continue;
      for (auto& [i, w] : nbr_[j]) gain_[i] -= std::max(0.0, w - best_[j]) - std::max(0.0, w - v);
      best_[j] = v;
    }
  }

 private:
  std::vector<std::vector<std::pair<size_t, double>>> nbr_, rev_;  // (member, similarity)
  std::vector<double> best_, gain_;
};

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
    std::vector<std::pair<float, size_t>> near;
    for (size_t t = blk * 64; t < std::min(rows.size(), blk * 64 + 64); ++t) {
      const auto& m = members[rows[t].first];
      nearest(x, d, m, rows[t].second, static_cast<size_t>(k), near);
      double sum = 0;
      for (auto& nb : near) sum += std::sqrt(static_cast<double>(nb.first));
      double cnt = static_cast<double>(near.size());
      out[m[rows[t].second]] = near.empty() ? 0.0f : static_cast<float>(sum / cnt);
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
                                   float wu, int coverage_k, int threads) {
  auto members = group_members(group, n);
  if (static_cast<int64_t>(members.size()) > n_groups)
    throw std::invalid_argument("budget has fewer entries than there are groups");
  members.resize(static_cast<size_t>(n_groups));
  std::vector<std::vector<int64_t>> picks(members.size());
  parallel_for(members.size(), threads, [&](size_t g) {
    const auto& m = members[g];
    // Work in member positions: taken[c] marks chosen members (selected before or picked now).
    std::vector<uint8_t> taken(m.size(), 0);
    for (size_t c = 0; c < m.size(); ++c) taken[c] = selected[m[c]];
    // md: distance of each candidate to the nearest chosen program (infinite when none yet).
    std::vector<float> md(m.size(), std::numeric_limits<float>::infinity());
    for (size_t s = 0; s < m.size(); ++s)
      if (taken[s])
        for (size_t c = 0; c < m.size(); ++c)
          if (!taken[c]) md[c] = std::min(md[c], std::sqrt(sqdist(x + m[c] * d, x + m[s] * d, d)));
    std::unique_ptr<Coverage> cover;
    if (coverage_k > 0) cover = std::make_unique<Coverage>(x, d, m, coverage_k, taken);
    int64_t left = 0;
    for (uint8_t t : taken) left += !t;
    int64_t want = std::min<int64_t>(budget[g], left);
    for (int64_t step = 0; step < want; ++step) {
      // D (and a coverage R) are normalised over the remaining candidates at every pick.
      float max_md = 0;
      double max_gain = 0;
      for (size_t c = 0; c < m.size(); ++c) {
        if (taken[c]) continue;
        if (std::isfinite(md[c])) max_md = std::max(max_md, md[c]);
        if (cover) max_gain = std::max(max_gain, cover->gain(c));
      }
      size_t best = m.size();
      float best_score = -std::numeric_limits<float>::infinity();
      for (size_t c = 0; c < m.size(); ++c) {
        if (taken[c]) continue;
        float dn = !std::isfinite(md[c]) ? 1.0f : (max_md > 0 ? md[c] / max_md : 0.0f);
        float rc = !cover ? r[m[c]]
                          : (max_gain > 0 ? static_cast<float>(cover->gain(c) / max_gain) : 0.0f);
        float score = wr * rc + wd * dn + wu * u[m[c]];
        if (score > best_score) {
          best_score = score;
          best = c;
        }
      }
      taken[best] = 1;
      if (cover) cover->choose(best);
      picks[g].push_back(m[best]);
      const float* xb = x + m[best] * d;
      for (size_t c = 0; c < m.size(); ++c)
        if (!taken[c]) md[c] = std::min(md[c], std::sqrt(sqdist(x + m[c] * d, xb, d)));
    }
  });
  std::vector<int64_t> out;
  for (auto& p : picks) out.insert(out.end(), p.begin(), p.end());
  return out;
}

}  // namespace tcl
