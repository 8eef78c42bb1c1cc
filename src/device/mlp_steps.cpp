#include "device/mlp_steps.hpp"

#include <algorithm>

namespace hogwild::detail {

MlpSteps::MlpSteps(const MlpModel& model, const ParamSet& params, const std::vector<float*>& grads,
                   DeviceAccess access, bool adagrad, std::size_t batch,
                   const std::vector<MlpPrimitives*>& ops)
    : access_(access),
      adagrad_(adagrad),
      live_(access == DeviceAccess::hogwild || access == DeviceAccess::atomic),
      l2_(model.options().l2),
      batch_(std::max<std::size_t>(batch, 1)) {
  const std::vector<std::size_t>& w = model.widths();
  const std::size_t L = w.size() - 1;
  const bool bias = model.options().bias;
  std::size_t largest = 0;
  for (std::size_t l = 0, t = 0; l < L; ++l) {
    Layer& y = layers_.emplace_back();
    y.in = w[l];
    y.out = w[l + 1];
    y.W = params.data(t);
    y.W_state = params[t].state;
    y.W_grad = grads[t];
    ++t;
    if (bias) {
      y.b = params.data(t);
      y.b_state = params[t].state;
      y.b_grad = grads[t];
      ++t;
    }
    largest = std::max(largest, y.in * y.out);
  }
  for (MlpPrimitives* p : ops) {
    Stream& s = streams_.emplace_back();
    s.ops = p;
    if (live_)
      for (const Layer& y : layers_) s.copy.push_back(p->buffer(y.in * y.out));
    for (std::size_t l = 0; l <= L; ++l) s.act.push_back(p->buffer(w[l] * batch_));
    for (std::size_t l = 0; l + 1 < L; ++l) s.delta.push_back(p->buffer(w[l + 1] * batch_));
    s.G = p->buffer(largest);
  }
}

void MlpSteps::run(const DeviceChunk& c) {
  std::size_t i = 0;
  for (std::size_t pos = c.begin; pos < c.begin + c.count; pos += batch_, ++i)
    mini_batch(streams_[i % streams_.size()], c, pos, std::min(batch_, c.begin + c.count - pos));
}

void MlpSteps::mini_batch(Stream& s, const DeviceChunk& c, std::size_t pos, std::size_t n) {
  const std::size_t L = layers_.size();
  MlpPrimitives& ops = *s.ops;
  if (access_ == DeviceAccess::lock) ops.lock(c.lock, true);
  ops.gather(c.rows, c.order, pos, n, s.act[0]);
  // The weights the products read: a private copy where others write them meanwhile.
  std::vector<const float*> W(L);
  for (std::size_t l = 0; l < L; ++l) {
    const Layer& y = layers_[l];
    W[l] = y.W;
    if (live_) {
      ops.snapshot(access_, s.copy[l], y.W, y.in * y.out);
      W[l] = s.copy[l];
    }
  }
  // Forward: act[l + 1] (out x n) = W_l act[l], W_l stored in x out.
  for (std::size_t l = 0; l < L; ++l) {
    const Layer& y = layers_[l];
    ops.gemm(true, false, y.out, n, y.in, W[l], y.in, s.act[l], y.in, s.act[l + 1], y.out);
    ops.bias_act(access_, s.act[l + 1], y.b, y.out, n, l + 1 < L);
  }
  ops.softmax_top(s.act[L], c.rows.target, c.order, pos, layers_.back().out, n, c.loss_sum);
  // Backward, top first. The step takes the mini-batch's mean gradient plus l2 w, as
  // the CPU's; ddp's buffer takes its sum (the apply divides by the examples).
  const bool sum = access_ == DeviceAccess::gradient;
  const float scale = sum ? 1.f : 1.f / static_cast<float>(n);
  const float l2 = sum ? l2_ * static_cast<float>(n) : l2_;
  for (std::size_t l = L; l-- > 0;) {
    const Layer& y = layers_[l];
    const float* D = l + 1 == L ? s.act[L] : s.delta[l];
    if (l > 0) {  // before W_l's step
      ops.gemm(false, false, y.in, n, y.out, W[l], y.in, D, y.out, s.delta[l - 1], y.in);
      ops.relu_mask(s.delta[l - 1], s.act[l], y.in * n);
    }
    // G (in x out, W's layout) = act[l] D^T.
    ops.gemm(false, true, y.in, y.out, n, s.act[l], y.in, D, y.out, s.G, y.in);
    ops.dense_descent(access_, {y.W, y.W_state, y.W_grad, s.G, y.in * y.out, scale, l2, c.lr,
                                adagrad_});
    if (y.b)
      ops.bias_descent(access_, {y.b, y.b_state, y.b_grad, D, y.out, n, scale, c.lr, adagrad_});
  }
  if (access_ == DeviceAccess::lock) ops.lock(c.lock, false);
}

}  // namespace hogwild::detail
