// CPU per-sample depthwise convolution (stride 1, same padding k // 2). On a contiguous
// (NCHW) input: one task per (sample, channel) plane, each kernel tap applied as a shifted
// row axpy over the valid output columns, so the inner loop is contiguous and vectorises. On a
// channels-last (NHWC) input, the layout of row-major tokens (B, N, C) seen as a map: one task
// per output row, the inner loop over the channels, and a channels-last output, so a token
// model pays no transposition either way. Both sum the bias then the taps in the same order.
// Half types are read and written as they are and accumulated in float32.
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "pytorch_cpp_helper.hpp"
#include "pytorch_device_registry.hpp"
#include "pytorch_ops.hpp"

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

// A tap t = u * ks + w of the kernel at the offset (dy, dx) = (u - pad, w - pad), and the
// output rows [y_lo, y_hi) and columns [x_lo, x_hi) whose input (oy + dy, ox + dx) lies in
// the map.
struct Tap {
  int64_t t, dy, dx, y_lo, y_hi, x_lo, x_hi;
};

// tap_fn(tap) for every tap of the kernel, row-major: the order in which both passes sum.
template <typename TapFn>
inline void for_each_tap(const DwconvShape& sh, TapFn tap_fn) {
  for (int64_t u = 0; u < sh.ks; ++u) {
    for (int64_t w = 0; w < sh.ks; ++w) {
      const int64_t dy = u - sh.pad, dx = w - sh.pad;
      Tap tap{u * sh.ks + w, dy, dx, std::max<int64_t>(0, -dy), std::min(sh.H, sh.H - dy)};
      valid_range(dx, sh.W, &tap.x_lo, &tap.x_hi);
      tap_fn(tap);
    }
  }
}

// In parallel over the (sample, channel) planes p: plane_fn(p, acc), acc a thread's H * W
// accumulator, which is then rounded into the plane p of `out`.
template <typename scalar_t, typename PlaneFn>
void for_each_plane(const DwconvShape& sh, scalar_t* out, PlaneFn plane_fn) {
  using acc_t = cpu_acc_t<scalar_t>;
  const int64_t plane = sh.H * sh.W;
  at::parallel_for(0, sh.planes, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(plane);
    for (int64_t p = begin; p < end; ++p) {
      plane_fn(p, acc.data());
      scalar_t* op = out + p * plane;
      for (int64_t i = 0; i < plane; ++i) op[i] = static_cast<scalar_t>(acc[i]);
    }
  });
}

template <typename scalar_t>
void dwconv_forward_kernel(const scalar_t* x, const scalar_t* weight, const scalar_t* bias,
                           DwconvShape sh, scalar_t* out) {
  using acc_t = cpu_acc_t<scalar_t>;
  const int64_t plane = sh.H * sh.W, taps = sh.ks * sh.ks;
  for_each_plane(sh, out, [&](int64_t p, acc_t* acc) {
    const scalar_t* xp = x + p * plane;
    std::fill(acc, acc + plane, bias ? static_cast<acc_t>(bias[p]) : acc_t(0));
    for_each_tap(sh, [&](const Tap& tap) {
      const acc_t wt = weight[p * taps + tap.t];
      for (int64_t oy = tap.y_lo; oy < tap.y_hi; ++oy) {
        const scalar_t* src = xp + (oy + tap.dy) * sh.W + tap.dx;
        acc_t* dst = acc + oy * sh.W;
#pragma omp simd
        for (int64_t ox = tap.x_lo; ox < tap.x_hi; ++ox) dst[ox] += wt * static_cast<acc_t>(src[ox]);
      }
    });
  });
}

