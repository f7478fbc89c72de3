// CPU Linear-InfSA: one task per (sample, head); two streaming passes forward (queries, then
// keys and values) and two backward (keys and values, then queries) plus a write-only one,
// each a tight loop over the head dimension, compiled per CPU capability (cpu_isa.hpp).
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "pytorch_cpp_helper.hpp"
#include "pytorch_device_registry.hpp"

namespace {

// Sizes of one call; the tensors are contiguous (B, H, N|S, d).
struct LinearInfsaShape {
  int64_t B, H, N, S, d;
  bool mask_keys, mask_queries;  // queries are masked for self-attention (N == S) only
};

LinearInfsaShape linear_infsa_shape(const at::Tensor& q, const at::Tensor& k,
                                    const at::Tensor& mask) {
  const bool masked = mask.defined();
  return {q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), masked,
          masked && q.size(2) == k.size(2)};
}

// The head dimension the kernels are specialised for (every InfViT preset): with a
// compile-time d the loops unroll and the (d,) accumulators stay in vector registers.
constexpr int64_t kCommonHeadDim = 64;

template <typename scalar_t>
struct LinearInfsaForwardArgs {
  using acc_t = cpu_acc_t<scalar_t>;
  const scalar_t *q, *k, *v;
  const acc_t* rho;
  const bool* mask;
  LinearInfsaShape sh;
  acc_t eps;
  acc_t *pooled, *central, *energy_sum, *score_sum;
};

// One (sample, head): a pass over the queries (energies e_i = ||q_i|| / sqrt(d) weight the
// central query), then one over keys and values (positive scores and their pooled value).
// kD > 0 is the head dimension known at compile time, 0 reads it from the shape.
template <typename scalar_t, int64_t kD>
MMLINEAR_ISA_INLINE void linear_infsa_forward_head(const LinearInfsaForwardArgs<scalar_t>& a,
                                                   int64_t bh) {
  using acc_t = cpu_acc_t<scalar_t>;
  const LinearInfsaShape& sh = a.sh;
  const int64_t d = kD > 0 ? kD : sh.d;
  const acc_t scale = 1 / std::sqrt(static_cast<acc_t>(d));
  const int64_t b = bh / sh.H, h = bh % sh.H;
  const scalar_t* qb = a.q + bh * sh.N * d;
  const scalar_t* kb = a.k + bh * sh.S * d;
  const scalar_t* vb = a.v + bh * sh.S * d;
  const bool* mb = sh.mask_keys ? a.mask + b * sh.S : nullptr;
  acc_t* c = a.central + bh * d;
  acc_t* u = a.pooled + bh * d;
  // Register-resident accumulators for a compile-time d, the outputs themselves otherwise.
  acc_t c_local[kD > 0 ? kD : 1], u_local[kD > 0 ? kD : 1];
  acc_t* cc = kD > 0 ? c_local : c;
  acc_t* uu = kD > 0 ? u_local : u;
  std::fill(cc, cc + d, acc_t(0));
  std::fill(uu, uu + d, acc_t(0));
  acc_t esum = 0;
  for (int64_t i = 0; i < sh.N; ++i) {
    if (sh.mask_queries && mb[i]) continue;
    const scalar_t* qi = qb + i * d;
    const acc_t e = scale * std::sqrt(dot<acc_t>(qi, qi, d));
    esum += e;
    axpy<acc_t>(e, qi, cc, d);
  }
  const acc_t E = esum + a.eps;
  for (int64_t m = 0; m < d; ++m) cc[m] *= scale / E;  // q_bar in the scaled space
  // Branch-free ReLU: a non-positive score adds zero (the signs of random scores would
  // mispredict half the time).
  acc_t rsum = 0;
  for (int64_t j = 0; j < sh.S; ++j) {
    if (sh.mask_keys && mb[j]) continue;
    const acc_t t = std::max(scale * dot<acc_t>(kb + j * d, cc, d), acc_t(0));
    rsum += t;
    axpy<acc_t>(t, vb + j * d, uu, d);
  }
  const acc_t R = rsum + a.eps;
  const acc_t factor = a.rho[h] / R;
  for (int64_t m = 0; m < d; ++m) {
    c[m] = cc[m];
    u[m] = uu[m] * factor;
  }
  a.energy_sum[bh] = E;
  a.score_sum[bh] = R;
}

