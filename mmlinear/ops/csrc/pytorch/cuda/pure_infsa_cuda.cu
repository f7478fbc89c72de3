// CUDA Pure InfSA without the N x S score matrix: one thread per query (or key) row, holding
// its row and accumulators in registers, while the block streams tiles of the other side
// through shared memory. Scores are recomputed in the backward; the Frobenius norm enters
// through the scalar <dO, O> computed by the caller. Accumulation in float32 (float64).
#include <ATen/Dispatch.h>

#include "cuda/common_cuda_helper.cuh"
#include "pure_infsa_norm.hpp"

namespace {

constexpr int kRows = 64;  // rows per block (one per thread)
constexpr int kTile = 32;  // rows of the other side per shared-memory tile

// Loads rows [row0, row0 + kTile) of two (rows, d) matrices into shared memory, with a
// validity flag per row (inside the matrix and not masked).
template <typename scalar_t, typename acc_t>
__device__ void load_tile(const scalar_t* a, const scalar_t* b, const bool* mask, int rows,
                          int row0, int d, acc_t* a_tile, acc_t* b_tile, bool* valid) {
  for (int idx = threadIdx.x; idx < kTile * d; idx += blockDim.x) {
    const int r = row0 + idx / d;
    a_tile[idx] = r < rows ? static_cast<acc_t>(a[static_cast<int64_t>(row0) * d + idx]) : acc_t(0);
    b_tile[idx] = r < rows ? static_cast<acc_t>(b[static_cast<int64_t>(row0) * d + idx]) : acc_t(0);
  }
  for (int r = threadIdx.x; r < kTile; r += blockDim.x)
    valid[r] = row0 + r < rows && !(mask && mask[row0 + r]);
}

// A block's shared memory: two (kTile, d) tiles of the other side's rows and their validity.
template <typename acc_t>
struct Tiles {
  acc_t *a, *b;
  bool* valid;
};

template <typename acc_t>
__device__ __forceinline__ Tiles<acc_t> shared_tiles(int d) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  acc_t* a = reinterpret_cast<acc_t*>(smem_raw);
  return {a, a + kTile * d, reinterpret_cast<bool*>(a + 2 * kTile * d)};
}

// The row a thread holds: head bh = blockIdx.y, row blockIdx.x * kRows + threadIdx.x, and the
// mask of the sample (null without one).
struct ThreadRow {
  int64_t bh;
  int row;
  const bool* mask;
};

__device__ __forceinline__ ThreadRow thread_row(const bool* mask, int H, int S) {
  const int64_t bh = blockIdx.y;
  return {bh, static_cast<int>(blockIdx.x * kRows + threadIdx.x),
          mask ? mask + static_cast<int64_t>(bh / H) * S : nullptr};
}

template <typename scalar_t, typename acc_t, int MAXD>
__global__ void pure_infsa_forward_kernel(const scalar_t* __restrict__ q,
                                          const scalar_t* __restrict__ k,
                                          const scalar_t* __restrict__ v,
                                          const bool* __restrict__ mask, int H, int N, int S,
                                          int d, bool mask_queries, acc_t* unnormalised,
                                          acc_t* row_sq) {
  const auto [k_tile, v_tile, valid] = shared_tiles<acc_t>(d);
  const auto [bh, i, mb] = thread_row(mask, H, S);
  const bool active = i < N && !(mask_queries && mb[i]);
  const acc_t scale2 = acc_t(1) / d;
  acc_t qi[MAXD], acc[MAXD];
#pragma unroll
  for (int m = 0; m < MAXD; ++m) {
    qi[m] = active && m < d ? scale2 * static_cast<acc_t>(q[(bh * N + i) * d + m]) : acc_t(0);
    acc[m] = 0;
  }
  acc_t sq = 0;
  for (int j0 = 0; j0 < S; j0 += kTile) {
    __syncthreads();
    load_tile(k + bh * S * d, v + bh * S * d, mb, S, j0, d, k_tile, v_tile, valid);
    __syncthreads();
    if (!active) continue;
    for (int jj = 0; jj < kTile; ++jj) {
      if (!valid[jj]) continue;
      acc_t t = 0;
#pragma unroll
      for (int m = 0; m < MAXD; ++m)
        if (m < d) t += qi[m] * k_tile[jj * d + m];
      if (t <= 0) continue;
      sq += t * t;
#pragma unroll
      for (int m = 0; m < MAXD; ++m)
        if (m < d) acc[m] += t * v_tile[jj * d + m];
    }
  }
  if (i >= N) return;
  row_sq[bh * N + i] = sq;
#pragma unroll
  for (int m = 0; m < MAXD; ++m)
    if (m < d) unnormalised[(bh * N + i) * d + m] = acc[m];
}

// dL/dq_i and the row's share of dL/dc, with dL/dP_ij = gO_i . v_j.
// What both backward kernels read: the inputs, the output gradient, the sample masks (null
// without) and per (sample, head) c = rho / (F + eps) and gf = -<dO, O> / ((F + eps) F).
template <typename scalar_t, typename acc_t>
struct BackwardInputs {
  const scalar_t *grad_out, *q, *k, *v;
  const bool* mask;
  const acc_t *coef, *norm_coef;
  int H, N, S, d;
  bool mask_queries;
};

