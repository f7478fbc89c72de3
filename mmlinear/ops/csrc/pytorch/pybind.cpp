// The one extension module, mmlinear._ext. Tensors are expected contiguous and validated by
// the Python wrappers in mmlinear/ops; an undefined tensor (None) means "no mask" / "no bias".
#include <torch/extension.h>

#include "cpu_isa.hpp"

std::vector<at::Tensor> linear_infsa_forward(const at::Tensor& q, const at::Tensor& k,
                                             const at::Tensor& v, const at::Tensor& rho,
                                             const std::optional<at::Tensor>& key_padding_mask, double eps);
std::vector<at::Tensor> linear_infsa_backward(const at::Tensor& grad_pooled,
                                              const at::Tensor& q, const at::Tensor& k,
                                              const at::Tensor& v, const at::Tensor& rho,
                                              const std::optional<at::Tensor>& key_padding_mask,
                                              const at::Tensor& central,
                                              const at::Tensor& energy_sum,
                                              const at::Tensor& score_sum, double eps);
std::vector<at::Tensor> pure_infsa_forward(const at::Tensor& q, const at::Tensor& k,
                                           const at::Tensor& v, const at::Tensor& rho,
                                           const std::optional<at::Tensor>& key_padding_mask, double eps);
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

// Whether this build holds CUDA kernels; the Python ops use the reference elsewhere.
bool with_cuda() {
#ifdef MMLINEAR_WITH_CUDA
  return true;
#else
  return false;
#endif
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("with_cuda", &with_cuda, "True when the CUDA kernels are compiled in");
  m.def(
      "cpu_capability", [] { return std::string(mmlinear::cpu_isa_name(mmlinear::cpu_isa())); },
      "The instruction set the CPU kernels run with (AVX512, AVX2 or DEFAULT): ATen's own "
      "choice, which ATEN_CPU_CAPABILITY overrides");
  m.def("linear_infsa_forward", &linear_infsa_forward,
        "Linear-InfSA forward: (pooled (B,H,d), central (B,H,d), energy_sum (B,H), "
        "score_sum (B,H)), all in the accumulation dtype",
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("rho"), py::arg("key_padding_mask"),
        py::arg("eps"));
  m.def("linear_infsa_backward", &linear_infsa_backward,
        "Linear-InfSA backward: (grad_q, grad_k, grad_v, grad_rho (B,H))", py::arg("grad_pooled"),
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("rho"), py::arg("key_padding_mask"),
        py::arg("central"), py::arg("energy_sum"), py::arg("score_sum"), py::arg("eps"));
  m.def("pure_infsa_forward", &pure_infsa_forward,
        "Pure InfSA forward without the N x S matrix: (out (B,H,N,d), fro_norm (B,H))",
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("rho"), py::arg("key_padding_mask"),
        py::arg("eps"));
  m.def("pure_infsa_backward", &pure_infsa_backward,
        "Pure InfSA backward (tiles recomputed): (grad_q, grad_k, grad_v, grad_rho (B,H))",
        py::arg("grad_out"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("rho"),
        py::arg("key_padding_mask"), py::arg("fro_norm"), py::arg("out_dot"), py::arg("eps"));
  m.def("dynamic_dwconv2d_forward", &dynamic_dwconv2d_forward,
        "Per-sample depthwise conv2d, same padding", py::arg("x"), py::arg("weight"),
        py::arg("bias"));
  m.def("dynamic_dwconv2d_backward", &dynamic_dwconv2d_backward,
        "Per-sample depthwise conv2d backward: (grad_x, grad_weight, grad_bias (B,C))",
        py::arg("grad_out"), py::arg("x"), py::arg("weight"));
}
