#include "comm/nccl.hpp"

#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <cstring>
#include <fmt/format.h>
#include <mutex>
#include <vector>

#include "cuda/check.hpp"
#include "dynamic_library.hpp"
#include "hogwild/error.hpp"
#include "memory/device_arena.hpp"

#ifndef HOGWILD_NCCL_FALLBACK
#define HOGWILD_NCCL_FALLBACK "libnccl.so.2"
#endif

namespace hogwild::detail {

namespace {

// NCCL's entry points, from the library loaded at run time.
struct Nccl {
  decltype(&::ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&::ncclCommInitRankConfig) init = nullptr;
  decltype(&::ncclCommGetAsyncError) async_error = nullptr;
  decltype(&::ncclCommAbort) abort = nullptr;
  decltype(&::ncclCommFinalize) finalize = nullptr;
  decltype(&::ncclCommDestroy) destroy = nullptr;
  decltype(&::ncclAllReduce) all_reduce = nullptr;
  decltype(&::ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&::ncclAllGather) all_gather = nullptr;
  decltype(&::ncclBroadcast) broadcast = nullptr;
  decltype(&::ncclGetErrorString) error_string = nullptr;
};

const Nccl& nccl() {
  static Nccl api;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    DynamicLibrary lib({"libnccl.so.2", HOGWILD_NCCL_FALLBACK});
    lib.get("ncclGetUniqueId", api.get_unique_id);
    lib.get("ncclCommInitRankConfig", api.init);
    lib.get("ncclCommGetAsyncError", api.async_error);
    lib.get("ncclCommAbort", api.abort);
    lib.get("ncclCommFinalize", api.finalize);
    lib.get("ncclCommDestroy", api.destroy);
    lib.get("ncclAllReduce", api.all_reduce);
    lib.get("ncclReduceScatter", api.reduce_scatter);
    lib.get("ncclAllGather", api.all_gather);
    lib.get("ncclBroadcast", api.broadcast);
    lib.get("ncclGetErrorString", api.error_string);
    failure = lib.failure();
  });
  if (!failure.empty()) throw ConfigError("NCCL cannot be loaded: " + failure);
  return api;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(unsigned rank, unsigned size, int device, const char (&id)[128],
                   std::chrono::milliseconds timeout, const std::atomic<std::int32_t>* stop)
      : Communicator(timeout), rank_(rank), size_(size), stop_(stop) {
    const Nccl& api = nccl();
    cuda_init(fmt::format("NCCL rank {}", rank), device);
    HOGWILD_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    ncclUniqueId uid;
    std::memcpy(uid.internal, id, sizeof uid.internal);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // every call returns; wait() watches and aborts
    const ncclResult_t r = api.init(&comm_, static_cast<int>(size), uid, static_cast<int>(rank),
                                    &config);
    if (r != ncclSuccess && r != ncclInProgress) fail(r, "ncclCommInitRankConfig");
    wait("joining the group", /*on_stream=*/false);
  }
  ~NcclCommunicator() override {
    if (comm_) {
      // A clean end flushes (finalize, non-blocking: watched until done, within the
      // timeout) then frees; after a failure the communicator was aborted already.
      const Nccl& api = nccl();
      ncclResult_t s = api.finalize(comm_);
      const auto deadline = std::chrono::steady_clock::now() + timeout_;
      while ((s == ncclSuccess || s == ncclInProgress) && api.async_error(comm_, &s) == ncclSuccess &&
             s == ncclInProgress && std::chrono::steady_clock::now() < deadline)
        ::usleep(100);
      if (s == ncclSuccess) api.destroy(comm_);
      else api.abort(comm_);
    }
    if (scratch_) cudaFree(scratch_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  unsigned rank() const noexcept override { return rank_; }
  unsigned size() const noexcept override { return size_; }
  std::string_view backend() const noexcept override { return "nccl"; }

  void all_reduce(std::span<float> d, Reduce op) override { reduce(d.data(), d.size(), ncclFloat, op); }
  void all_reduce(std::span<double> d, Reduce op) override { reduce(d.data(), d.size(), ncclDouble, op); }
  void reduce_scatter(std::span<float> d) override { scatter(d.data(), d.size(), sizeof(float), ncclFloat); }
  void reduce_scatter(std::span<double> d) override { scatter(d.data(), d.size(), sizeof(double), ncclDouble); }
  void all_gather(std::span<float> d) override { gather(d.data(), d.size(), sizeof(float), ncclFloat); }
  void all_gather(std::span<double> d) override { gather(d.data(), d.size(), sizeof(double), ncclDouble); }

  std::vector<IndexValue> all_gather(std::span<const IndexValue> mine) override {
    // Host lists: their lengths first, then every list padded to the longest.
    auto* counts = static_cast<std::uint64_t*>(scratch(size_ * sizeof(std::uint64_t)));
    const std::uint64_t n = mine.size();
    HOGWILD_CUDA(cudaMemcpyAsync(counts + rank_, &n, 8, cudaMemcpyHostToDevice, stream_));
    enqueue(nccl().all_gather(counts + rank_, counts, 1, ncclUint64, comm_, stream_), "ncclAllGather");
    std::vector<std::uint64_t> lengths(size_);
    HOGWILD_CUDA(cudaMemcpyAsync(lengths.data(), counts, size_ * 8, cudaMemcpyDeviceToHost, stream_));
    wait("all_gather (lengths)");
    std::uint64_t longest = 0;
    for (auto l : lengths) longest = std::max(longest, l);
    std::vector<IndexValue> all(longest * size_);
    auto* buf = static_cast<IndexValue*>(scratch(all.size() * sizeof(IndexValue)));
    if (longest) {
      HOGWILD_CUDA(cudaMemcpyAsync(buf + rank_ * longest, mine.data(), mine.size_bytes(),
                                   cudaMemcpyHostToDevice, stream_));
      enqueue(nccl().all_gather(buf + rank_ * longest, buf, longest, ncclUint64, comm_, stream_),
              "ncclAllGather");
      HOGWILD_CUDA(cudaMemcpyAsync(all.data(), buf, all.size() * sizeof(IndexValue),
                                   cudaMemcpyDeviceToHost, stream_));
      wait("all_gather");
    }
    std::vector<IndexValue> out;
    for (unsigned r = 0; r < size_; ++r)
      out.insert(out.end(), all.begin() + static_cast<std::ptrdiff_t>(r * longest),
                 all.begin() + static_cast<std::ptrdiff_t>(r * longest + lengths[r]));
    return out;
  }
  void broadcast(std::span<std::byte> d, unsigned root) override {
    enqueue(nccl().broadcast(d.data(), d.data(), d.size(), ncclUint8, static_cast<int>(root),
                             comm_, stream_),
            "ncclBroadcast");
    wait("broadcast");
  }
  void barrier() override {
    auto* one = static_cast<float*>(scratch(sizeof(float)));
    enqueue(nccl().all_reduce(one, one, 1, ncclFloat, ncclSum, comm_, stream_), "ncclAllReduce");
    wait("barrier");
  }
  void abort(std::string_view why) noexcept override {
    std::lock_guard<std::mutex> g(why_mutex_);
    if (why_.empty()) why_ = std::string(why);
    aborted_.store(true, std::memory_order_release);
  }

 private:
  void reduce(void* d, std::size_t n, ncclDataType_t type, Reduce op) {
    enqueue(nccl().all_reduce(d, d, n, type, op == Reduce::mean ? ncclAvg : ncclSum, comm_, stream_),
            "ncclAllReduce");
    wait("all_reduce");
  }
  // In place over slice_of's parts: NCCL's parts are equal, so an n that does not
  // divide goes through a padded copy.
  void scatter(void* d, std::size_t n, std::size_t bytes, ncclDataType_t type) {
    const std::size_t per = (n + size_ - 1) / size_;
    auto* buf = static_cast<std::byte*>(padded(d, n, per, bytes));
    enqueue(nccl().reduce_scatter(buf, buf + rank_ * per * bytes, per, type, ncclSum, comm_, stream_),
            "ncclReduceScatter");
    unpad(d, buf, n, per, bytes, slice_of(n, rank_, size_));
    wait("reduce_scatter");
  }
  void gather(void* d, std::size_t n, std::size_t bytes, ncclDataType_t type) {
    const std::size_t per = (n + size_ - 1) / size_;
    auto* buf = static_cast<std::byte*>(padded(d, n, per, bytes));
    enqueue(nccl().all_gather(buf + rank_ * per * bytes, buf, per, type, comm_, stream_),
            "ncclAllGather");
    unpad(d, buf, n, per, bytes, Slice{0, n});
    wait("all_gather");
  }
  void* padded(void* d, std::size_t n, std::size_t per, std::size_t bytes) {
    if (per * size_ == n) return d;
    void* buf = scratch(per * size_ * bytes);
    HOGWILD_CUDA(cudaMemsetAsync(buf, 0, per * size_ * bytes, stream_));
    HOGWILD_CUDA(cudaMemcpyAsync(buf, d, n * bytes, cudaMemcpyDeviceToDevice, stream_));
    return buf;
  }
  void unpad(void* d, std::byte* buf, std::size_t n, std::size_t per, std::size_t bytes, Slice s) {
    if (per * size_ == n || s.size() == 0) return;
    HOGWILD_CUDA(cudaMemcpyAsync(static_cast<std::byte*>(d) + s.begin * bytes, buf + s.begin * bytes,
                                 s.size() * bytes, cudaMemcpyDeviceToDevice, stream_));
  }
  void* scratch(std::size_t bytes) {
    if (bytes > scratch_bytes_) {
      if (scratch_) HOGWILD_CUDA(cudaFree(scratch_));
      scratch_ = nullptr;
      HOGWILD_CUDA(cudaMalloc(&scratch_, bytes));
      scratch_bytes_ = bytes;
    }
    return scratch_;
  }
  void enqueue(ncclResult_t r, const char* call) {
    if (r != ncclSuccess && r != ncclInProgress) fail(r, call);
  }
  // Until the stream (or the initialisation) is done; the watchdog's checks between.
  void wait(const char* what, bool on_stream = true) {
    const Nccl& api = nccl();
    const auto start = std::chrono::steady_clock::now();
    for (unsigned spin = 0;; ++spin) {
      ncclResult_t state = ncclSuccess;
      if (api.async_error(comm_, &state) != ncclSuccess || (state != ncclSuccess && state != ncclInProgress))
        fail(state, what);
      const bool done = state == ncclSuccess &&
                        (!on_stream || cudaStreamQuery(stream_) == cudaSuccess);
      if (done) return;
      if (aborted_.load(std::memory_order_acquire)) {
        std::lock_guard<std::mutex> g(why_mutex_);
        give_up(fmt::format("rank {} aborted: {}", rank_, why_));
      }
      if (stop_ && stop_->load(std::memory_order_relaxed))
        give_up(fmt::format("rank {}: the run stopped during {}", rank_, what));
      if (std::chrono::steady_clock::now() - start > timeout_)
        give_up(fmt::format("rank {} of {}: {} did not finish within {:.1f}s (NCCL; a rank may be "
                            "gone)", rank_, size_, what, timeout_.count() / 1000.0));
      if (spin > 1000) ::usleep(50);
    }
  }
  [[noreturn]] void fail(ncclResult_t r, const char* what) {
    give_up(fmt::format("rank {} of {}: {} failed: {} (ncclResult_t {})", rank_, size_, what,
                        nccl().error_string(r), static_cast<int>(r)));
  }
  [[noreturn]] void give_up(const std::string& why) {
    if (comm_) nccl().abort(comm_);  // frees this rank's side; the others see an error
    comm_ = nullptr;
    throw CommError(why);
  }

  unsigned rank_, size_;
  const std::atomic<std::int32_t>* stop_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
  std::atomic<bool> aborted_{false};
  std::mutex why_mutex_;
  std::string why_;
};

}  // namespace

void make_nccl_id(char (&id)[128]) {
  const Nccl& api = nccl();
  ncclUniqueId uid;
  const ncclResult_t r = api.get_unique_id(&uid);
  if (r != ncclSuccess)
    throw CommError(fmt::format("ncclGetUniqueId failed: {}", api.error_string(r)));
  std::memcpy(id, uid.internal, sizeof uid.internal);
}

std::unique_ptr<Communicator> make_nccl_communicator(unsigned rank, unsigned size, int device,
                                                     const char (&id)[128],
                                                     std::chrono::milliseconds timeout,
                                                     const std::atomic<std::int32_t>* stop) {
  return std::make_unique<NcclCommunicator>(rank, size, device, id, timeout, stop);
}

}  // namespace hogwild::detail