template <typename scalar_t>
void dwconv_forward_channels_last_kernel(const scalar_t* x, const scalar_t* weight,
                                         const scalar_t* bias, DwconvShape sh, scalar_t* out) {
  using acc_t = cpu_acc_t<scalar_t>;
  const int64_t B = sh.planes / sh.C, C = sh.C, taps = sh.ks * sh.ks, row = sh.W * C;
  // The taps of each sample as (taps, C), so that one tap reads all channels contiguously.
  std::vector<acc_t> taps_by_channel(B * taps * C);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t t = 0; t < taps; ++t)
        taps_by_channel[(b * taps + t) * C + c] = static_cast<acc_t>(weight[(b * C + c) * taps + t]);
  at::parallel_for(0, B * sh.H, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(row);
    for (int64_t r = begin; r < end; ++r) {
      const int64_t b = r / sh.H, oy = r % sh.H;
      const acc_t* wb = taps_by_channel.data() + b * taps * C;
      for (int64_t ox = 0; ox < sh.W; ++ox)
        for (int64_t c = 0; c < C; ++c)
          acc[ox * C + c] = bias ? static_cast<acc_t>(bias[b * C + c]) : acc_t(0);
      for (int64_t u = 0; u < sh.ks; ++u) {
        const int64_t iy = oy + u - sh.pad;
        if (iy < 0 || iy >= sh.H) continue;
        const scalar_t* src_row = x + (b * sh.H + iy) * row;
        for (int64_t w = 0; w < sh.ks; ++w) {
          const acc_t* tap = wb + (u * sh.ks + w) * C;
          const int64_t dx = w - sh.pad;
          int64_t x_lo, x_hi;
          valid_range(dx, sh.W, &x_lo, &x_hi);
          for (int64_t ox = x_lo; ox < x_hi; ++ox) {
            const scalar_t* src = src_row + (ox + dx) * C;
            acc_t* dst = acc.data() + ox * C;
#pragma omp simd
            for (int64_t c = 0; c < C; ++c) dst[c] += tap[c] * static_cast<acc_t>(src[c]);
          }
        }
      }
      scalar_t* op = out + r * row;
      for (int64_t i = 0; i < row; ++i) op[i] = static_cast<scalar_t>(acc[i]);
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
  for_each_plane(sh, grad_x, [&](int64_t p, acc_t* acc) {
    const scalar_t* gp = grad_out + p * plane;
    const scalar_t* xp = x + p * plane;
    std::fill(acc, acc + plane, acc_t(0));
    acc_t gb = 0;
    for (int64_t i = 0; i < plane; ++i) gb += static_cast<acc_t>(gp[i]);
    grad_bias[p] = static_cast<scalar_t>(gb);
    for_each_tap(sh, [&](const Tap& tap) {
      const acc_t wt = weight[p * taps + tap.t];
      acc_t gw = 0;
      for (int64_t oy = tap.y_lo; oy < tap.y_hi; ++oy) {
        const scalar_t* src = xp + (oy + tap.dy) * sh.W + tap.dx;
        const scalar_t* g = gp + oy * sh.W;
        acc_t* dst = acc + (oy + tap.dy) * sh.W + tap.dx;
#pragma omp simd reduction(+ : gw)
        for (int64_t ox = tap.x_lo; ox < tap.x_hi; ++ox) {
          const acc_t go = static_cast<acc_t>(g[ox]);
          gw += go * static_cast<acc_t>(src[ox]);
          dst[ox] += wt * go;
        }
      }
      grad_weight[p * taps + tap.t] = static_cast<scalar_t>(gw);
    });
  });
}

}  // namespace

// x contiguous (NCHW) or channels-last (NHWC); the output has x's layout.
at::Tensor dynamic_dwconv2d_forward_cpu(const at::Tensor& x, const at::Tensor& weight,
                                        const at::Tensor& bias) {
  const bool channels_last =
      !x.is_contiguous() && x.is_contiguous(at::MemoryFormat::ChannelsLast);
  if (!channels_last) CHECK_CONTIGUOUS(x);
  CHECK_CONTIGUOUS(weight);
  const auto sh = dwconv_shape(x, weight);
  auto out = channels_last ? at::empty_like(x, at::MemoryFormat::ChannelsLast)
                           : at::empty_like(x, at::MemoryFormat::Contiguous);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kBFloat16, at::kHalf, x.scalar_type(), "dynamic_dwconv2d_forward_cpu", [&] {
    const scalar_t* bias_ptr = bias.defined() ? bias.data_ptr<scalar_t>() : nullptr;
    if (channels_last) {
      dwconv_forward_channels_last_kernel<scalar_t>(x.data_ptr<scalar_t>(),
                                                    weight.data_ptr<scalar_t>(), bias_ptr, sh,
                                                    out.data_ptr<scalar_t>());
    } else {
      dwconv_forward_kernel<scalar_t>(x.data_ptr<scalar_t>(), weight.data_ptr<scalar_t>(),
                                      bias_ptr, sh, out.data_ptr<scalar_t>());
    }
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
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kBFloat16, at::kHalf, x.scalar_type(), "dynamic_dwconv2d_backward_cpu", [&] {
    dwconv_backward_kernel<scalar_t>(grad_out.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(),
                                     weight.data_ptr<scalar_t>(), sh,
                                     grad_x.data_ptr<scalar_t>(),
                                     grad_weight.data_ptr<scalar_t>(),
                                     grad_bias.data_ptr<scalar_t>());
  });
  return {grad_x, grad_weight, grad_bias};
}

REGISTER_DEVICE_IMPL(dynamic_dwconv2d_forward_impl, CPU, dynamic_dwconv2d_forward_cpu);
REGISTER_DEVICE_IMPL(dynamic_dwconv2d_backward_impl, CPU, dynamic_dwconv2d_backward_cpu);
