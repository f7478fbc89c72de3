// CUDA Linear-InfSA sums (the two passes of its factorised form, forward and backward). The
// reductions over tokens run one block per (sample, head, chunk of tokens) and write their
// partial sums to their own slot of a (B, chunks, H, ...) buffer, summed afterwards in a fixed
// order (token_chunks.hpp): no atomics, results independent of scheduling. Warps take whole
// rows (lanes stride over d or C, so loads are coalesced). Everything accumulates in float32
// (float64 for double).
#include <ATen/Dispatch.h>

#include "cuda/common_cuda_helper.cuh"
#include "token_chunks.hpp"

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;
// The key pooling scores a tile of this many tokens, then pools the inputs over it.
constexpr int kTile = kThreads;

// The strides of a (B, H, n, d) tensor whose last dimension is contiguous.
struct HeadRows {
  int64_t sb, sh, sn;
};

HeadRows head_rows(const at::Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2)}; }

struct SumShape {
  int H, n, d, C;
  int64_t chunk_tokens, chunks;
};

SumShape sum_shape(const at::Tensor& heads, int64_t C) {
  const int64_t n = heads.size(2);
  const int64_t tokens = mmlinear::chunk_tokens(n, kTile, kTile);
  return {static_cast<int>(heads.size(1)), static_cast<int>(n), static_cast<int>(heads.size(3)),
          static_cast<int>(C), tokens, mmlinear::num_chunks(n, tokens)};
}

at::Tensor empty_rows_like(const at::Tensor& like) {
  auto out = at::empty_like(like, at::MemoryFormat::Preserve);
  return out.stride(-1) == 1 ? out : at::empty(like.sizes(), like.options());
}

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

const bool* mask_ptr(const at::Tensor& mask) {
  return mask.defined() ? mask.data_ptr<bool>() : nullptr;
}

// Block (b, h, chunk) -> part[b][chunk][h] = (sum_i e_i q_i / sqrt(d), sum_i e_i).
template <typename scalar_t, typename acc_t>
__global__ void query_sums_kernel(const scalar_t* __restrict__ q, HeadRows qs,
                                  const bool* __restrict__ mask, SumShape sh, acc_t* part) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  acc_t* warp_part = reinterpret_cast<acc_t*>(smem_raw);  // [kWarps][d]
  acc_t* scratch = warp_part + kWarps * sh.d;              // [kWarps]
  const int64_t chunk = blockIdx.x % sh.chunks, bh = blockIdx.x / sh.chunks;
  const int64_t b = bh / sh.H, h = bh % sh.H;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize, d = sh.d;
  const acc_t scale = rsqrt(static_cast<acc_t>(d));
  for (int i = threadIdx.x; i < kWarps * d; i += blockDim.x) warp_part[i] = 0;
  __syncthreads();
  const int64_t i0 = chunk * sh.chunk_tokens;
  const int64_t i1 = min64(sh.n, i0 + sh.chunk_tokens);
  acc_t esum = 0;
  for (int64_t i = i0 + warp; i < i1; i += kWarps) {
    if (mask && mask[b * sh.n + i]) continue;
    const scalar_t* qi = q + b * qs.sb + h * qs.sh + i * qs.sn;
    const acc_t e = scale * sqrt(warp_dot<acc_t>(qi, qi, d));
    esum += e;
    for (int m = lane; m < d; m += kWarpSize)
      warp_part[warp * d + m] += e * scale * static_cast<acc_t>(qi[m]);
  }
  __syncthreads();
  acc_t* out = part + ((b * sh.chunks + chunk) * sh.H + h) * (d + 1);
  for (int m = threadIdx.x; m < d; m += blockDim.x) {
    acc_t s = 0;
    for (int w = 0; w < kWarps; ++w) s += warp_part[w * d + m];
    out[m] = s;
  }
  const acc_t total = block_sum(lane == 0 ? esum : acc_t(0), scratch);
  if (threadIdx.x == 0) out[d] = total;
}

