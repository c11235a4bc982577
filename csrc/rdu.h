// RDU sampler kernels (see rdu.cc). Arrays are row-major float32 [n, d]; groups are task ids >= 0.
#pragma once

#include <cstdint>
#include <vector>

namespace tcl {

std::vector<std::vector<int64_t>> group_members(const int32_t* group, int64_t n);

// out[i] = mean Euclidean distance from x[i] to its k nearest neighbours in the same group
// (fewer when the group is smaller; 0 for a group of one).
void knn_mean_distance(const float* x, int64_t n, int d, const int32_t* group, int k, int threads,
                       float* out);

// out[i] = min_j ||x[i] - y[j]|| (inf when m == 0).
void min_distance(const float* x, int64_t n, const float* y, int64_t m, int d, int threads,
                  float* out);

// Greedy batch selection per group: repeatedly picks the unselected program with the highest
//   wr * R + wd * D + wu * u,  D = distance to the nearest selected program / its max over the
// remaining candidates (1 while nothing is selected), then updates D. With coverage_k == 0, R = r
// (given already normalised); with coverage_k > 0, R = the program's coverage gain on the group's
// coverage_k-nearest-neighbour graph (see rdu.cc), updated after every pick and normalised like D.
// u is given already normalised. Returns the picks, group by group, in the order they were made.
std::vector<int64_t> greedy_select(const float* x, int64_t n, int d, const int32_t* group,
                                   const int64_t* budget, int64_t n_groups, const float* r,
                                   const float* u, const uint8_t* selected, float wr, float wd,
                                   float wu, int coverage_k, int threads);

}  // namespace tcl
