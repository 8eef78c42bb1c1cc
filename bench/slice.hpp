// Rows [begin, end) of a sparse dataset as a dataset of their own (the benches cut
// one generated problem into a training and a test set, so both share its hidden
// weights).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "hogwild/dataset.hpp"

namespace hogwild::bench {

inline Dataset slice(const Dataset& d, std::size_t begin, std::size_t end, std::string name) {
  auto off = d.offsets();
  std::vector<std::uint64_t> rebased(off.begin() + static_cast<std::ptrdiff_t>(begin),
                                     off.begin() + static_cast<std::ptrdiff_t>(end) + 1);
  for (auto& o : rebased) o -= off[begin];
  return Dataset::sparse(d.labels().subspan(begin, end - begin), rebased,
                         d.indices().subspan(off[begin], off[end] - off[begin]),
                         d.values().subspan(off[begin], off[end] - off[begin]), d.cols(),
                         std::move(name));
}

}  // namespace hogwild::bench
