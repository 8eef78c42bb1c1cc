#include "hogwild/replica.hpp"

#include <atomic>

#include "hogwild/update_policy.hpp"

namespace hogwild {

Replica::Replica(const ParamSet& shared, std::vector<Model::Ranges> ranges, std::size_t every,
                 bool atomic)
    : shared_(shared), ranges_(std::move(ranges)), every_(every), atomic_(atomic) {
  std::vector<ParamSet::Tensor> t;
  copy_.reserve(shared.count());
  base_.reserve(shared.count());
  for (const auto& s : shared.tensors()) {
    auto& c = copy_.emplace_back(s.size);
    for (std::size_t i = 0; i < s.size; ++i) c[i] = detail::relaxed_load(s.data + i);
    base_.push_back(c);
    t.push_back({s.name, c.data(), s.size});
  }
  local_ = ParamSet(std::move(t), /*exclusive=*/true);
  ranges_.resize(shared.count());
}

namespace {

// Mode atomic: one read-modify-write per changed coordinate, none lost. (Mode
// hogwild: detail::dense_merge_shared, vectorised.)
void merge_atomic(float* shared, float* copy, float* base, std::size_t n) noexcept {
  for (std::size_t j = 0; j < n; ++j) {
    const float d = copy[j] - base[j];
    const float s =
        d == 0 ? detail::relaxed_load(shared + j)  // nothing to add: no write, no line stolen
               : std::atomic_ref<float>(shared[j]).fetch_add(d, std::memory_order_relaxed) + d;
    copy[j] = base[j] = s;
  }
}

}  // namespace

void Replica::merge() noexcept {
  for (std::size_t t = 0; t < shared_.count(); ++t) {
    float* s = shared_.data(t);
    float* c = copy_[t].data();
    float* b = base_[t].data();
    // Called, never taken by address: the address of a target_clones function is an
    // IRELATIVE relocation that the dynamic loader resolves before the library's PLT
    // is set up, and under TSan the resolver itself calls through the PLT (crash at
    // load time).
    const auto run = [&](std::size_t begin, std::size_t end) {
      if (atomic_)
        merge_atomic(s + begin, c + begin, b + begin, end - begin);
      else
        detail::dense_merge_shared(s + begin, c + begin, b + begin, end - begin);
    };
    if (ranges_[t].empty())
      run(0, shared_.size(t));
    else
      for (const auto& [begin, end] : ranges_[t]) run(begin, end);
  }
  pending_ = 0;
  ++merges_;
}

}  // namespace hogwild
