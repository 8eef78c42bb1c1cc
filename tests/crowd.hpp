// A probe model that counts the workers inside its step at once, in a shared page:
// each step enters, raises the high-water mark, works about 20 us, and leaves. What
// a mode's locking lets through (test_modes.cpp, test_striped.cpp).
#pragma once

#include <atomic>
#include <chrono>

#include "probe.hpp"

namespace hogwild::test {

struct Occupancy {
  std::atomic<int> inside{0};
  std::atomic<int> most{0};
};

class Crowd : public Probe<Crowd> {
 public:
  explicit Crowd(Occupancy* o) : o_(o) {}
  std::string name() const override { return "crowd"; }
  void configure(const Problem&) override {}
  std::vector<TensorSpec> parameters() const override { return {{"w", 1, {}}}; }
  template <class U>
  double step(const Batch&, const ParamSet& p, float) {
    const int now = o_->inside.fetch_add(1) + 1;
    for (int seen = o_->most.load(); now > seen && !o_->most.compare_exchange_weak(seen, now);) {
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
    while (std::chrono::steady_clock::now() < until) {
    }
    U::descend(p[0], 0, -1.0f, 1.0f);  // w += 1
    o_->inside.fetch_sub(1);
    return 0;
  }

 private:
  Occupancy* o_;
};

}  // namespace hogwild::test