template <typename scalar_t, typename acc_t, int MAXD>
__global__ void pure_infsa_backward_q_kernel(const BackwardInputs<scalar_t, acc_t> in,
                                             scalar_t* grad_q, acc_t* row_grad_c) {
  const int N = in.N, S = in.S, d = in.d;
  const auto [k_tile, v_tile, valid] = shared_tiles<acc_t>(d);
  const auto [bh, i, mb] = thread_row(in.mask, in.H, S);
  const bool active = i < N && !(in.mask_queries && mb[i]);
  const acc_t scale2 = acc_t(1) / d, c = in.coef[bh], gf = in.norm_coef[bh];
  acc_t qi[MAXD], goi[MAXD], acc[MAXD];
#pragma unroll
  for (int m = 0; m < MAXD; ++m) {
    const bool load = active && m < d;
    qi[m] = load ? scale2 * static_cast<acc_t>(in.q[(bh * N + i) * d + m]) : acc_t(0);
    goi[m] = load ? static_cast<acc_t>(in.grad_out[(bh * N + i) * d + m]) : acc_t(0);
    acc[m] = 0;
  }
  acc_t gc = 0;
  for (int j0 = 0; j0 < S; j0 += kTile) {
    __syncthreads();
    load_tile(in.k + bh * S * d, in.v + bh * S * d, mb, S, j0, d, k_tile, v_tile, valid);
    __syncthreads();
    if (!active) continue;
    for (int jj = 0; jj < kTile; ++jj) {
      if (!valid[jj]) continue;
      acc_t t = 0, g = 0;
#pragma unroll
      for (int m = 0; m < MAXD; ++m)
        if (m < d) {
          t += qi[m] * k_tile[jj * d + m];
          g += goi[m] * v_tile[jj * d + m];
        }
      if (t <= 0) continue;
      gc += t * g;
      const acc_t gt = scale2 * (c * g + gf * t);
#pragma unroll
      for (int m = 0; m < MAXD; ++m)
        if (m < d) acc[m] += gt * k_tile[jj * d + m];
    }
  }
  if (i >= N) return;
  row_grad_c[bh * N + i] = gc;
#pragma unroll
  for (int m = 0; m < MAXD; ++m)
    if (m < d) grad_q[(bh * N + i) * d + m] = static_cast<scalar_t>(acc[m]);
}

// dL/dk_j and dL/dv_j, streaming tiles of queries and output gradients.
template <typename scalar_t, typename acc_t, int MAXD>
__global__ void pure_infsa_backward_kv_kernel(const BackwardInputs<scalar_t, acc_t> in,
                                              scalar_t* grad_k, scalar_t* grad_v) {
  const int N = in.N, S = in.S, d = in.d;
  const auto [q_tile, go_tile, valid] = shared_tiles<acc_t>(d);
  const auto [bh, j, mb] = thread_row(in.mask, in.H, S);
  const bool active = j < S && !(mb && mb[j]);
  const acc_t scale2 = acc_t(1) / d, c = in.coef[bh], gf = in.norm_coef[bh];
  acc_t kj[MAXD], vj[MAXD], acc_k[MAXD], acc_v[MAXD];
#pragma unroll
  for (int m = 0; m < MAXD; ++m) {
    const bool load = active && m < d;
    kj[m] = load ? scale2 * static_cast<acc_t>(in.k[(bh * S + j) * d + m]) : acc_t(0);
    vj[m] = load ? static_cast<acc_t>(in.v[(bh * S + j) * d + m]) : acc_t(0);
    acc_k[m] = 0;
    acc_v[m] = 0;
  }
  for (int i0 = 0; i0 < N; i0 += kTile) {
    __syncthreads();
    load_tile(in.q + bh * N * d, in.grad_out + bh * N * d, in.mask_queries ? mb : nullptr, N,
              i0, d, q_tile, go_tile, valid);
    __syncthreads();
    if (!active) continue;
    for (int ii = 0; ii < kTile; ++ii) {
      if (!valid[ii]) continue;
      acc_t t = 0, g = 0;
#pragma unroll
      for (int m = 0; m < MAXD; ++m)
        if (m < d) {
          t += kj[m] * q_tile[ii * d + m];
          g += vj[m] * go_tile[ii * d + m];
        }
      if (t <= 0) continue;
      const acc_t gt = scale2 * (c * g + gf * t);
#pragma unroll
      for (int m = 0; m < MAXD; ++m)
        if (m < d) {
          acc_k[m] += gt * q_tile[ii * d + m];
          acc_v[m] += c * t * go_tile[ii * d + m];
        }
    }
  }
  if (j >= S) return;
#pragma unroll
  for (int m = 0; m < MAXD; ++m)
    if (m < d) {
      grad_k[(bh * S + j) * d + m] = static_cast<scalar_t>(acc_k[m]);
      grad_v[(bh * S + j) * d + m] = static_cast<scalar_t>(acc_v[m]);
    }
}

