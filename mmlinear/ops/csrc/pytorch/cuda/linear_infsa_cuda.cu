// CUDA Linear-InfSA: one block per (sample, head); each warp takes whole rows (lanes stride
// over d, so loads are coalesced), keeps its partial sums in shared memory, and the block
// reduces them between the passes. Everything accumulates in float32 (float64 for double).
#include <ATen/Dispatch.h>

#include "cuda/common_cuda_helper.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;

// Sums the per-warp partial vectors part[kWarps][d] into out[d] (after a barrier).
template <typename acc_t>
__device__ void reduce_partials(acc_t* part, acc_t* out, int d) {
  __syncthreads();
  for (int m = threadIdx.x; m < d; m += blockDim.x) {
    acc_t s = 0;
    for (int w = 0; w < kWarps; ++w) s += part[w * d + m];
    out[m] = s;
  }
  __syncthreads();
}

template <typename scalar_t, typename acc_t>
__global__ void linear_infsa_forward_kernel(const scalar_t* __restrict__ q,
                                            const scalar_t* __restrict__ k,
                                            const scalar_t* __restrict__ v,
                                            const acc_t* __restrict__ rho,
                                            const bool* __restrict__ mask, int H, int N, int S,
                                            int d, bool mask_queries, acc_t eps, acc_t* pooled,
                                            acc_t* central, acc_t* energy_sum,
                                            acc_t* score_sum) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  acc_t* part = reinterpret_cast<acc_t*>(smem_raw);  // [kWarps][d]
  acc_t* c = part + kWarps * d;                        // [d]
  acc_t* scratch = c + d;                              // [kWarps]
  const int64_t bh = blockIdx.x;
  const int b = bh / H, h = bh % H, warp = threadIdx.x / kWarpSize,
            lane = threadIdx.x % kWarpSize;
  const scalar_t* qb = q + bh * N * d;
  const scalar_t* kb = k + bh * S * d;
  const scalar_t* vb = v + bh * S * d;
  const bool* mb = mask ? mask + static_cast<int64_t>(b) * S : nullptr;
  const acc_t scale = rsqrt(static_cast<acc_t>(d));

  for (int i = threadIdx.x; i < kWarps * d; i += blockDim.x) part[i] = 0;
  __syncthreads();
  // Pass 1: energies and the energy-weighted sum of queries.
  acc_t esum = 0;
  for (int i = warp; i < N; i += kWarps) {
    if (mask_queries && mb[i]) continue;
    const scalar_t* qi = qb + static_cast<int64_t>(i) * d;
    const acc_t e = scale * sqrt(warp_dot<acc_t>(qi, qi, d));
    esum += e;
    for (int m = lane; m < d; m += kWarpSize) part[warp * d + m] += e * static_cast<acc_t>(qi[m]);
  }
  reduce_partials(part, c, d);
  const acc_t E = block_sum(lane == 0 ? esum : acc_t(0), scratch) + eps;
  for (int m = threadIdx.x; m < d; m += blockDim.x) {
    c[m] *= scale / E;
    central[bh * d + m] = c[m];
  }
  for (int i = threadIdx.x; i < kWarps * d; i += blockDim.x) part[i] = 0;
  __syncthreads();
  // Pass 2: positive key scores and the score-weighted sum of values.
  acc_t rsum = 0;
  for (int j = warp; j < S; j += kWarps) {
    if (mb && mb[j]) continue;
    const acc_t t = scale * warp_dot<acc_t>(kb + static_cast<int64_t>(j) * d, c, d);
    if (t <= 0) continue;
    rsum += t;
    const scalar_t* vj = vb + static_cast<int64_t>(j) * d;
    for (int m = lane; m < d; m += kWarpSize) part[warp * d + m] += t * static_cast<acc_t>(vj[m]);
  }
  acc_t* u = c;  // c is saved in `central`; reuse its shared memory
  reduce_partials(part, u, d);
  const acc_t R = block_sum(lane == 0 ? rsum : acc_t(0), scratch) + eps;
  for (int m = threadIdx.x; m < d; m += blockDim.x) pooled[bh * d + m] = rho[h] * u[m] / R;
  if (threadIdx.x == 0) {
    energy_sum[bh] = E;
    score_sum[bh] = R;
  }
}