// One warp per (b, h, i): grad_q = (e g + ((s . g) + g_e) s / e) / sqrt(d), s = q / sqrt(d).
template <typename scalar_t, typename acc_t>
__global__ void query_sums_backward_kernel(const acc_t* __restrict__ grad_queries,
                                           const acc_t* __restrict__ grad_energy,
                                           const scalar_t* __restrict__ q, HeadRows qs,
                                           const bool* __restrict__ mask, int64_t B, SumShape sh,
                                           scalar_t* grad_q, HeadRows gs) {
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  if (row >= B * sh.H * sh.n) return;
  const int lane = threadIdx.x % kWarpSize, d = sh.d;
  const int64_t i = row % sh.n, bh = row / sh.n, b = bh / sh.H, h = bh % sh.H;
  const scalar_t* qi = q + b * qs.sb + h * qs.sh + i * qs.sn;
  scalar_t* gi = grad_q + b * gs.sb + h * gs.sh + i * gs.sn;
  const acc_t scale = rsqrt(static_cast<acc_t>(d));
  const bool masked = mask && mask[b * sh.n + i];
  const acc_t e = masked ? acc_t(0) : scale * sqrt(warp_dot<acc_t>(qi, qi, d));
  const acc_t* g = grad_queries + bh * d;
  const acc_t coef = e > 0 ? (scale * warp_dot<acc_t>(qi, g, d) + grad_energy[bh]) / e : acc_t(0);
  for (int m = lane; m < d; m += kWarpSize)
    gi[m] = e > 0 ? static_cast<scalar_t>(scale * (e * g[m] + coef * scale *
                                                                  static_cast<acc_t>(qi[m])))
                  : scalar_t(0);
}

// Block (b, h, chunk) -> part[b][chunk][h] = (sum_j s_j x_j, sum_j s_j): per tile, the warps
// score its tokens into shared memory, then each thread pools its channels over the tile.
template <typename scalar_t, typename acc_t>
__global__ void key_pool_kernel(const acc_t* __restrict__ central, const scalar_t* __restrict__ k,
                                HeadRows ks, const scalar_t* __restrict__ x, int64_t xsb,
                                int64_t xsn, const bool* __restrict__ mask, SumShape sh,
                                acc_t* part) {
  __shared__ acc_t score[kTile];
  __shared__ acc_t scratch[kWarps];
  const int64_t chunk = blockIdx.x % sh.chunks, bh = blockIdx.x / sh.chunks;
  const int64_t b = bh / sh.H, h = bh % sh.H;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize, d = sh.d;
  const acc_t scale = rsqrt(static_cast<acc_t>(d));
  const acc_t* c = central + bh * d;
  acc_t* out = part + ((b * sh.chunks + chunk) * sh.H + h) * (sh.C + 1);
  for (int m = threadIdx.x; m < sh.C; m += blockDim.x) out[m] = 0;
  const int64_t j_end = min64(sh.n, (chunk + 1) * sh.chunk_tokens);
  acc_t ssum = 0;
  for (int64_t j0 = chunk * sh.chunk_tokens; j0 < j_end; j0 += kTile) {
    const int tile = static_cast<int>(min64(kTile, j_end - j0));
    for (int t = warp; t < kTile; t += kWarps) {
      const int64_t j = j0 + t;
      acc_t s = 0;
      if (t < tile && !(mask && mask[b * sh.n + j]))
        s = max(scale * warp_dot<acc_t>(k + b * ks.sb + h * ks.sh + j * ks.sn, c, d), acc_t(0));
      if (lane == 0) {
        score[t] = s;
        ssum += s;
      }
    }
    __syncthreads();
    for (int m = threadIdx.x; m < sh.C; m += blockDim.x) {
      const scalar_t* xm = x + b * xsb + j0 * xsn + m;
      acc_t acc = 0;
      for (int t = 0; t < tile; ++t) acc += score[t] * static_cast<acc_t>(xm[t * xsn]);
      out[m] += acc;
    }
    __syncthreads();  // the next tile overwrites the scores
  }
  const acc_t total = block_sum(ssum, scratch);
  if (threadIdx.x == 0) out[sh.C] = total;
}

