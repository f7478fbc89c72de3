// Device-independent entry points of the memory-linear (tiled) Pure InfSA op.
#include "pytorch_device_registry.hpp"
#include "pytorch_ops.hpp"

std::vector<at::Tensor> pure_infsa_forward_impl(const at::Tensor& q, const at::Tensor& k,
                                                const at::Tensor& v, const at::Tensor& rho,
                                                const at::Tensor& key_padding_mask,
                                                double eps) {
  return DISPATCH_DEVICE_IMPL(pure_infsa_forward_impl, q, k, v, rho, key_padding_mask, eps);
}

std::vector<at::Tensor> pure_infsa_backward_impl(const at::Tensor& grad_out,
                                                 const at::Tensor& q, const at::Tensor& k,
                                                 const at::Tensor& v, const at::Tensor& rho,
                                                 const at::Tensor& key_padding_mask,
                                                 const at::Tensor& fro_norm,
                                                 const at::Tensor& out_dot, double eps) {
  return DISPATCH_DEVICE_IMPL(pure_infsa_backward_impl, grad_out, q, k, v, rho,
                              key_padding_mask, fro_norm, out_dot, eps);
}

std::vector<at::Tensor> pure_infsa_forward(const at::Tensor& q, const at::Tensor& k,
                                           const at::Tensor& v, const at::Tensor& rho,
                                           const std::optional<at::Tensor>& key_padding_mask, double eps) {
  return pure_infsa_forward_impl(q, k, v, rho, key_padding_mask.value_or(at::Tensor()), eps);
}

std::vector<at::Tensor> pure_infsa_backward(const at::Tensor& grad_out, const at::Tensor& q,
                                            const at::Tensor& k, const at::Tensor& v,
                                            const at::Tensor& rho,
                                            const std::optional<at::Tensor>& key_padding_mask,
                                            const at::Tensor& fro_norm,
                                            const at::Tensor& out_dot, double eps) {
  return pure_infsa_backward_impl(grad_out, q, k, v, rho, key_padding_mask.value_or(at::Tensor()), fro_norm, out_dot,
                                  eps);
}
