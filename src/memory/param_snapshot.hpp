// Private host copies of a parameter set, and the range copies they are made of.
#pragma once

#include <cstddef>
#include <vector>

#include "hogwild/param_set.hpp"

namespace hogwild {

// A private host copy of a ParamSet, in whatever memory space that lives
// (host_access(space).read: relaxed loads from the shared arena).
class ParamSnapshot {
 public:
  explicit ParamSnapshot(const ParamSet& live);
  const ParamSet& params() const noexcept { return view_; }
  // Copies again, from the same live set, only ranges[t] of tensor t (all of it where
  // ranges has no entry or an empty one): what training can have changed since.
  void refresh(const ParamSet& live, const std::vector<Ranges>& ranges);

 private:
  std::vector<std::vector<float>> storage_;
  ParamSet view_;
};

// Ranges whose gap is under `gap` coordinates joined into one (a copy of a few
// untouched floats costs less than another loop; 16 floats are a cache line).
Ranges coalesce_ranges(const Ranges& ranges, std::size_t gap);

// The coordinates in both `a` and `b` (sorted disjoint runs; empty = all, so the
// other is the answer; none in common: the one empty run {0, 0}, which copies
// nothing).
Ranges intersect_ranges(const Ranges& a, const Ranges& b);

// Copies `from` (any memory space, through its host_access) into `to` (the same
// shape, host memory this process alone writes meanwhile): ranges[t] of tensor t,
// all of it where `ranges` has no entry or an empty one for t.
void copy_ranges(const ParamSet& from, const ParamSet& to,
                 const std::vector<Ranges>& ranges);

}  // namespace hogwild