// Block (b, h, chunk), one warp per token: on a positive score, dL/ds = x_j . g_h + g_s,h
// gives grad_k and the central query's partial gradient part[b][chunk][h].
template <typename scalar_t, typename acc_t>
__global__ void key_pool_backward_keys_kernel(
    const acc_t* __restrict__ grad_inputs, const acc_t* __restrict__ grad_scores,
    const acc_t* __restrict__ central, const scalar_t* __restrict__ k, HeadRows ks,
    const scalar_t* __restrict__ x, int64_t xsb, int64_t xsn, const bool* __restrict__ mask,
    SumShape sh, acc_t* part, scalar_t* grad_k, HeadRows gks) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  acc_t* warp_part = reinterpret_cast<acc_t*>(smem_raw);  // [kWarps][d]
  const int64_t chunk = blockIdx.x % sh.chunks, bh = blockIdx.x / sh.chunks;
  const int64_t b = bh / sh.H, h = bh % sh.H;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize, d = sh.d;
  const acc_t scale = rsqrt(static_cast<acc_t>(d));
  const acc_t* c = central + bh * d;
  const acc_t* g = grad_inputs + bh * sh.C;
  for (int i = threadIdx.x; i < kWarps * d; i += blockDim.x) warp_part[i] = 0;
  __syncthreads();
  const int64_t j1 = min64(sh.n, (chunk + 1) * sh.chunk_tokens);
  for (int64_t j = chunk * sh.chunk_tokens + warp; j < j1; j += kWarps) {
    const scalar_t* kj = k + b * ks.sb + h * ks.sh + j * ks.sn;
    scalar_t* gkj = grad_k + b * gks.sb + h * gks.sh + j * gks.sn;
    const bool masked = mask && mask[b * sh.n + j];
    const acc_t s = masked ? acc_t(0) : scale * warp_dot<acc_t>(kj, c, d);
    if (!(s > 0)) {
      for (int m = lane; m < d; m += kWarpSize) gkj[m] = scalar_t(0);
      continue;
    }
    const acc_t gz = scale * (warp_dot<acc_t>(x + b * xsb + j * xsn, g, sh.C) + grad_scores[bh]);
    for (int m = lane; m < d; m += kWarpSize) {
      gkj[m] = static_cast<scalar_t>(gz * c[m]);
      warp_part[warp * d + m] += gz * static_cast<acc_t>(kj[m]);
    }
  }
  __syncthreads();
  acc_t* out = part + ((b * sh.chunks + chunk) * sh.H + h) * d;
  for (int m = threadIdx.x; m < d; m += blockDim.x) {
    acc_t s = 0;
    for (int w = 0; w < kWarps; ++w) s += warp_part[w * d + m];
    out[m] = s;
  }
}

// One warp per (b, j): grad_x_j = sum_h s_hj g_h, the H scores kept in shared memory.
template <typename scalar_t, typename acc_t>
__global__ void key_pool_backward_inputs_kernel(
    const acc_t* __restrict__ grad_inputs, const acc_t* __restrict__ central,
    const scalar_t* __restrict__ k, HeadRows ks, const bool* __restrict__ mask, int64_t B,
    SumShape sh, scalar_t* grad_x, int64_t gxsb, int64_t gxsn) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize, d = sh.d;
  acc_t* score = reinterpret_cast<acc_t*>(smem_raw) + warp * sh.H;  // [kWarps][H]
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  if (row >= B * sh.n) return;
  const int64_t b = row / sh.n, j = row % sh.n;
  const acc_t scale = rsqrt(static_cast<acc_t>(d));
  const bool masked = mask && mask[b * sh.n + j];
  for (int h = 0; h < sh.H; ++h) {
    const acc_t s =
        masked ? acc_t(0)
               : scale * warp_dot<acc_t>(k + b * ks.sb + h * ks.sh + j * ks.sn,
                                         central + (b * sh.H + h) * d, d);
    if (lane == 0) score[h] = s > 0 ? s : acc_t(0);
  }
  __syncwarp();
  scalar_t* gxj = grad_x + b * gxsb + j * gxsn;
  for (int m = lane; m < sh.C; m += kWarpSize) {
    acc_t acc = 0;
    for (int h = 0; h < sh.H; ++h) acc += score[h] * grad_inputs[(b * sh.H + h) * sh.C + m];
    gxj[m] = static_cast<scalar_t>(acc);
  }
}

at::TensorOptions acc_options(const at::Tensor& t) {
  return t.options().dtype(t.scalar_type() == at::kDouble ? at::kDouble : at::kFloat);
}

int warp_blocks(int64_t rows) { return static_cast<int>((rows + kWarps - 1) / kWarps); }

}  // namespace

