// CPU Linear-InfSA: one task per (sample, head); two streaming passes forward (queries, then
// keys and values) and two backward (keys and values, then queries) plus a write-only one,
// each a tight loop over the head dimension.
#include <ATen/Parallel.h>

#include <cmath>
#include <vector>

#include "pytorch_cpp_helper.hpp"
#include "pytorch_device_registry.hpp"

namespace {

// Sizes and pointers of one call; the tensors are contiguous (B, H, N|S, d).
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

template <typename scalar_t>
void linear_infsa_forward_kernel(const scalar_t* q, const scalar_t* k, const scalar_t* v,
                                 const cpu_acc_t<scalar_t>* rho, const bool* mask,
                                 LinearInfsaShape sh, cpu_acc_t<scalar_t> eps,
                                 cpu_acc_t<scalar_t>* pooled, cpu_acc_t<scalar_t>* central,
                                 cpu_acc_t<scalar_t>* energy_sum,
                                 cpu_acc_t<scalar_t>* score_sum) {
  using acc_t = cpu_acc_t<scalar_t>;
  const int64_t d = sh.d;
  const acc_t scale = 1 / std::sqrt(static_cast<acc_t>(d));
  at::parallel_for(0, sh.B * sh.H, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / sh.H, h = bh % sh.H;
      const scalar_t* qb = q + bh * sh.N * d;
      const scalar_t* kb = k + bh * sh.S * d;
      const scalar_t* vb = v + bh * sh.S * d;
      const bool* mb = sh.mask_keys ? mask + b * sh.S : nullptr;
      acc_t* c = central + bh * d;
      acc_t* u = pooled + bh * d;
      std::fill(c, c + d, acc_t(0));
      std::fill(u, u + d, acc_t(0));
      // Pass 1: energies e_i = ||q_i|| / sqrt(d) weight the central query.
      acc_t esum = 0;
      for (int64_t i = 0; i < sh.N; ++i) {
        if (sh.mask_queries && mb[i]) continue;
        const scalar_t* qi = qb + i * d;
        const acc_t e = scale * std::sqrt(dot<acc_t>(qi, qi, d));
        esum += e;
        axpy<acc_t>(e, qi, c, d);
      }
      const acc_t E = esum + eps;
      for (int64_t j = 0; j < d; ++j) c[j] *= scale / E;  // q_bar in the scaled space
      // Pass 2: positive key scores and their (unnormalised) pooled value in one sweep.
      acc_t rsum = 0;
      for (int64_t j = 0; j < sh.S; ++j) {
        if (sh.mask_keys && mb[j]) continue;
        const acc_t t = scale * dot<acc_t>(kb + j * d, c, d);
        if (t <= 0) continue;
        rsum += t;
        axpy<acc_t>(t, vb + j * d, u, d);
      }
      const acc_t R = rsum + eps;
      const acc_t factor = rho[h] / R;
      for (int64_t j = 0; j < d; ++j) u[j] *= factor;
      energy_sum[bh] = E;
      score_sum[bh] = R;
    }
  });
}

