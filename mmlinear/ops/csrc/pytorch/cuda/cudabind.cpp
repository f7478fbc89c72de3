// Registers the CUDA implementations with the device registry (compiled only in CUDA builds).
#include "pytorch_device_registry.hpp"
#include "pytorch_ops.hpp"

std::vector<at::Tensor> linear_infsa_query_sums_cuda(const at::Tensor& q, const at::Tensor& mask);
REGISTER_DEVICE_IMPL(linear_infsa_query_sums_impl, CUDA, linear_infsa_query_sums_cuda);

at::Tensor linear_infsa_query_sums_backward_cuda(const at::Tensor& grad_queries,
                                                 const at::Tensor& grad_energy,
                                                 const at::Tensor& q, const at::Tensor& mask);
REGISTER_DEVICE_IMPL(linear_infsa_query_sums_backward_impl, CUDA,
                     linear_infsa_query_sums_backward_cuda);

std::vector<at::Tensor> linear_infsa_key_pool_cuda(const at::Tensor& central, const at::Tensor& k,
                                                   const at::Tensor& x, const at::Tensor& mask);
REGISTER_DEVICE_IMPL(linear_infsa_key_pool_impl, CUDA, linear_infsa_key_pool_cuda);

std::vector<at::Tensor> linear_infsa_key_pool_backward_cuda(
    const at::Tensor& grad_inputs, const at::Tensor& grad_scores, const at::Tensor& central,
    const at::Tensor& k, const at::Tensor& x, const at::Tensor& mask);
REGISTER_DEVICE_IMPL(linear_infsa_key_pool_backward_impl, CUDA,
                     linear_infsa_key_pool_backward_cuda);

std::vector<at::Tensor> pure_infsa_forward_cuda(const at::Tensor& q, const at::Tensor& k,
                                                const at::Tensor& v, const at::Tensor& rho,
                                                const at::Tensor& key_padding_mask,
                                                double eps);
REGISTER_DEVICE_IMPL(pure_infsa_forward_impl, CUDA, pure_infsa_forward_cuda);

std::vector<at::Tensor> pure_infsa_backward_cuda(const at::Tensor& grad_out,
                                                 const at::Tensor& q, const at::Tensor& k,
                                                 const at::Tensor& v, const at::Tensor& rho,
                                                 const at::Tensor& key_padding_mask,
                                                 const at::Tensor& fro_norm,
                                                 const at::Tensor& out_dot, double eps);
REGISTER_DEVICE_IMPL(pure_infsa_backward_impl, CUDA, pure_infsa_backward_cuda);

at::Tensor dynamic_dwconv2d_forward_cuda(const at::Tensor& x, const at::Tensor& weight,
                                         const at::Tensor& bias);
REGISTER_DEVICE_IMPL(dynamic_dwconv2d_forward_impl, CUDA, dynamic_dwconv2d_forward_cuda);

std::vector<at::Tensor> dynamic_dwconv2d_backward_cuda(const at::Tensor& grad_out,
                                                       const at::Tensor& x,
                                                       const at::Tensor& weight);
REGISTER_DEVICE_IMPL(dynamic_dwconv2d_backward_impl, CUDA, dynamic_dwconv2d_backward_cuda);