std::vector<at::Tensor> linear_infsa_query_sums_cuda(const at::Tensor& q, const at::Tensor& mask) {
  const c10::cuda::CUDAGuard guard(q.device());
  const int64_t B = q.size(0);
  const auto sh = sum_shape(q, 0);
  auto part = at::zeros({B, sh.chunks, sh.H, sh.d + 1}, acc_options(q));
  if (B * sh.H > 0) {
    DISPATCH_CUDA_FLOATING_TYPES(q.scalar_type(), "linear_infsa_query_sums_cuda", [&] {
      const size_t smem = (kWarps * sh.d + kWarps) * sizeof(acc_t);
      query_sums_kernel<scalar_t, acc_t>
          <<<B * sh.H * sh.chunks, kThreads, smem, c10::cuda::getCurrentCUDAStream()>>>(
              q.data_ptr<scalar_t>(), head_rows(q), mask_ptr(mask), sh,
              part.data_ptr<acc_t>());
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  const auto total = part.sum(1);
  return {total.narrow(-1, 0, sh.d).clone(), total.select(-1, sh.d).clone()};
}

at::Tensor linear_infsa_query_sums_backward_cuda(const at::Tensor& grad_queries,
                                                 const at::Tensor& grad_energy,
                                                 const at::Tensor& q, const at::Tensor& mask) {
  const c10::cuda::CUDAGuard guard(q.device());
  const int64_t B = q.size(0);
  const auto sh = sum_shape(q, 0);
  auto grad_q = empty_rows_like(q);
  const int64_t rows = B * sh.H * sh.n;
  if (rows == 0) return grad_q;
  DISPATCH_CUDA_FLOATING_TYPES(q.scalar_type(), "linear_infsa_query_sums_backward_cuda", [&] {
    query_sums_backward_kernel<scalar_t, acc_t>
        <<<warp_blocks(rows), kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
            grad_queries.data_ptr<acc_t>(), grad_energy.data_ptr<acc_t>(),
            q.data_ptr<scalar_t>(), head_rows(q), mask_ptr(mask), B, sh,
            grad_q.data_ptr<scalar_t>(), head_rows(grad_q));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return grad_q;
}

std::vector<at::Tensor> linear_infsa_key_pool_cuda(const at::Tensor& central, const at::Tensor& k,
                                                   const at::Tensor& x, const at::Tensor& mask) {
  const c10::cuda::CUDAGuard guard(k.device());
  const int64_t B = k.size(0);
  const auto sh = sum_shape(k, x.size(2));
  auto part = at::zeros({B, sh.chunks, sh.H, sh.C + 1}, acc_options(k));
  if (B * sh.H > 0) {
    DISPATCH_CUDA_FLOATING_TYPES(k.scalar_type(), "linear_infsa_key_pool_cuda", [&] {
      key_pool_kernel<scalar_t, acc_t>
          <<<B * sh.H * sh.chunks, kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
              central.data_ptr<acc_t>(), k.data_ptr<scalar_t>(), head_rows(k),
              x.data_ptr<scalar_t>(), x.stride(0), x.stride(1), mask_ptr(mask), sh,
              part.data_ptr<acc_t>());
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  const auto total = part.sum(1);
  return {total.narrow(-1, 0, sh.C).clone(), total.select(-1, sh.C).clone()};
}

std::vector<at::Tensor> linear_infsa_key_pool_backward_cuda(
    const at::Tensor& grad_inputs, const at::Tensor& grad_scores, const at::Tensor& central,
    const at::Tensor& k, const at::Tensor& x, const at::Tensor& mask) {
  const c10::cuda::CUDAGuard guard(k.device());
  const int64_t B = k.size(0);
  const auto sh = sum_shape(k, x.size(2));
  auto part = at::zeros({B, sh.chunks, sh.H, sh.d}, central.options());
  auto grad_k = empty_rows_like(k), grad_x = empty_rows_like(x);
  if (B * sh.n > 0) {
    DISPATCH_CUDA_FLOATING_TYPES(k.scalar_type(), "linear_infsa_key_pool_backward_cuda", [&] {
      const auto stream = c10::cuda::getCurrentCUDAStream();
      if (sh.H > 0) {
        key_pool_backward_keys_kernel<scalar_t, acc_t>
            <<<B * sh.H * sh.chunks, kThreads, kWarps * sh.d * sizeof(acc_t), stream>>>(
                grad_inputs.data_ptr<acc_t>(), grad_scores.data_ptr<acc_t>(),
                central.data_ptr<acc_t>(), k.data_ptr<scalar_t>(), head_rows(k),
                x.data_ptr<scalar_t>(), x.stride(0), x.stride(1), mask_ptr(mask), sh,
                part.data_ptr<acc_t>(), grad_k.data_ptr<scalar_t>(), head_rows(grad_k));
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      }
      key_pool_backward_inputs_kernel<scalar_t, acc_t>
          <<<warp_blocks(B * sh.n), kThreads, kWarps * sh.H * sizeof(acc_t), stream>>>(
              grad_inputs.data_ptr<acc_t>(), central.data_ptr<acc_t>(),
              k.data_ptr<scalar_t>(), head_rows(k), mask_ptr(mask), B, sh,
              grad_x.data_ptr<scalar_t>(), grad_x.stride(0), grad_x.stride(1));
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  }
  return {part.sum(1), grad_k, grad_x};
}
