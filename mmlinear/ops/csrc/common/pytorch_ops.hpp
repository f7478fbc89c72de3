// The declarations of the ops, in one place for every file that defines, registers or binds
// them: the functions mmlinear._ext exposes (pybind.cpp; defined in pytorch/<op>.cpp, where an
// undefined tensor stands for None), and their device-independent entry points `<op>_impl`,
// which the CPU and CUDA implementations register with (pytorch_device_registry.hpp).
#pragma once

#include <torch/extension.h>

#include <optional>
#include <vector>

// Exposed to Python.
std::vector<at::Tensor> linear_infsa_query_sums_forward(const at::Tensor& q,
                                                        const std::optional<at::Tensor>& mask);
at::Tensor linear_infsa_query_sums_backward(const at::Tensor& grad_queries,
                                            const at::Tensor& grad_energy, const at::Tensor& q,
                                            const std::optional<at::Tensor>& mask);
std::vector<at::Tensor> linear_infsa_key_pool_forward(const at::Tensor& central,
                                                      const at::Tensor& k, const at::Tensor& x,
                                                      const std::optional<at::Tensor>& mask);
std::vector<at::Tensor> linear_infsa_key_pool_backward(const at::Tensor& grad_inputs,
                                                       const at::Tensor& grad_scores,
                                                       const at::Tensor& central,
                                                       const at::Tensor& k, const at::Tensor& x,
                                                       const std::optional<at::Tensor>& mask);
std::vector<at::Tensor> pure_infsa_forward(const at::Tensor& q, const at::Tensor& k,
                                           const at::Tensor& v, const at::Tensor& rho,
                                           const std::optional<at::Tensor>& key_padding_mask,
                                           double eps);
std::vector<at::Tensor> pure_infsa_backward(const at::Tensor& grad_out, const at::Tensor& q,
                                            const at::Tensor& k, const at::Tensor& v,
                                            const at::Tensor& rho,
                                            const std::optional<at::Tensor>& key_padding_mask,
                                            const at::Tensor& fro_norm,
                                            const at::Tensor& out_dot, double eps);
at::Tensor dynamic_dwconv2d_forward(const at::Tensor& x, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias);
std::vector<at::Tensor> dynamic_dwconv2d_backward(const at::Tensor& grad_out,
                                                  const at::Tensor& x,
                                                  const at::Tensor& weight);

// The device-independent entry points; an undefined tensor is an absent mask or bias.
std::vector<at::Tensor> linear_infsa_query_sums_impl(const at::Tensor& q, const at::Tensor& mask);
at::Tensor linear_infsa_query_sums_backward_impl(const at::Tensor& grad_queries,
                                                 const at::Tensor& grad_energy,
                                                 const at::Tensor& q, const at::Tensor& mask);
std::vector<at::Tensor> linear_infsa_key_pool_impl(const at::Tensor& central, const at::Tensor& k,
                                                   const at::Tensor& x, const at::Tensor& mask);
std::vector<at::Tensor> linear_infsa_key_pool_backward_impl(
    const at::Tensor& grad_inputs, const at::Tensor& grad_scores, const at::Tensor& central,
    const at::Tensor& k, const at::Tensor& x, const at::Tensor& mask);
std::vector<at::Tensor> pure_infsa_forward_impl(const at::Tensor& q, const at::Tensor& k,
                                                const at::Tensor& v, const at::Tensor& rho,
                                                const at::Tensor& key_padding_mask, double eps);
std::vector<at::Tensor> pure_infsa_backward_impl(const at::Tensor& grad_out,
                                                 const at::Tensor& q, const at::Tensor& k,
                                                 const at::Tensor& v, const at::Tensor& rho,
                                                 const at::Tensor& key_padding_mask,
                                                 const at::Tensor& fro_norm,
                                                 const at::Tensor& out_dot, double eps);
at::Tensor dynamic_dwconv2d_forward_impl(const at::Tensor& x, const at::Tensor& weight,
                                         const at::Tensor& bias);
std::vector<at::Tensor> dynamic_dwconv2d_backward_impl(const at::Tensor& grad_out,
                                                       const at::Tensor& x,
                                                       const at::Tensor& weight);
