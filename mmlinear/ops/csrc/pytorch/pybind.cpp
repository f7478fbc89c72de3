// The one extension module, mmlinear._ext. Tensors are expected contiguous and validated by
// the Python wrappers in mmlinear/ops; an undefined tensor (None) means "no mask" / "no bias".
#include <torch/extension.h>

#include "cpu_isa.hpp"
#include "pytorch_ops.hpp"

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
  m.def("linear_infsa_query_sums_forward", &linear_infsa_query_sums_forward,
        "Linear-InfSA query sums of (B,H,n,d) q: (sum_i e_i q_i / sqrt(d) (B,H,d), sum_i e_i "
        "(B,H)) with e_i = ||q_i|| / sqrt(d), in the accumulation dtype",
        py::arg("q"), py::arg("mask"));
  m.def("linear_infsa_query_sums_backward", &linear_infsa_query_sums_backward,
        "Linear-InfSA query sums backward: grad_q", py::arg("grad_queries"),
        py::arg("grad_energy"), py::arg("q"), py::arg("mask"));
  m.def("linear_infsa_key_pool_forward", &linear_infsa_key_pool_forward,
        "Linear-InfSA key pooling: (sum_j s_j x_j (B,H,C), sum_j s_j (B,H)) with s_j = "
        "relu(central . k_j / sqrt(d)), in the accumulation dtype",
        py::arg("central"), py::arg("k"), py::arg("x"), py::arg("mask"));
  m.def("linear_infsa_key_pool_backward", &linear_infsa_key_pool_backward,
        "Linear-InfSA key pooling backward: (grad_central, grad_k, grad_x)",
        py::arg("grad_inputs"), py::arg("grad_scores"), py::arg("central"), py::arg("k"),
        py::arg("x"), py::arg("mask"));
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