template <typename scalar_t>
void linear_infsa_backward_kernel(const cpu_acc_t<scalar_t>* grad_pooled, const scalar_t* q,
                                  const scalar_t* k, const scalar_t* v,
                                  const cpu_acc_t<scalar_t>* rho, const bool* mask,
                                  const cpu_acc_t<scalar_t>* central,
                                  const cpu_acc_t<scalar_t>* energy_sum,
                                  const cpu_acc_t<scalar_t>* score_sum, LinearInfsaShape sh,
                                  scalar_t* grad_q, scalar_t* grad_k, scalar_t* grad_v,
                                  cpu_acc_t<scalar_t>* grad_rho) {
  using acc_t = cpu_acc_t<scalar_t>;
  const int64_t d = sh.d;
  const acc_t scale = 1 / std::sqrt(static_cast<acc_t>(d));
  at::parallel_for(0, sh.B * sh.H, 1, [&](int64_t begin, int64_t end) {
    // Per-task scratch: the scores and their upstream gradients, O(S); K1 = sum_j g_j k_j and
    // K0 = sum_j k_j over the positive scores give dL/dq_bar without a second read of k.
    std::vector<acc_t> score(sh.S), grad_score(sh.S), k1(d), k0(d), grad_c(d);
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / sh.H, h = bh % sh.H;
      const scalar_t* qb = q + bh * sh.N * d;
      const scalar_t* kb = k + bh * sh.S * d;
      const scalar_t* vb = v + bh * sh.S * d;
      scalar_t* gqb = grad_q + bh * sh.N * d;
      scalar_t* gkb = grad_k + bh * sh.S * d;
      scalar_t* gvb = grad_v + bh * sh.S * d;
      const bool* mb = sh.mask_keys ? mask + b * sh.S : nullptr;
      const acc_t* c = central + bh * d;
      const acc_t* gu = grad_pooled + bh * d;
      const acc_t E = energy_sum[bh], R = score_sum[bh], r = rho[h];
      // Pass over the keys: scores r_j, g_j = v_j . gu, dL/drho = sum_j g_j r_j / R.
      acc_t grho = 0;
      std::fill(k1.begin(), k1.end(), acc_t(0));
      std::fill(k0.begin(), k0.end(), acc_t(0));
      for (int64_t j = 0; j < sh.S; ++j) {
        const bool valid = !(sh.mask_keys && mb[j]);
        const scalar_t* kj = kb + j * d;
        const acc_t t = valid ? scale * dot<acc_t>(kj, c, d) : acc_t(0);
        score[j] = t > 0 ? t : acc_t(0);
        if (score[j] == 0) continue;
        grad_score[j] = dot<acc_t>(vb + j * d, gu, d);
        grho += grad_score[j] * score[j];
        axpy<acc_t>(grad_score[j], kj, k1.data(), d);
        axpy<acc_t>(acc_t(1), kj, k0.data(), d);
      }
      grho /= R;
      grad_rho[bh] = grho;
      // Through the L1 normalisation and the ReLU, dL/dt_j = rho (g_j - dL/drho) / R on the
      // positive scores, so dL/dq_bar = rho / R * (K1 - dL/drho K0) / sqrt(d).
      for (int64_t m = 0; m < d; ++m) grad_c[m] = scale * r / R * (k1[m] - grho * k0[m]);
      // Write-only pass: k_j gets dL/dt_j q_bar / sqrt(d), v_j gets a_j gu.
      for (int64_t j = 0; j < sh.S; ++j) {
        const acc_t gt = score[j] > 0 ? r * (grad_score[j] - grho) / R : acc_t(0);
        const acc_t a = r * score[j] / R;
        scalar_t* gkj = gkb + j * d;
        scalar_t* gvj = gvb + j * d;
        for (int64_t m = 0; m < d; ++m) {
          gkj[m] = static_cast<scalar_t>(scale * gt * c[m]);
          gvj[m] = static_cast<scalar_t>(a * gu[m]);
        }
      }
      // Pass over the queries. With w = e / E, sum_i w_i dL/dw_i = q_bar . dL/dq_bar, so one
      // pass gives q_i's two terms: w_i dL/dq_bar (through q_bar) and its energy's gradient.
      const acc_t mean_gw = dot<acc_t>(c, grad_c.data(), d);
      for (int64_t i = 0; i < sh.N; ++i) {
        const scalar_t* qi = qb + i * d;
        scalar_t* gqi = gqb + i * d;
        const bool valid = !(sh.mask_queries && mb[i]);
        const acc_t e = valid ? scale * std::sqrt(dot<acc_t>(qi, qi, d)) : acc_t(0);
        const acc_t w = e / E;
        const acc_t gw = scale * dot<acc_t>(qi, grad_c.data(), d);
        const acc_t g_norm = e > 0 ? (gw - mean_gw) / E * scale * scale / e : acc_t(0);
        for (int64_t m = 0; m < d; ++m)
          gqi[m] = static_cast<scalar_t>(scale * w * grad_c[m] + g_norm * static_cast<acc_t>(qi[m]));
      }
    }
  });
}

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
    linear_infsa_forward_kernel<scalar_t>(
        q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
        rho.data_ptr<acc_t>(), sh.mask_keys ? key_padding_mask.data_ptr<bool>() : nullptr, sh,
        static_cast<acc_t>(eps), pooled.data_ptr<acc_t>(), central.data_ptr<acc_t>(),
        energy_sum.data_ptr<acc_t>(), score_sum.data_ptr<acc_t>());
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
    linear_infsa_backward_kernel<scalar_t>(
        grad_pooled.data_ptr<acc_t>(), q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(),
        v.data_ptr<scalar_t>(), rho.data_ptr<acc_t>(),
        sh.mask_keys ? key_padding_mask.data_ptr<bool>() : nullptr, central.data_ptr<acc_t>(),
        energy_sum.data_ptr<acc_t>(), score_sum.data_ptr<acc_t>(), sh, grad_q.data_ptr<scalar_t>(),
        grad_k.data_ptr<scalar_t>(), grad_v.data_ptr<scalar_t>(), grad_rho.data_ptr<acc_t>());
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
