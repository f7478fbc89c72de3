// CUDA per-sample depthwise convolution (stride 1, same padding k // 2). Forward and grad_x:
// one thread per pixel, reading its k x k neighbourhood; grad_weight and grad_bias: one block
// per (sample, channel) plane reducing over the pixels. Accumulation in float32 (float64).
#include <ATen/Dispatch.h>

#include "cuda/common_cuda_helper.cuh"

namespace {

template <typename scalar_t, typename acc_t>
__global__ void dwconv_forward_kernel(const scalar_t* __restrict__ x,
                                      const scalar_t* __restrict__ weight,
                                      const scalar_t* __restrict__ bias, int64_t total, int H,
                                      int W, int ks, scalar_t* out) {
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (idx >= total) return;
  const int ox = idx % W, oy = (idx / W) % H;
  const int64_t p = idx / (static_cast<int64_t>(H) * W);
  const int pad = ks / 2;
  const scalar_t* xp = x + p * H * W;
  const scalar_t* wp = weight + p * ks * ks;
  acc_t acc = bias ? static_cast<acc_t>(bias[p]) : acc_t(0);
  for (int u = 0; u < ks; ++u) {
    const int iy = oy + u - pad;
    if (iy < 0 || iy >= H) continue;
    for (int w = 0; w < ks; ++w) {
      const int ix = ox + w - pad;
      if (ix < 0 || ix >= W) continue;
      acc += static_cast<acc_t>(wp[u * ks + w]) * static_cast<acc_t>(xp[iy * W + ix]);
    }
  }
  out[idx] = static_cast<scalar_t>(acc);
}

// grad_x: the correlation of grad_out with the flipped kernel.
template <typename scalar_t, typename acc_t>
__global__ void dwconv_grad_input_kernel(const scalar_t* __restrict__ grad_out,
                                         const scalar_t* __restrict__ weight, int64_t total,
                                         int H, int W, int ks, scalar_t* grad_x) {
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (idx >= total) return;
  const int ix = idx % W, iy = (idx / W) % H;
  const int64_t p = idx / (static_cast<int64_t>(H) * W);
  const int pad = ks / 2;
  const scalar_t* gp = grad_out + p * H * W;
  const scalar_t* wp = weight + p * ks * ks;
  acc_t acc = 0;
  for (int u = 0; u < ks; ++u) {
    const int oy = iy - u + pad;
    if (oy < 0 || oy >= H) continue;
    for (int w = 0; w < ks; ++w) {
      const int ox = ix - w + pad;
      if (ox < 0 || ox >= W) continue;
      acc += static_cast<acc_t>(wp[u * ks + w]) * static_cast<acc_t>(gp[oy * W + ox]);
    }
  }
  grad_x[idx] = static_cast<scalar_t>(acc);
}

// grad_weight (every tap) and grad_bias of one plane per block.
template <typename scalar_t, typename acc_t>
__global__ void dwconv_grad_weight_kernel(const scalar_t* __restrict__ grad_out,
                                          const scalar_t* __restrict__ x, int H, int W, int ks,
                                          scalar_t* grad_weight, scalar_t* grad_bias) {
  __shared__ acc_t scratch[kThreadsPerBlock / kWarpSize];
  const int64_t p = blockIdx.x;
  const int pad = ks / 2, plane = H * W;
  const scalar_t* gp = grad_out + p * plane;
  const scalar_t* xp = x + p * plane;
  acc_t partial = 0;
  for (int i = threadIdx.x; i < plane; i += blockDim.x) partial += static_cast<acc_t>(gp[i]);
  const acc_t gb = block_sum(partial, scratch);
  if (threadIdx.x == 0) grad_bias[p] = static_cast<scalar_t>(gb);
  for (int tap = 0; tap < ks * ks; ++tap) {
    const int dy = tap / ks - pad, dx = tap % ks - pad;
    partial = 0;
    for (int i = threadIdx.x; i < plane; i += blockDim.x) {
      const int oy = i / W, ox = i % W, iy = oy + dy, ix = ox + dx;
      if (iy >= 0 && iy < H && ix >= 0 && ix < W)
        partial += static_cast<acc_t>(gp[i]) * static_cast<acc_t>(xp[iy * W + ix]);
    }
    const acc_t gw = block_sum(partial, scratch);
    if (threadIdx.x == 0) grad_weight[p * ks * ks + tap] = static_cast<scalar_t>(gw);
  }
}

}  // namespace

at::Tensor dynamic_dwconv2d_forward_cuda(const at::Tensor& x, const at::Tensor& weight,
                                         const at::Tensor& bias) {
  const c10::cuda::CUDAGuard guard(x.device());
  auto out = at::empty_like(x);
  const int64_t total = x.numel();
  if (total == 0) return out;
  DISPATCH_CUDA_FLOATING_TYPES(x.scalar_type(), "dynamic_dwconv2d_forward_cuda", [&] {
    dwconv_forward_kernel<scalar_t, acc_t>
        <<<blocks_for(total), kThreadsPerBlock, 0, c10::cuda::getCurrentCUDAStream()>>>(
            x.data_ptr<scalar_t>(), weight.data_ptr<scalar_t>(),
            bias.defined() ? bias.data_ptr<scalar_t>() : nullptr, total, x.size(2),
            x.size(3), weight.size(2), out.data_ptr<scalar_t>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

std::vector<at::Tensor> dynamic_dwconv2d_backward_cuda(const at::Tensor& grad_out,
                                                       const at::Tensor& x,
                                                       const at::Tensor& weight) {
  const c10::cuda::CUDAGuard guard(x.device());
  auto grad_x = at::empty_like(x);
  auto grad_weight = at::zeros_like(weight);
  auto grad_bias = at::zeros({x.size(0), x.size(1)}, x.options());
  const int64_t total = x.numel(), planes = x.size(0) * x.size(1);
  if (total == 0) return {grad_x, grad_weight, grad_bias};
  DISPATCH_CUDA_FLOATING_TYPES(x.scalar_type(), "dynamic_dwconv2d_backward_cuda", [&] {
    auto stream = c10::cuda::getCurrentCUDAStream();
    dwconv_grad_input_kernel<scalar_t, acc_t><<<blocks_for(total), kThreadsPerBlock, 0, stream>>>(
        grad_out.data_ptr<scalar_t>(), weight.data_ptr<scalar_t>(), total, x.size(2),
        x.size(3), weight.size(2), grad_x.data_ptr<scalar_t>());
    dwconv_grad_weight_kernel<scalar_t, acc_t><<<planes, kThreadsPerBlock, 0, stream>>>(
        grad_out.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), x.size(2), x.size(3),
        weight.size(2), grad_weight.data_ptr<scalar_t>(), grad_bias.data_ptr<scalar_t>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {grad_x, grad_weight, grad_bias};
}