template <typename scalar_t>
MMLINEAR_ISA_INLINE void linear_infsa_forward_tasks(const LinearInfsaForwardArgs<scalar_t>& a,
                                                    int64_t begin, int64_t end) {
  for (int64_t bh = begin; bh < end; ++bh) {
    if (a.sh.d == kCommonHeadDim)
      linear_infsa_forward_head<scalar_t, kCommonHeadDim>(a, bh);
    else
      linear_infsa_forward_head<scalar_t, 0>(a, bh);
  }
}
MMLINEAR_DEFINE_CPU_ISA_VARIANTS(linear_infsa_forward_tasks, LinearInfsaForwardArgs)

template <typename scalar_t>
struct LinearInfsaBackwardArgs {
  using acc_t = cpu_acc_t<scalar_t>;
  const acc_t* grad_pooled;
  const scalar_t *q, *k, *v;
  const acc_t* rho;
  const bool* mask;
  const acc_t *central, *energy_sum, *score_sum;
  LinearInfsaShape sh;
  scalar_t *grad_q, *grad_k, *grad_v;
  acc_t* grad_rho;
};

// One (sample, head), given scratch for its S scores and their upstream gradients: a pass
// over keys and values (writing grad v), a write-only one (grad k) and one over the queries.
template <typename scalar_t, int64_t kD>
MMLINEAR_ISA_INLINE void linear_infsa_backward_head(const LinearInfsaBackwardArgs<scalar_t>& a,
                                                    int64_t bh, cpu_acc_t<scalar_t>* score,
                                                    cpu_acc_t<scalar_t>* grad_score) {
  using acc_t = cpu_acc_t<scalar_t>;
  const LinearInfsaShape& sh = a.sh;
  const int64_t d = kD > 0 ? kD : sh.d;
  const acc_t scale = 1 / std::sqrt(static_cast<acc_t>(d));
  const int64_t b = bh / sh.H, h = bh % sh.H;
  const scalar_t* qb = a.q + bh * sh.N * d;
  const scalar_t* kb = a.k + bh * sh.S * d;
  const scalar_t* vb = a.v + bh * sh.S * d;
  scalar_t* gqb = a.grad_q + bh * sh.N * d;
  scalar_t* gkb = a.grad_k + bh * sh.S * d;
  scalar_t* gvb = a.grad_v + bh * sh.S * d;
  const bool* mb = sh.mask_keys ? a.mask + b * sh.S : nullptr;
  const acc_t E = a.energy_sum[bh], R = a.score_sum[bh], r = a.rho[h];
  constexpr int64_t kLocal = kD > 0 ? kD : 1;
  std::vector<acc_t> heap(kD > 0 ? 0 : 4 * d);
  acc_t c_local[kLocal], gu_local[kLocal], k1_local[kLocal], k0_local[kLocal];
  acc_t* c = kD > 0 ? c_local : heap.data();
  acc_t* gu = kD > 0 ? gu_local : heap.data() + d;
  acc_t* k1 = kD > 0 ? k1_local : heap.data() + 2 * d;  // sum_j g_j k_j, then dL/dq_bar
  acc_t* k0 = kD > 0 ? k0_local : heap.data() + 3 * d;  // sum_j k_j over positive scores
  for (int64_t m = 0; m < d; ++m) {
    c[m] = a.central[bh * d + m];
    gu[m] = a.grad_pooled[bh * d + m];
    k1[m] = k0[m] = 0;
  }
  // Keys: scores t_j, g_j = v_j . gu and dL/drho = sum_j g_j t_j / R; v_j gets a_j gu with
  // a_j = rho t_j / R.
  acc_t grho = 0;
  for (int64_t j = 0; j < sh.S; ++j) {
    const scalar_t* kj = kb + j * d;
    const bool valid = !(sh.mask_keys && mb[j]);
    const acc_t t = valid ? std::max(scale * dot<acc_t>(kj, c, d), acc_t(0)) : acc_t(0);
    const acc_t g = dot<acc_t>(vb + j * d, gu, d);
    const acc_t positive = t > 0 ? acc_t(1) : acc_t(0);
    score[j] = t;
    grad_score[j] = g;
    grho += g * t;
    axpy<acc_t>(g * positive, kj, k1, d);
    axpy<acc_t>(positive, kj, k0, d);
    const acc_t aj = r * t / R;
    scalar_t* gvj = gvb + j * d;
#pragma omp simd
    for (int64_t m = 0; m < d; ++m) gvj[m] = static_cast<scalar_t>(aj * gu[m]);
  }
  grho /= R;
  a.grad_rho[bh] = grho;
  // Through the L1 normalisation and the ReLU, dL/dt_j = rho (g_j - dL/drho) / R on the
  // positive scores, so dL/dq_bar = rho / R * (K1 - dL/drho K0) / sqrt(d).
  acc_t* grad_c = k1;
  for (int64_t m = 0; m < d; ++m) grad_c[m] = scale * r / R * (k1[m] - grho * k0[m]);
  // Write-only: k_j gets dL/dt_j q_bar / sqrt(d).
  for (int64_t j = 0; j < sh.S; ++j) {
    const acc_t gt = score[j] > 0 ? scale * r * (grad_score[j] - grho) / R : acc_t(0);
    scalar_t* gkj = gkb + j * d;
#pragma omp simd
    for (int64_t m = 0; m < d; ++m) gkj[m] = static_cast<scalar_t>(gt * c[m]);
  }
  // Queries. With w = e / E, sum_i w_i dL/dw_i = q_bar . dL/dq_bar, so one pass gives q_i's
  // two terms: w_i dL/dq_bar (through q_bar) and its energy's gradient.
  const acc_t mean_gw = dot<acc_t>(c, grad_c, d);
  for (int64_t i = 0; i < sh.N; ++i) {
    const scalar_t* qi = qb + i * d;
    scalar_t* gqi = gqb + i * d;
    const bool valid = !(sh.mask_queries && mb[i]);
    const acc_t e = valid ? scale * std::sqrt(dot<acc_t>(qi, qi, d)) : acc_t(0);
    const acc_t gw = scale * dot<acc_t>(qi, grad_c, d);
    const acc_t wq = scale * e / E;
    const acc_t g_norm = e > 0 ? (gw - mean_gw) / E * scale * scale / e : acc_t(0);
#pragma omp simd
    for (int64_t m = 0; m < d; ++m)
      gqi[m] = static_cast<scalar_t>(wq * grad_c[m] + g_norm * static_cast<acc_t>(qi[m]));
  }
}