template <typename scalar_t, typename acc_t>
__global__ void linear_infsa_backward_kernel(
    const acc_t* __restrict__ grad_pooled, const scalar_t* __restrict__ q,
    const scalar_t* __restrict__ k, const scalar_t* __restrict__ v,
    const acc_t* __restrict__ rho, const bool* __restrict__ mask,
    const acc_t* __restrict__ central, const acc_t* __restrict__ energy_sum,
    const acc_t* __restrict__ score_sum, int H, int N, int S, int d, bool mask_queries,
    scalar_t* grad_q, scalar_t* grad_k, scalar_t* grad_v, acc_t* grad_rho) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  acc_t* part = reinterpret_cast<acc_t*>(smem_raw);  // [kWarps][d]
  acc_t* c = part + kWarps * d;                        // [d]
  acc_t* gu = c + d;                                   // [d]
  acc_t* gc = gu + d;                                  // [d]
  acc_t* scratch = gc + d;                             // [kWarps]
  const int64_t bh = blockIdx.x;
  const int b = bh / H, h = bh % H, warp = threadIdx.x / kWarpSize,
            lane = threadIdx.x % kWarpSize;
  const scalar_t* qb = q + bh * N * d;
  const scalar_t* kb = k + bh * S * d;
  const scalar_t* vb = v + bh * S * d;
  const bool* mb = mask ? mask + static_cast<int64_t>(b) * S : nullptr;
  const acc_t scale = rsqrt(static_cast<acc_t>(d));
  const acc_t E = energy_sum[bh], R = score_sum[bh], r = rho[h];
  for (int m = threadIdx.x; m < d; m += blockDim.x) {
    c[m] = central[bh * d + m];
    gu[m] = grad_pooled[bh * d + m];
  }
  for (int i = threadIdx.x; i < kWarps * d; i += blockDim.x) part[i] = 0;
  __syncthreads();
  // Pass A: dL/drho = sum_j (v_j . gu) r_j / R.
  acc_t partial = 0;
  for (int j = warp; j < S; j += kWarps) {
    if (mb && mb[j]) continue;
    const acc_t t = scale * warp_dot<acc_t>(kb + static_cast<int64_t>(j) * d, c, d);
    if (t <= 0) continue;
    partial += t * warp_dot<acc_t>(vb + static_cast<int64_t>(j) * d, gu, d);
  }
  const acc_t grho = block_sum(lane == 0 ? partial : acc_t(0), scratch) / R;
  if (threadIdx.x == 0) grad_rho[bh] = grho;
  // Pass B: through the L1 normalisation and the ReLU to k and c; v gets a_j gu.
  for (int j = warp; j < S; j += kWarps) {
    const bool valid = !(mb && mb[j]);
    const scalar_t* kj = kb + static_cast<int64_t>(j) * d;
    const scalar_t* vj = vb + static_cast<int64_t>(j) * d;
    const acc_t t = valid ? scale * warp_dot<acc_t>(kj, c, d) : acc_t(0);
    const acc_t score = t > 0 ? t : acc_t(0);
    const acc_t gt = score > 0 ? r * (warp_dot<acc_t>(vj, gu, d) - grho) / R : acc_t(0);
    const acc_t a = r * score / R;
    for (int m = lane; m < d; m += kWarpSize) {
      grad_k[(bh * S + j) * d + m] = static_cast<scalar_t>(scale * gt * c[m]);
      grad_v[(bh * S + j) * d + m] = static_cast<scalar_t>(a * gu[m]);
      part[warp * d + m] += scale * gt * static_cast<acc_t>(kj[m]);
    }
  }
  reduce_partials(part, gc, d);
  // With w = e / E, sum_i w_i dL/dw_i = q_bar . dL/dq_bar: no extra pass over the queries.
  partial = 0;
  for (int m = threadIdx.x; m < d; m += blockDim.x) partial += c[m] * gc[m];
  const acc_t mean_gw = block_sum(partial, scratch);
  // Pass C: q_i receives w_i gc (through q_bar) and its energy's gradient.
  for (int i = warp; i < N; i += kWarps) {
    const scalar_t* qi = qb + static_cast<int64_t>(i) * d;
    const bool valid = !(mask_queries && mb[i]);
    const acc_t e = valid ? scale * sqrt(warp_dot<acc_t>(qi, qi, d)) : acc_t(0);
    const acc_t gw = scale * warp_dot<acc_t>(qi, gc, d);
    const acc_t g_norm = e > 0 ? (gw - mean_gw) / E * scale * scale / e : acc_t(0);
    for (int m = lane; m < d; m += kWarpSize)
      grad_q[(bh * N + i) * d + m] =
          static_cast<scalar_t>(scale * (e / E) * gc[m] + g_norm * static_cast<acc_t>(qi[m]));
  }
}

}  // namespace

