// Copies of parameter sets: ParamSnapshot, copy_ranges, coalesce_ranges.
#include <algorithm>

#include "hogwild/model.hpp"

namespace hogwild {

ParamSnapshot::ParamSnapshot(const ParamSet& live) {
  std::vector<ParamSet::Tensor> t;
  storage_.reserve(live.count());
  for (const auto& src : live.tensors()) {
    auto& dst = storage_.emplace_back(src.size);
    for (std::size_t i = 0; i < src.size; ++i) dst[i] = detail::relaxed_load(src.data + i);
    t.push_back({src.name, dst.data(), src.size});
  }
  view_ = ParamSet(std::move(t));
}

void ParamSnapshot::refresh(const ParamSet& live, const std::vector<Model::Ranges>& ranges) {
  copy_ranges(live, view_, ranges);
}

void copy_ranges(const ParamSet& from, const ParamSet& to,
                 const std::vector<Model::Ranges>& ranges) {
  for (std::size_t t = 0; t < from.count(); ++t) {
    const float* src = from.data(t);  // hoisted: the stores below may alias them
    float* dst = to.data(t);
    const auto copy = [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) dst[i] = detail::relaxed_load(src + i);
    };
    if (t >= ranges.size() || ranges[t].empty())
      copy(0, from.size(t));
    else
      for (const auto& [begin, end] : ranges[t]) copy(begin, end);
  }
}

Model::Ranges coalesce_ranges(const Model::Ranges& ranges, std::size_t gap) {
  Model::Ranges out;
  for (const auto& r : ranges) {
    if (!out.empty() && r.first - out.back().second < gap)
      out.back().second = std::max(out.back().second, r.second);
    else
      out.push_back(r);
  }
  return out;
}

}  // namespace hogwild
