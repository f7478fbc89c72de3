// CPU Pure InfSA without the N x S score matrix. Scores are recomputed from q and k wherever
// they are needed, so the extra memory is O(B H N) whatever the sequence length:
// - forward: each block of query rows sweeps all keys once, accumulating relu(q k^T) v and
//   the row's share of ||relu(q k^T)||_F^2; the output is rescaled once the norm is known.
// - backward: one sweep per query block (grad q and dL/drho) and one per key block (grad k,
//   grad v); the norm's gradient enters through the scalar <dO, O> computed beforehand.
#include <ATen/Parallel.h>

#include <cmath>
#include <vector>

#include "pytorch_cpp_helper.hpp"
#include "pytorch_device_registry.hpp"

namespace {

// Rows handled together, so every key (or query) row loaded serves several dot products.
constexpr int64_t kBlock = 8;

struct PureInfsaShape {
  int64_t B, H, N, S, d;
  bool mask_keys, mask_queries;
};

PureInfsaShape pure_infsa_shape(const at::Tensor& q, const at::Tensor& k,
                                const at::Tensor& mask) {
  const bool masked = mask.defined();
  return {q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), masked,
          masked && q.size(2) == k.size(2)};
}

template <typename scalar_t>
void pure_infsa_forward_kernel(const scalar_t* q, const scalar_t* k, const scalar_t* v,
                               const bool* mask, PureInfsaShape sh, scalar_t* unnormalised,
                               cpu_acc_t<scalar_t>* row_sq) {
  using acc_t = cpu_acc_t<scalar_t>;
  const int64_t d = sh.d, blocks = (sh.N + kBlock - 1) / kBlock;
  const acc_t scale2 = 1 / static_cast<acc_t>(d);  // q and k are each scaled by 1/sqrt(d)
  at::parallel_for(0, sh.B * sh.H * blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(kBlock * d);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bh = task / blocks, i0 = (task % blocks) * kBlock;
      const int64_t rows = std::min(kBlock, sh.N - i0), b = bh / sh.H;
      const bool* mb = sh.mask_keys ? mask + b * sh.S : nullptr;
      const scalar_t* qb = q + (bh * sh.N + i0) * d;
      const scalar_t* kb = k + bh * sh.S * d;
      const scalar_t* vb = v + bh * sh.S * d;
      bool active[kBlock];
      for (int64_t r = 0; r < rows; ++r) active[r] = !(sh.mask_queries && mb[i0 + r]);
      std::fill(acc.begin(), acc.end(), acc_t(0));
      acc_t sq[kBlock] = {0};
      for (int64_t j = 0; j < sh.S; ++j) {
        if (sh.mask_keys && mb[j]) continue;
        const scalar_t* kj = kb + j * d;
        for (int64_t r = 0; r < rows; ++r) {
          if (!active[r]) continue;
          const acc_t t = scale2 * dot<acc_t>(qb + r * d, kj, d);
          if (t <= 0) continue;
          sq[r] += t * t;
          axpy<acc_t>(t, vb + j * d, acc.data() + r * d, d);
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        row_sq[bh * sh.N + i0 + r] = sq[r];
        scalar_t* out = unnormalised + (bh * sh.N + i0 + r) * d;
        for (int64_t m = 0; m < d; ++m) out[m] = static_cast<scalar_t>(acc[r * d + m]);
      }
    }
  });
}

