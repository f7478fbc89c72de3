// CPU per-sample depthwise convolution (stride 1, same padding k // 2): one task per
// (sample, channel) plane. Each kernel tap is applied as a shifted row axpy over the valid
// output columns, so the inner loop is contiguous and vectorises.
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "pytorch_cpp_helper.hpp"
#include "pytorch_device_registry.hpp"

namespace {

struct DwconvShape {
  int64_t planes, C, H, W, ks, pad;
};

DwconvShape dwconv_shape(const at::Tensor& x, const at::Tensor& weight) {
  return {x.size(0) * x.size(1), x.size(1), x.size(2), x.size(3), weight.size(2),
          weight.size(2) / 2};
}

// Output columns ox with 0 <= ox + offset < W.
inline void valid_range(int64_t offset, int64_t W, int64_t* lo, int64_t* hi) {
  *lo = std::max<int64_t>(0, -offset);
  *hi = std::min<int64_t>(W, W - offset);
}

template <typename scalar_t>
void dwconv_forward_kernel(const scalar_t* x, const scalar_t* weight, const scalar_t* bias,
                           DwconvShape sh, scalar_t* out) {
  using acc_t = cpu_acc_t<scalar_t>;
  const int64_t plane = sh.H * sh.W, taps = sh.ks * sh.ks;
  at::parallel_for(0, sh.planes, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(plane);
    for (int64_t p = begin; p < end; ++p) {
      const scalar_t* xp = x + p * plane;
      const scalar_t* wp = weight + p * taps;
      std::fill(acc.begin(), acc.end(), bias ? static_cast<acc_t>(bias[p]) : acc_t(0));
      for (int64_t u = 0; u < sh.ks; ++u) {
        for (int64_t w = 0; w < sh.ks; ++w) {
          const acc_t tap = wp[u * sh.ks + w];
          const int64_t dy = u - sh.pad, dx = w - sh.pad;
          int64_t x_lo, x_hi;
          valid_range(dx, sh.W, &x_lo, &x_hi);
          for (int64_t oy = std::max<int64_t>(0, -dy); oy < std::min(sh.H, sh.H - dy); ++oy) {
            const scalar_t* src = xp + (oy + dy) * sh.W + dx;
            acc_t* dst = acc.data() + oy * sh.W;
#pragma omp simd
            for (int64_t ox = x_lo; ox < x_hi; ++ox) dst[ox] += tap * static_cast<acc_t>(src[ox]);
          }
        }
      }
      scalar_t* op = out + p * plane;
      for (int64_t i = 0; i < plane; ++i) op[i] = static_cast<scalar_t>(acc[i]);
    }
  });
}

// grad_x is the correlation of grad_out with the flipped kernel; each weight tap's gradient
// is the dot product of grad_out with the correspondingly shifted input.
template <typename scalar_t>
void dwconv_backward_kernel(const scalar_t* grad_out, const scalar_t* x, const scalar_t* weight,
                            DwconvShape sh, scalar_t* grad_x, scalar_t* grad_weight,
                            scalar_t* grad_bias) {
  using acc_t = cpu_acc_t<scalar_t>;
  const int64_t plane = sh.H * sh.W, taps = sh.ks * sh.ks;
  at::parallel_for(0, sh.planes, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(plane);
    for (int64_t p = begin; p < end; ++p) {
      const scalar_t* gp = grad_out + p * plane;
      const scalar_t* xp = x + p * plane;
      const scalar_t* wp = weight + p * taps;
      std::fill(acc.begin(), acc.end(), acc_t(0));
      acc_t gb = 0;
      for (int64_t i = 0; i < plane; ++i) gb += static_cast<acc_t>(gp[i]);
      grad_bias[p] = static_cast<scalar_t>(gb);
      for (int64_t u = 0; u < sh.ks; ++u) {
        for (int64_t w = 0; w < sh.ks; ++w) {
          const acc_t tap = wp[u * sh.ks + w];
          const int64_t dy = u - sh.pad, dx = w - sh.pad;
          int64_t x_lo, x_hi;
          valid_range(dx, sh.W, &x_lo, &x_hi);
          acc_t gw = 0;
          for (int64_t oy = std::max<int64_t>(0, -dy); oy < std::min(sh.H, sh.H - dy); ++oy) {
            const scalar_t* src = xp + (oy + dy) * sh.W + dx;
            const scalar_t* g = gp + oy * sh.W;
            acc_t* dst = acc.data() + (oy + dy) * sh.W + dx;
#pragma omp simd reduction(+ : gw)
            for (int64_t ox = x_lo; ox < x_hi; ++ox) {
              const acc_t go = static_cast<acc_t>(g[ox]);
              gw += go * static_cast<acc_t>(src[ox]);
              dst[ox] += tap * go;
            }
          }
          grad_weight[p * taps + u * sh.ks + w] = static_cast<scalar_t>(gw);
        }
      }
      scalar_t* gx = grad_x + p * plane;
      for (int64_t i = 0; i < plane; ++i) gx[i] = static_cast<scalar_t>(acc[i]);
    }
  });
}

}  // namespace

at::Tensor dynamic_dwconv2d_forward_cpu(const at::Tensor& x, const at::Tensor& weight,
                                        const at::Tensor& bias) {
  CHECK_CONTIGUOUS(x);
  CHECK_CONTIGUOUS(weight);
  const auto sh = dwconv_shape(x, weight);
  auto out = at::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "dynamic_dwconv2d_forward_cpu", [&] {
    dwconv_forward_kernel<scalar_t>(x.data_ptr<scalar_t>(), weight.data_ptr<scalar_t>(),
                                    bias.defined() ? bias.data_ptr<scalar_t>() : nullptr, sh,
                                    out.data_ptr<scalar_t>());
  });
  return out;
}

std::vector<at::Tensor> dynamic_dwconv2d_backward_cpu(const at::Tensor& grad_out,
                                                      const at::Tensor& x,
                                                      const at::Tensor& weight) {
  CHECK_CONTIGUOUS(grad_out);
  const auto sh = dwconv_shape(x, weight);
  auto grad_x = at::empty_like(x), grad_weight = at::empty_like(weight);
  auto grad_bias = at::empty({x.size(0), x.size(1)}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "dynamic_dwconv2d_backward_cpu", [&] {
    dwconv_backward_kernel<scalar_t>(grad_out.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(),
                                     weight.data_ptr<scalar_t>(), sh,
                                     grad_x.data_ptr<scalar_t>(),
                                     grad_weight.data_ptr<scalar_t>(),
                                     grad_bias.data_ptr<scalar_t>());
  });
  return {grad_x, grad_weight, grad_bias};
}

at::Tensor dynamic_dwconv2d_forward_impl(const at::Tensor& x, const at::Tensor& weight,
                                         const at::Tensor& bias);
std::vector<at::Tensor> dynamic_dwconv2d_backward_impl(const at::Tensor& grad_out,
                                                       const at::Tensor& x,
                                                       const at::Tensor& weight);
REGISTER_DEVICE_IMPL(dynamic_dwconv2d_forward_impl, CPU, dynamic_dwconv2d_forward_cpu);
REGISTER_DEVICE_IMPL(dynamic_dwconv2d_backward_impl, CPU, dynamic_dwconv2d_backward_cpu);