// Runs the lambda __VA_ARGS__ with `MAXD`, the smallest supported register row size >= d.
#define DISPATCH_HEAD_DIM(d, ...)                                                            \
  [&] {                                                                                      \
    TORCH_CHECK((d) <= 128, "pure_infsa: the CUDA kernel supports head dims up to 128, got ", \
                (d), "; use pure_infsa_reference for larger heads.");                       \
    if ((d) <= 32) {                                                                         \
      constexpr int MAXD = 32;                                                               \
      __VA_ARGS__();                                                                         \
    } else if ((d) <= 64) {                                                                  \
      constexpr int MAXD = 64;                                                               \
      __VA_ARGS__();                                                                         \
    } else {                                                                                 \
      constexpr int MAXD = 128;                                                              \
      __VA_ARGS__();                                                                         \
    }                                                                                        \
  }()

template <typename acc_t>
size_t tile_smem(int64_t d) {
  return 2 * kTile * d * sizeof(acc_t) + kTile * sizeof(bool);
}

}  // namespace

std::vector<at::Tensor> pure_infsa_forward_cuda(const at::Tensor& q, const at::Tensor& k,
                                                const at::Tensor& v, const at::Tensor& rho,
                                                const at::Tensor& key_padding_mask, double eps) {
  const c10::cuda::CUDAGuard guard(q.device());
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), S = k.size(2), d = q.size(3);
  const bool masked = key_padding_mask.defined();
  auto unnormalised = at::empty({B, H, N, d}, q.options().dtype(rho.scalar_type()));
  auto row_sq = at::empty({B, H, N}, rho.options());
  if (B * H * N > 0) {
    DISPATCH_CUDA_FLOATING_TYPES(q.scalar_type(), "pure_infsa_forward_cuda", [&] {
      DISPATCH_HEAD_DIM(d, [&] {
        const dim3 grid((N + kRows - 1) / kRows, B * H);
        pure_infsa_forward_kernel<scalar_t, acc_t, MAXD>
            <<<grid, kRows, tile_smem<acc_t>(d), c10::cuda::getCurrentCUDAStream()>>>(
                q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
                masked ? key_padding_mask.data_ptr<bool>() : nullptr, H, N, S, d,
                masked && N == S, unnormalised.data_ptr<acc_t>(), row_sq.data_ptr<acc_t>());
      });
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  const auto norm = pure_infsa_norm(row_sq, rho, eps);
  auto out = (unnormalised * norm.coef.view({B, H, 1, 1})).to(q.scalar_type());
  return {out, norm.fro_norm};
}

std::vector<at::Tensor> pure_infsa_backward_cuda(const at::Tensor& grad_out, const at::Tensor& q,
                                                 const at::Tensor& k, const at::Tensor& v,
                                                 const at::Tensor& rho,
                                                 const at::Tensor& key_padding_mask,
                                                 const at::Tensor& fro_norm,
                                                 const at::Tensor& out_dot, double eps) {
  const c10::cuda::CUDAGuard guard(q.device());
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), S = k.size(2), d = q.size(3);
  const bool masked = key_padding_mask.defined();
  const auto factors =
      pure_infsa_backward_coefficients(rho, fro_norm, out_dot, eps, rho.scalar_type());
  auto grad_q = at::empty_like(q), grad_k = at::empty_like(k), grad_v = at::empty_like(v);
  auto row_grad_c = at::zeros({B, H, N}, rho.options());
  if (B * H > 0 && (N > 0 || S > 0)) {
    DISPATCH_CUDA_FLOATING_TYPES(q.scalar_type(), "pure_infsa_backward_cuda", [&] {
      const BackwardInputs<scalar_t, acc_t> in{
          grad_out.data_ptr<scalar_t>(), q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(),
          v.data_ptr<scalar_t>(), masked ? key_padding_mask.data_ptr<bool>() : nullptr,
          factors.coef.data_ptr<acc_t>(), factors.norm_coef.data_ptr<acc_t>(),
          static_cast<int>(H), static_cast<int>(N), static_cast<int>(S), static_cast<int>(d),
          masked && N == S};
      auto stream = c10::cuda::getCurrentCUDAStream();
      DISPATCH_HEAD_DIM(d, [&] {
        if (N > 0) {
          pure_infsa_backward_q_kernel<scalar_t, acc_t, MAXD>
              <<<dim3((N + kRows - 1) / kRows, B * H), kRows, tile_smem<acc_t>(d), stream>>>(
                  in, grad_q.data_ptr<scalar_t>(), row_grad_c.data_ptr<acc_t>());
        }
        if (S > 0) {
          pure_infsa_backward_kv_kernel<scalar_t, acc_t, MAXD>
              <<<dim3((S + kRows - 1) / kRows, B * H), kRows, tile_smem<acc_t>(d), stream>>>(
                  in, grad_k.data_ptr<scalar_t>(), grad_v.data_ptr<scalar_t>());
        }
      });
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  auto grad_rho = row_grad_c.sum(-1) / factors.denom;
  return {grad_q, grad_k, grad_v, grad_rho};
}