std::vector<at::Tensor> linear_infsa_forward_cuda(const at::Tensor& q, const at::Tensor& k,
                                                  const at::Tensor& v, const at::Tensor& rho,
                                                  const at::Tensor& key_padding_mask,
                                                  double eps) {
  const c10::cuda::CUDAGuard guard(q.device());
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), S = k.size(2), d = q.size(3);
  const bool masked = key_padding_mask.defined();
  auto acc_opts = q.options().dtype(rho.scalar_type());
  auto pooled = at::empty({B, H, d}, acc_opts), central = at::empty({B, H, d}, acc_opts);
  auto energy_sum = at::empty({B, H}, acc_opts), score_sum = at::empty({B, H}, acc_opts);
  if (B * H == 0) return {pooled, central, energy_sum, score_sum};
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::Half, at::ScalarType::BFloat16, q.scalar_type(), "linear_infsa_forward_cuda",
      [&] {
        using acc_t = at::acc_type<scalar_t, true>;
        const size_t smem = ((kWarps + 1) * d + kWarps) * sizeof(acc_t);
        linear_infsa_forward_kernel<scalar_t, acc_t>
            <<<B * H, kThreads, smem, c10::cuda::getCurrentCUDAStream()>>>(
                q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
                rho.data_ptr<acc_t>(), masked ? key_padding_mask.data_ptr<bool>() : nullptr, H,
                N, S, d, masked && N == S, static_cast<acc_t>(eps), pooled.data_ptr<acc_t>(),
                central.data_ptr<acc_t>(), energy_sum.data_ptr<acc_t>(),
                score_sum.data_ptr<acc_t>());
      });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {pooled, central, energy_sum, score_sum};
}

std::vector<at::Tensor> linear_infsa_backward_cuda(
    const at::Tensor& grad_pooled, const at::Tensor& q, const at::Tensor& k,
    const at::Tensor& v, const at::Tensor& rho, const at::Tensor& key_padding_mask,
    const at::Tensor& central, const at::Tensor& energy_sum, const at::Tensor& score_sum,
    double eps) {
  const c10::cuda::CUDAGuard guard(q.device());
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), S = k.size(2), d = q.size(3);
  const bool masked = key_padding_mask.defined();
  auto grad_q = at::empty_like(q), grad_k = at::empty_like(k), grad_v = at::empty_like(v);
  auto grad_rho = at::empty_like(energy_sum);
  if (B * H == 0) return {grad_q, grad_k, grad_v, grad_rho};
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::Half, at::ScalarType::BFloat16, q.scalar_type(),
      "linear_infsa_backward_cuda", [&] {
        using acc_t = at::acc_type<scalar_t, true>;
        const size_t smem = ((kWarps + 3) * d + kWarps) * sizeof(acc_t);
        linear_infsa_backward_kernel<scalar_t, acc_t>
            <<<B * H, kThreads, smem, c10::cuda::getCurrentCUDAStream()>>>(
                grad_pooled.data_ptr<acc_t>(), q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(),
                v.data_ptr<scalar_t>(), rho.data_ptr<acc_t>(),
                masked ? key_padding_mask.data_ptr<bool>() : nullptr, central.data_ptr<acc_t>(),
                energy_sum.data_ptr<acc_t>(), score_sum.data_ptr<acc_t>(), H, N, S, d,
                masked && N == S, grad_q.data_ptr<scalar_t>(), grad_k.data_ptr<scalar_t>(),
                grad_v.data_ptr<scalar_t>(), grad_rho.data_ptr<acc_t>());
      });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {grad_q, grad_k, grad_v, grad_rho};
}
