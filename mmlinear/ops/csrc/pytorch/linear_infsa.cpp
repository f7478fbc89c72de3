// Device-independent entry points of the fused Linear-InfSA op.
#include "pytorch_device_registry.hpp"

std::vector<at::Tensor> linear_infsa_forward_impl(const at::Tensor& q, const at::Tensor& k,
                                                  const at::Tensor& v, const at::Tensor& rho,
                                                  const at::Tensor& key_padding_mask,
                                                  double eps) {
  return DISPATCH_DEVICE_IMPL(linear_infsa_forward_impl, q, k, v, rho, key_padding_mask, eps);
}

std::vector<at::Tensor> linear_infsa_backward_impl(
    const at::Tensor& grad_pooled, const at::Tensor& q, const at::Tensor& k,
    const at::Tensor& v, const at::Tensor& rho, const at::Tensor& key_padding_mask,
    const at::Tensor& central, const at::Tensor& energy_sum, const at::Tensor& score_sum,
    double eps) {
  return DISPATCH_DEVICE_IMPL(linear_infsa_backward_impl, grad_pooled, q, k, v, rho,
                              key_padding_mask, central, energy_sum, score_sum, eps);
}

std::vector<at::Tensor> linear_infsa_forward(const at::Tensor& q, const at::Tensor& k,
                                             const at::Tensor& v, const at::Tensor& rho,
                                             const std::optional<at::Tensor>& key_padding_mask, double eps) {
  return linear_infsa_forward_impl(q, k, v, rho, key_padding_mask.value_or(at::Tensor()), eps);
}

std::vector<at::Tensor> linear_infsa_backward(const at::Tensor& grad_pooled,
                                              const at::Tensor& q, const at::Tensor& k,
                                              const at::Tensor& v, const at::Tensor& rho,
                                              const std::optional<at::Tensor>& key_padding_mask,
                                              const at::Tensor& central,
                                              const at::Tensor& energy_sum,
                                              const at::Tensor& score_sum, double eps) {
  return linear_infsa_backward_impl(grad_pooled, q, k, v, rho, key_padding_mask.value_or(at::Tensor()), central,
                                    energy_sum, score_sum, eps);
}
