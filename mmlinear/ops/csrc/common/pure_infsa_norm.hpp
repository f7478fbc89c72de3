// The Frobenius normalisation of Pure InfSA around its kernels, shared by the CPU and CUDA
// implementations: ATen operations on (B, H) tensors in rho's dtype (the accumulation dtype).
#pragma once

#include <ATen/ATen.h>

// The forward's norm and output scale from the rows' sums of squared scores.
struct PureInfsaNorm {
  at::Tensor fro_norm;  // (B, H) ||relu(q k^T / d)||_F
  at::Tensor coef;      // (B, H) rho / (F + eps)
};

inline PureInfsaNorm pure_infsa_norm(const at::Tensor& row_sq, const at::Tensor& rho,
                                     double eps) {
  // Rows are summed in double so the norm of a long sequence keeps its precision.
  auto fro_norm = row_sq.sum(-1, false, at::kDouble).sqrt().to(rho.scalar_type());
  return {fro_norm, rho.view({1, -1}) / (fro_norm + eps)};
}

// The backward's factors of the score gradients, contiguous (B, H) tensors of `dtype`.
struct PureInfsaBackwardCoefficients {
  at::Tensor denom;      // F + eps, in rho's dtype
  at::Tensor coef;       // c = rho / (F + eps)
  at::Tensor norm_coef;  // gf = -<dO, O> / ((F + eps) F)
};

inline PureInfsaBackwardCoefficients pure_infsa_backward_coefficients(
    const at::Tensor& rho, const at::Tensor& fro_norm, const at::Tensor& out_dot, double eps,
    at::ScalarType dtype) {
  auto denom = fro_norm + eps;
  auto coef = (rho.view({1, -1}) / denom).expand(fro_norm.sizes()).to(dtype).contiguous();
  // dL/dF = -<dO, O> / (F + eps) and dF/dP = P / F; an all-zero score matrix (F = 0) has no
  // positive score to pass that gradient to.
  auto norm_coef = at::where(fro_norm > 0, -out_dot / (denom * fro_norm), at::zeros_like(fro_norm))
                       .to(dtype)
                       .contiguous();
  return {denom, coef, norm_coef};
}