template <typename scalar_t>
MMLINEAR_ISA_INLINE void linear_infsa_backward_tasks(const LinearInfsaBackwardArgs<scalar_t>& a,
                                                     int64_t begin, int64_t end) {
  using acc_t = cpu_acc_t<scalar_t>;
  std::vector<acc_t> score(a.sh.S), grad_score(a.sh.S);
  for (int64_t bh = begin; bh < end; ++bh) {
    if (a.sh.d == kCommonHeadDim)
      linear_infsa_backward_head<scalar_t, kCommonHeadDim>(a, bh, score.data(),
                                                           grad_score.data());
    else
      linear_infsa_backward_head<scalar_t, 0>(a, bh, score.data(), grad_score.data());
  }
}
MMLINEAR_DEFINE_CPU_ISA_VARIANTS(linear_infsa_backward_tasks, LinearInfsaBackwardArgs)

}  // namespace

std::vector<at::Tensor> linear_infsa_forward_cpu(const at::Tensor& q, const at::Tensor& k,
                                                 const at::Tensor& v, const at::Tensor& rho,
                                                 const at::Tensor& key_padding_mask,
                                                 double eps) {
  CHECK_CONTIGUOUS(q);
  CHECK_CONTIGUOUS(k);
  CHECK_CONTIGUOUS(v);
  const auto sh = linear_infsa_shape(q, k, key_padding_mask);
  const auto acc_opts = q.options().dtype(q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat);
  auto pooled = at::empty({sh.B, sh.H, sh.d}, acc_opts);
  auto central = at::empty({sh.B, sh.H, sh.d}, acc_opts);
  auto energy_sum = at::empty({sh.B, sh.H}, acc_opts);
  auto score_sum = at::empty({sh.B, sh.H}, acc_opts);
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "linear_infsa_forward_cpu", [&] {
    using acc_t = cpu_acc_t<scalar_t>;
    const LinearInfsaForwardArgs<scalar_t> args{
        q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
        rho.data_ptr<acc_t>(), sh.mask_keys ? key_padding_mask.data_ptr<bool>() : nullptr, sh,
        static_cast<acc_t>(eps), pooled.data_ptr<acc_t>(), central.data_ptr<acc_t>(),
        energy_sum.data_ptr<acc_t>(), score_sum.data_ptr<acc_t>()};
    const auto tasks = linear_infsa_forward_tasks_for_cpu_isa<scalar_t>();
    at::parallel_for(0, sh.B * sh.H, 1,
                     [&](int64_t begin, int64_t end) { tasks(args, begin, end); });
  });
  return {pooled, central, energy_sum, score_sum};
}

