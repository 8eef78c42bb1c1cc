#include "cuda/mlp_steps.hpp"

#include <algorithm>

#include "cuda/cublas.hpp"

namespace hogwild::detail {

MlpDeviceSteps::MlpDeviceSteps(const MlpModel& model, const ParamSet& params,
                               std::vector<float*> grads, DeviceAccess access, bool adagrad,
                               std::size_t batch, cudaStream_t stream)
    : access_(access),
      adagrad_(adagrad),
      live_(access == DeviceAccess::hogwild || access == DeviceAccess::atomic),
      l2_(model.options().l2),
      batch_(std::max<std::size_t>(batch, 1)),
      stream_(stream) {
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
    if (live_) y.copy = DeviceArray<float>(y.in * y.out);
    largest = std::max(largest, y.in * y.out);
  }
  for (std::size_t l = 0; l <= L; ++l) act_.emplace_back(w[l] * batch_);
  for (std::size_t l = 0; l + 1 < L; ++l) delta_.emplace_back(w[l + 1] * batch_);
  G_ = DeviceArray<float>(largest);
  const Cublas& api = cublas();
  HOGWILD_CUBLAS(api.create(&handle_));
  HOGWILD_CUBLAS(api.set_stream(handle_, stream_));
}

MlpDeviceSteps::~MlpDeviceSteps() {
  if (handle_) cublas().destroy(handle_);
}

void MlpDeviceSteps::gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k,
                          const float* A, std::size_t lda, const float* B, std::size_t ldb,
                          float* C, std::size_t ldc) {
  const float one = 1, zero = 0;
  const auto i = [](std::size_t x) { return static_cast<int>(x); };
  HOGWILD_CUBLAS(cublas().sgemm(handle_, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                tb ? CUBLAS_OP_T : CUBLAS_OP_N, i(m), i(n), i(k), &one, A, i(lda),
                                B, i(ldb), &zero, C, i(ldc)));
}

void MlpDeviceSteps::run(const DeviceChunk& c) {
  for (std::size_t pos = c.begin; pos < c.begin + c.count; pos += batch_)
    mini_batch(c, pos, std::min(batch_, c.begin + c.count - pos));
}

void MlpDeviceSteps::mini_batch(const DeviceChunk& c, std::size_t pos, std::size_t n) {
  const std::size_t L = layers_.size();
  if (access_ == DeviceAccess::lock) launch_lock(c.lock, true, stream_);
  launch_gather(c.rows, c.order, pos, n, act_[0].get(), stream_);
  // The weights the products read: a private copy where others write them meanwhile.
  std::vector<const float*> W(L);
  for (std::size_t l = 0; l < L; ++l) {
    Layer& y = layers_[l];
    W[l] = y.W;
    if (live_) {
      launch_snapshot(access_, y.copy.get(), y.W, y.in * y.out, stream_);
      W[l] = y.copy.get();
    }
  }
  // Forward: act[l + 1] (out x n) = W_l act[l], W_l stored in x out.
  for (std::size_t l = 0; l < L; ++l) {
    const Layer& y = layers_[l];
    gemm(true, false, y.out, n, y.in, W[l], y.in, act_[l].get(), y.in, act_[l + 1].get(), y.out);
    launch_bias_act(access_, act_[l + 1].get(), y.b, y.out, n, l + 1 < L, stream_);
  }
  launch_softmax_top(act_[L].get(), c.rows.target, c.order, pos, layers_.back().out, n,
                     c.loss_sum, stream_);
  // Backward, top first. The step takes the mini-batch's mean gradient plus l2 w, as
  // the CPU's; ddp's buffer takes its sum (the apply divides by the examples).
  const bool sum = access_ == DeviceAccess::gradient;
  const float scale = sum ? 1.f : 1.f / static_cast<float>(n);
  const float l2 = sum ? l2_ * static_cast<float>(n) : l2_;
  for (std::size_t l = L; l-- > 0;) {
    Layer& y = layers_[l];
    const float* D = l + 1 == L ? act_[L].get() : delta_[l].get();
    if (l > 0) {  // before W_l's step
      gemm(false, false, y.in, n, y.out, W[l], y.in, D, y.out, delta_[l - 1].get(), y.in);
      launch_relu_mask(delta_[l - 1].get(), act_[l].get(), y.in * n, stream_);
    }
    // G (in x out, W's layout) = act[l] D^T.
    gemm(false, true, y.in, y.out, n, act_[l].get(), y.in, D, y.out, G_.get(), y.in);
    launch_dense_descent(access_,
                         {y.W, y.W_state, y.W_grad, G_.get(), y.in * y.out, scale, l2, c.lr,
                          adagrad_},
                         stream_);
    if (y.b)
      launch_bias_descent(access_, {y.b, y.b_state, y.b_grad, D, y.out, n, scale, c.lr, adagrad_},
                          stream_);
  }
  if (access_ == DeviceAccess::lock) launch_lock(c.lock, false, stream_);
}

}  // namespace hogwild::detail
