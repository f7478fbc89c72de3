// Device-independent entry points of the per-sample depthwise convolution.
#include "pytorch_device_registry.hpp"
#include "pytorch_ops.hpp"

at::Tensor dynamic_dwconv2d_forward_impl(const at::Tensor& x, const at::Tensor& weight,
                                         const at::Tensor& bias) {
  return DISPATCH_DEVICE_IMPL(dynamic_dwconv2d_forward_impl, x, weight, bias);
}

std::vector<at::Tensor> dynamic_dwconv2d_backward_impl(const at::Tensor& grad_out,
                                                       const at::Tensor& x,
                                                       const at::Tensor& weight) {
  return DISPATCH_DEVICE_IMPL(dynamic_dwconv2d_backward_impl, grad_out, x, weight);
}

at::Tensor dynamic_dwconv2d_forward(const at::Tensor& x, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias) {
  return dynamic_dwconv2d_forward_impl(x, weight, bias.value_or(at::Tensor()));
}

std::vector<at::Tensor> dynamic_dwconv2d_backward(const at::Tensor& grad_out,
                                                  const at::Tensor& x,
                                                  const at::Tensor& weight) {
  return dynamic_dwconv2d_backward_impl(grad_out, x, weight);
}
