// The features a mini-batch of sparse rows holds: what a model's Model::touched
// lists keys from.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "hogwild/batch.hpp"

namespace hogwild::detail {

// The distinct feature ids below `limit` in the batch's rows, sorted, into `out`;
// false (and `out` left alone) when a row is dense or bytes: it holds every feature.
inline bool batch_features(const Batch& b, std::size_t limit, std::vector<std::uint32_t>& out) {
  for (std::size_t n = 0; n < b.size; ++n)
    if (b.row(n).bytes || b.row(n).dense()) return false;
  out.clear();
  for (std::size_t n = 0; n < b.size; ++n) {
    const RowView x = b.row(n);
    for (std::uint32_t k = 0; k < x.nnz; ++k)
      if (x.index[k] < limit) out.push_back(x.index[k]);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return true;
}

}  // namespace hogwild::detail
