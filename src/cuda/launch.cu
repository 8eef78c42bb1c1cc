// Launch shapes and the bandwidth yardstick (a copy kernel).
#include <algorithm>

#include "cuda/warp.cuh"

namespace hogwild::detail {

namespace {

__global__ void copy_kernel(float4* dst, const float4* src, std::size_t n4) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n4;
       i += gridDim.x * std::size_t{blockDim.x})
    dst[i] = src[i];
}

__global__ void copy_tail(float* dst, const float* src, std::size_t begin, std::size_t n) {
  const std::size_t i = begin + threadIdx.x;
  if (i < n) dst[i] = src[i];
}

unsigned resident_blocks(unsigned threads) {
  int device = 0, sms = 0, per_sm = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device);
  return static_cast<unsigned>(sms > 0 && per_sm > 0 ? sms * (per_sm / threads) : 1024);
}

}  // namespace

namespace {
bool reread = false;
}  // namespace

void set_hogwild_reread(bool on) { reread = on; }
bool hogwild_reread() { return reread; }

LaunchShape launch_shape(const DeviceChunk& chunk) {
  if (chunk.access == DeviceAccess::serial) return {1, 32};
  constexpr unsigned kThreads = 256;  // 8 warps a block
  static const unsigned resident = resident_blocks(kThreads);
  std::size_t warps = std::max<std::size_t>(chunk.count, 1);  // a warp per example at most
  if (chunk.access != DeviceAccess::gradient && chunk.warps != 0)
    warps = std::min<std::size_t>(warps, chunk.warps);
  if (warps < kThreads / 32) return {1, static_cast<unsigned>(warps * 32)};
  const std::size_t blocks = (warps * 32 + kThreads - 1) / kThreads;
  return {static_cast<unsigned>(std::min<std::size_t>(blocks, resident)), kThreads};
}

void launch_copy(float* dst, const float* src, std::size_t n, void* stream) {
  auto* s = static_cast<cudaStream_t>(stream);
  const std::size_t n4 = n / 4;  // cudaMalloc'd arrays are 256-byte aligned
  copy_kernel<<<resident_blocks(256), 256, 0, s>>>(reinterpret_cast<float4*>(dst),
                                                   reinterpret_cast<const float4*>(src), n4);
  if (n % 4) copy_tail<<<1, 4, 0, s>>>(dst, src, n4 * 4, n);
}

}  // namespace hogwild::detail