std::vector<at::Tensor> linear_infsa_backward_cpu(
    const at::Tensor& grad_pooled, const at::Tensor& q, const at::Tensor& k,
    const at::Tensor& v, const at::Tensor& rho, const at::Tensor& key_padding_mask,
    const at::Tensor& central, const at::Tensor& energy_sum, const at::Tensor& score_sum,
    double eps) {
  CHECK_CONTIGUOUS(grad_pooled);
  const auto sh = linear_infsa_shape(q, k, key_padding_mask);
  auto grad_q = at::empty_like(q), grad_k = at::empty_like(k), grad_v = at::empty_like(v);
  auto grad_rho = at::empty_like(energy_sum);
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "linear_infsa_backward_cpu", [&] {
    using acc_t = cpu_acc_t<scalar_t>;
    const LinearInfsaBackwardArgs<scalar_t> args{
        grad_pooled.data_ptr<acc_t>(), q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(),
        v.data_ptr<scalar_t>(), rho.data_ptr<acc_t>(),
        sh.mask_keys ? key_padding_mask.data_ptr<bool>() : nullptr, central.data_ptr<acc_t>(),
        energy_sum.data_ptr<acc_t>(), score_sum.data_ptr<acc_t>(), sh,
        grad_q.data_ptr<scalar_t>(), grad_k.data_ptr<scalar_t>(), grad_v.data_ptr<scalar_t>(),
        grad_rho.data_ptr<acc_t>()};
    const auto tasks = linear_infsa_backward_tasks_for_cpu_isa<scalar_t>();
    at::parallel_for(0, sh.B * sh.H, 1,
                     [&](int64_t begin, int64_t end) { tasks(args, begin, end); });
  });
  return {grad_q, grad_k, grad_v, grad_rho};
}

std::vector<at::Tensor> linear_infsa_forward_impl(const at::Tensor& q, const at::Tensor& k,
                                                  const at::Tensor& v, const at::Tensor& rho,
                                                  const at::Tensor& key_padding_mask,
                                                  double eps);
std::vector<at::Tensor> linear_infsa_backward_impl(
    const at::Tensor& grad_pooled, const at::Tensor& q, const at::Tensor& k,
    const at::Tensor& v, const at::Tensor& rho, const at::Tensor& key_padding_mask,
    const at::Tensor& central, const at::Tensor& energy_sum, const at::Tensor& score_sum,
    double eps);
REGISTER_DEVICE_IMPL(linear_infsa_forward_impl, CPU, linear_infsa_forward_cpu);
REGISTER_DEVICE_IMPL(linear_infsa_backward_impl, CPU, linear_infsa_backward_cpu);