// Gradients of q (and the per-row share of dL/dc) by query blocks, then of k and v by key
// blocks; each score t = q_i k_j / d is recomputed with dL/dP_ij = gO_i . v_j.
template <typename scalar_t>
void pure_infsa_backward_kernel(const scalar_t* grad_out, const scalar_t* q, const scalar_t* k,
                                const scalar_t* v, const bool* mask,
                                const cpu_acc_t<scalar_t>* coef,
                                const cpu_acc_t<scalar_t>* norm_coef, PureInfsaShape sh,
                                scalar_t* grad_q, scalar_t* grad_k, scalar_t* grad_v,
                                cpu_acc_t<scalar_t>* row_grad_c) {
  using acc_t = cpu_acc_t<scalar_t>;
  const int64_t d = sh.d;
  const acc_t scale2 = 1 / static_cast<acc_t>(d);
  const int64_t q_blocks = (sh.N + kBlock - 1) / kBlock, k_blocks = (sh.S + kBlock - 1) / kBlock;
  at::parallel_for(0, sh.B * sh.H * q_blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(kBlock * d);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bh = task / q_blocks, i0 = (task % q_blocks) * kBlock;
      const int64_t rows = std::min(kBlock, sh.N - i0), b = bh / sh.H;
      const bool* mb = sh.mask_keys ? mask + b * sh.S : nullptr;
      const acc_t c = coef[bh], gf = norm_coef[bh];
      const scalar_t* qb = q + (bh * sh.N + i0) * d;
      const scalar_t* gob = grad_out + (bh * sh.N + i0) * d;
      const scalar_t* kb = k + bh * sh.S * d;
      const scalar_t* vb = v + bh * sh.S * d;
      bool active[kBlock];
      for (int64_t r = 0; r < rows; ++r) active[r] = !(sh.mask_queries && mb[i0 + r]);
      std::fill(acc.begin(), acc.end(), acc_t(0));
      acc_t gc[kBlock] = {0};
      for (int64_t j = 0; j < sh.S; ++j) {
        if (sh.mask_keys && mb[j]) continue;
        const scalar_t* kj = kb + j * d;
        for (int64_t r = 0; r < rows; ++r) {
          if (!active[r]) continue;
          const acc_t t = scale2 * dot<acc_t>(qb + r * d, kj, d);
          if (t <= 0) continue;
          const acc_t g = dot<acc_t>(gob + r * d, vb + j * d, d);
          gc[r] += t * g;
          axpy<acc_t>(scale2 * (c * g + gf * t), kj, acc.data() + r * d, d);
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        row_grad_c[bh * sh.N + i0 + r] = gc[r];
        scalar_t* gq = grad_q + (bh * sh.N + i0 + r) * d;
        for (int64_t m = 0; m < d; ++m) gq[m] = static_cast<scalar_t>(acc[r * d + m]);
      }
    }
  });
  at::parallel_for(0, sh.B * sh.H * k_blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc_k(kBlock * d), acc_v(kBlock * d);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bh = task / k_blocks, j0 = (task % k_blocks) * kBlock;
      const int64_t rows = std::min(kBlock, sh.S - j0), b = bh / sh.H;
      const bool* mb = sh.mask_keys ? mask + b * sh.S : nullptr;
      const acc_t c = coef[bh], gf = norm_coef[bh];
      const scalar_t* kb = k + (bh * sh.S + j0) * d;
      const scalar_t* vb = v + (bh * sh.S + j0) * d;
      const scalar_t* qb = q + bh * sh.N * d;
      const scalar_t* gob = grad_out + bh * sh.N * d;
      bool active[kBlock];
      for (int64_t r = 0; r < rows; ++r) active[r] = !(sh.mask_keys && mb[j0 + r]);
      std::fill(acc_k.begin(), acc_k.end(), acc_t(0));
      std::fill(acc_v.begin(), acc_v.end(), acc_t(0));
      for (int64_t i = 0; i < sh.N; ++i) {
        if (sh.mask_queries && mb[i]) continue;
        const scalar_t* qi = qb + i * d;
        const scalar_t* goi = gob + i * d;
        for (int64_t r = 0; r < rows; ++r) {
          if (!active[r]) continue;
          const acc_t t = scale2 * dot<acc_t>(qi, kb + r * d, d);
          if (t <= 0) continue;
          const acc_t g = dot<acc_t>(goi, vb + r * d, d);
          axpy<acc_t>(scale2 * (c * g + gf * t), qi, acc_k.data() + r * d, d);
          axpy<acc_t>(c * t, goi, acc_v.data() + r * d, d);
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        scalar_t* gk = grad_k + (bh * sh.S + j0 + r) * d;
        scalar_t* gv = grad_v + (bh * sh.S + j0 + r) * d;
        for (int64_t m = 0; m < d; ++m) {
          gk[m] = static_cast<scalar_t>(acc_k[r * d + m]);
          gv[m] = static_cast<scalar_t>(acc_v[r * d + m]);
        }
      }
    }
  });
}

}  // namespace

