// A model base for tests that watch the trainer from inside a step or an epoch
// hook (which CPU a worker runs on, how many workers are in a step, what a crash
// loses) and need no evaluation: real-valued labels, zero loss, no accuracy.
// Derive as `class M : public test::Probe<M>` and add the step and tensors.
#pragma once

#include "hogwild/model_base.hpp"

namespace hogwild::test {

template <class Derived>
class Probe : public ModelBase<Derived> {
 public:
  LabelKind label_kind() const override { return LabelKind::real; }
  void predict(const ParamSet&, RowView, float, double& loss, bool& ok) const {
    loss = 0;
    ok = false;
  }
  bool reports_accuracy() const { return false; }
};

}  // namespace hogwild::test
