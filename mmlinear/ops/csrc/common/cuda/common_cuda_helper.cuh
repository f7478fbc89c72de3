// Reductions and launch helpers shared by the CUDA kernels.
#pragma once

// c10 headers only: ATen/cuda/CUDAContext.h pulls in cuSPARSE / cuBLAS headers, which a
// minimal CUDA toolkit (nvcc + runtime, as on the CPU build machines) does not have.
#include <ATen/ATen.h>
#include <ATen/AccumulateType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

constexpr int kWarpSize = 32;
constexpr int kThreadsPerBlock = 256;

// AT_DISPATCH over the dtypes the CUDA kernels take (float, double, half, bfloat16): runs the
// lambda __VA_ARGS__ with `scalar_t` and `acc_t`, its accumulation type (float; double for
// double).
#define DISPATCH_CUDA_FLOATING_TYPES(type, name, ...)                                          \
  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, type, name, \
                                  [&] {                                                        \
                                    using acc_t = at::acc_type<scalar_t, true>;                \
                                    __VA_ARGS__();                                             \
                                  })

inline int blocks_for(int64_t n, int threads = kThreadsPerBlock) {
  return static_cast<int>((n + threads - 1) / threads);
}

// Sum over the 32 lanes of a warp; every lane receives the total.
template <typename T>
__device__ __forceinline__ T warp_sum(T value) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffff, value, offset);
  return value;
}

// Sum over a block whose size is a multiple of 32; `scratch` holds blockDim.x / 32 values.
// Every thread receives the total.
template <typename T>
__device__ __forceinline__ T block_sum(T value, T* scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  value = warp_sum(value);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  T total = 0;
  for (int w = 0; w < warps; ++w) total += scratch[w];
  return total;
}

// A dot product over the head dimension computed by one warp (lanes stride over d); every lane
// receives the result.
template <typename acc_t, typename A, typename B>
__device__ __forceinline__ acc_t warp_dot(const A* a, const B* b, int d) {
  acc_t sum = 0;
  for (int m = threadIdx.x % kWarpSize; m < d; m += kWarpSize)
    sum += static_cast<acc_t>(a[m]) * static_cast<acc_t>(b[m]);
  return warp_sum(sum);
}