std::vector<at::Tensor> pure_infsa_forward_cpu(const at::Tensor& q, const at::Tensor& k,
                                               const at::Tensor& v, const at::Tensor& rho,
                                               const at::Tensor& key_padding_mask, double eps) {
  CHECK_CONTIGUOUS(q);
  CHECK_CONTIGUOUS(k);
  CHECK_CONTIGUOUS(v);
  const auto sh = pure_infsa_shape(q, k, key_padding_mask);
  auto out = at::empty_like(q);
  auto row_sq = at::empty({sh.B, sh.H, sh.N}, rho.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "pure_infsa_forward_cpu", [&] {
    pure_infsa_forward_kernel<scalar_t>(
        q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
        sh.mask_keys ? key_padding_mask.data_ptr<bool>() : nullptr, sh, out.data_ptr<scalar_t>(),
        row_sq.data_ptr<cpu_acc_t<scalar_t>>());
  });
  // Rows are summed in double so the norm of a long sequence keeps its precision.
  auto fro_norm = row_sq.sum(-1, false, at::kDouble).sqrt().to(rho.scalar_type());
  auto coef = rho.view({1, -1}) / (fro_norm + eps);
  out.mul_(coef.to(q.scalar_type()).view({sh.B, sh.H, 1, 1}));
  return {out, fro_norm};
}

std::vector<at::Tensor> pure_infsa_backward_cpu(const at::Tensor& grad_out, const at::Tensor& q,
                                                const at::Tensor& k, const at::Tensor& v,
                                                const at::Tensor& rho,
                                                const at::Tensor& key_padding_mask,
                                                const at::Tensor& fro_norm,
                                                const at::Tensor& out_dot, double eps) {
  CHECK_CONTIGUOUS(grad_out);
  const auto sh = pure_infsa_shape(q, k, key_padding_mask);
  auto denom = fro_norm + eps;
  auto coef = (rho.view({1, -1}) / denom).expand({sh.B, sh.H}).contiguous();
  // dL/dF = -<dO, O> / (F + eps) and dF/dP = P / F; an all-zero score matrix (F = 0) has no
  // positive score to pass that gradient to.
  auto norm_coef = at::where(fro_norm > 0, -out_dot / (denom * fro_norm),
                             at::zeros_like(fro_norm)).contiguous();
  auto grad_q = at::empty_like(q), grad_k = at::empty_like(k), grad_v = at::empty_like(v);
  auto row_grad_c = at::empty({sh.B, sh.H, sh.N}, rho.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "pure_infsa_backward_cpu", [&] {
    using acc_t = cpu_acc_t<scalar_t>;
    pure_infsa_backward_kernel<scalar_t>(
        grad_out.data_ptr<scalar_t>(), q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(),
        v.data_ptr<scalar_t>(), sh.mask_keys ? key_padding_mask.data_ptr<bool>() : nullptr,
        coef.data_ptr<acc_t>(), norm_coef.data_ptr<acc_t>(), sh, grad_q.data_ptr<scalar_t>(),
        grad_k.data_ptr<scalar_t>(), grad_v.data_ptr<scalar_t>(), row_grad_c.data_ptr<acc_t>());
  });
  auto grad_rho = row_grad_c.sum(-1) / denom;
  return {grad_q, grad_k, grad_v, grad_rho};
}

std::vector<at::Tensor> pure_infsa_forward_impl(const at::Tensor& q, const at::Tensor& k,
                                                const at::Tensor& v, const at::Tensor& rho,
                                                const at::Tensor& key_padding_mask,
                                                double eps);
std::vector<at::Tensor> pure_infsa_backward_impl(const at::Tensor& grad_out,
                                                 const at::Tensor& q, const at::Tensor& k,
                                                 const at::Tensor& v, const at::Tensor& rho,
                                                 const at::Tensor& key_padding_mask,
                                                 const at::Tensor& fro_norm,
                                                 const at::Tensor& out_dot, double eps);
REGISTER_DEVICE_IMPL(pure_infsa_forward_impl, CPU, pure_infsa_forward_cpu);
REGISTER_DEVICE_IMPL(pure_infsa_backward_impl, CPU, pure_infsa_backward_cpu);
