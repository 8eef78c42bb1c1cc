#include "modes/hogwild/hot_window.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "hogwild/error.hpp"
#include "hogwild/update_policy.hpp"

namespace hogwild {

void check_hot_coordinates(const Model& model, const Dataset& train, const char* option) {
  if (!model.feature_indexed())
    throw ConfigError(fmt::format("{} works with the linear models (logistic, hinge, squared), "
                                  "not {}", option, model.name()));
  if (train.layout() != Layout::sparse)
    throw ConfigError(fmt::format("{} needs sparse rows, and {} is {}", option, train.source(),
                                  to_string(train.layout())));
}

std::size_t HotWindow::window_floats(const std::vector<TensorSpec>& specs, std::size_t hot) {
  std::size_t n = hot;
  for (std::size_t t = 1; t < specs.size(); ++t) n += specs[t].size;
  return n;
}

HotWindow::HotWindow(const ParamSet& shared, std::vector<std::uint32_t> hot, float* window,
                     std::size_t flush_every, unsigned writers, const Dataset* rows,
                     RobustMutex* lock, detail::SettledShares settled)
    : shared_(shared),
      hot_(hot.size()),
      share_(1.f / static_cast<float>(std::max(writers, 1u))),
      settled_(std::move(settled)),
      window_(window),
      rows_(rows),
      interval_(flush_every ? flush_every : 1, detail::WriteBackInterval::kAutoStart, "HotWindow"),
      lock_(lock) {
  for (std::uint32_t j : hot) targets_.push_back(shared.data(0) + j);
  if (!settled_.empty()) {  // (its features are in index order)
    const auto& f = settled_.features();
    for (std::uint32_t j : hot) {
      const auto at = std::partition_point(f.begin(), f.end(), [j](const auto& x) { return x.index < j; });
      slot_settled_.push_back(at != f.end() && at->index == j ? static_cast<std::int32_t>(at - f.begin())
                                                             : -1);
    }
  }
  std::vector<ParamSet::Tensor> t{shared.tensors()[0]};
  float* next = window + hot.size();
  for (std::size_t i = 1; i < shared.count(); ++i) {
    const ParamSet::Tensor& s = shared.tensors()[i];
    for (std::size_t j = 0; j < s.size; ++j) targets_.push_back(s.data + j);
    t.push_back({s.name, next, s.size});
    next += s.size;
  }
  local_ = ParamSet(std::move(t));
  base_.resize(targets_.size());
  for (std::size_t s = 0; s < targets_.size(); ++s)
    window_[s] = base_[s] = detail::relaxed_load(targets_[s]);
  interval_.start();
}

void HotWindow::flush() noexcept {
  const std::uint64_t begun = interval_.begin();
  if (slot_settled_.empty()) {
    for (std::size_t s = 0; s < hot_; ++s)
      detail::merge_coordinate(targets_[s], window_[s], base_[s], /*atomic=*/true);
  } else {
    const std::span<const float> shares = settled_.at(static_cast<double>(interval_.writing()));
    for (std::size_t s = 0; s < hot_; ++s) {
      const std::int32_t i = slot_settled_[s];
      if (i >= 0 && shares[static_cast<std::size_t>(i)] < 1)
        detail::merge_coordinate_share(targets_[s], window_[s], base_[s], shares[static_cast<std::size_t>(i)]);
      else
        detail::merge_coordinate(targets_[s], window_[s], base_[s], /*atomic=*/true);
    }
  }
  for (std::size_t s = hot_; s < targets_.size(); ++s)
    detail::merge_coordinate_share(targets_[s], window_[s], base_[s], share_);
  interval_.end(begun);
  ++flushes_;
}

}  // namespace hogwild
