// Device-independent entry points of the Linear-InfSA sum ops (the two passes of its
// factorised form: the query sums, then the key-score pooling of the attention inputs).
#include "pytorch_device_registry.hpp"
#include "pytorch_ops.hpp"

std::vector<at::Tensor> linear_infsa_query_sums_impl(const at::Tensor& q, const at::Tensor& mask) {
  return DISPATCH_DEVICE_IMPL(linear_infsa_query_sums_impl, q, mask);
}

at::Tensor linear_infsa_query_sums_backward_impl(const at::Tensor& grad_queries,
                                                 const at::Tensor& grad_energy,
                                                 const at::Tensor& q, const at::Tensor& mask) {
  return DISPATCH_DEVICE_IMPL(linear_infsa_query_sums_backward_impl, grad_queries, grad_energy, q,
                              mask);
}

std::vector<at::Tensor> linear_infsa_key_pool_impl(const at::Tensor& central, const at::Tensor& k,
                                                   const at::Tensor& x, const at::Tensor& mask) {
  return DISPATCH_DEVICE_IMPL(linear_infsa_key_pool_impl, central, k, x, mask);
}

std::vector<at::Tensor> linear_infsa_key_pool_backward_impl(
    const at::Tensor& grad_inputs, const at::Tensor& grad_scores, const at::Tensor& central,
    const at::Tensor& k, const at::Tensor& x, const at::Tensor& mask) {
  return DISPATCH_DEVICE_IMPL(linear_infsa_key_pool_backward_impl, grad_inputs, grad_scores,
                              central, k, x, mask);
}

std::vector<at::Tensor> linear_infsa_query_sums_forward(const at::Tensor& q,
                                                        const std::optional<at::Tensor>& mask) {
  return linear_infsa_query_sums_impl(q, mask.value_or(at::Tensor()));
}

at::Tensor linear_infsa_query_sums_backward(const at::Tensor& grad_queries,
                                            const at::Tensor& grad_energy, const at::Tensor& q,
                                            const std::optional<at::Tensor>& mask) {
  return linear_infsa_query_sums_backward_impl(grad_queries, grad_energy, q,
                                               mask.value_or(at::Tensor()));
}

std::vector<at::Tensor> linear_infsa_key_pool_forward(const at::Tensor& central,
                                                      const at::Tensor& k, const at::Tensor& x,
                                                      const std::optional<at::Tensor>& mask) {
  return linear_infsa_key_pool_impl(central, k, x, mask.value_or(at::Tensor()));
}

std::vector<at::Tensor> linear_infsa_key_pool_backward(const at::Tensor& grad_inputs,
                                                       const at::Tensor& grad_scores,
                                                       const at::Tensor& central,
                                                       const at::Tensor& k, const at::Tensor& x,
                                                       const std::optional<at::Tensor>& mask) {
  return linear_infsa_key_pool_backward_impl(grad_inputs, grad_scores, central, k, x,
                                             mask.value_or(at::Tensor()));
}
