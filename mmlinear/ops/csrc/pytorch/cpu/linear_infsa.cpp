// CPU Linear-InfSA sums: the two passes over the tokens of Linear-InfSA's factorised form
// (docs/ops.md), forward and backward. A task is a (sample, chunk of tokens) pair that visits
// every head of its tokens, so each row of q, k and x is read once per pass; its partial sums
// go to their own slot of a (B, chunks, H, ...) buffer, summed afterwards in a fixed order
// (token_chunks.hpp). The hot loops run over d or C and are compiled per CPU capability
// (cpu_isa.hpp).
#include <algorithm>
#include <cmath>
#include <vector>

#include "pytorch_cpp_helper.hpp"
#include "pytorch_device_registry.hpp"
#include "pytorch_ops.hpp"
#include "token_chunks.hpp"

namespace {

// A chunk is at least this many tokens: below it, a task's set-up outweighs its work.
constexpr int64_t kMinChunkTokens = 256;

// The strides of a (B, H, n, d) tensor whose last dimension is contiguous, e.g. a transposed
// projection output (B, n, H, d): no copy is needed to read it.
struct HeadRows {
  int64_t sb, sh, sn;

  // The row (b, h, i) of the tensor whose data starts at `base`.
  template <typename T>
  T* row(T* base, int64_t b, int64_t h, int64_t i) const {
    return base + b * sb + h * sh + i * sn;
  }
};

HeadRows head_rows(const at::Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2)}; }

// The shape of a call: B samples, H heads, n tokens, head dimension d, C input channels.
struct SumShape {
  int64_t B, H, n, d, C;
  int64_t chunk_tokens, chunks;
};

SumShape sum_shape(const at::Tensor& heads, int64_t C) {
  const int64_t n = heads.size(2);
  const int64_t tokens = mmlinear::chunk_tokens(n, kMinChunkTokens);
  return {heads.size(0), heads.size(1), n, heads.size(3), C, tokens,
          mmlinear::num_chunks(n, tokens)};
}

// The tokens [begin, end) of sample b that task number `task` (sample-major) covers.
struct TaskTokens {
  int64_t b, begin, end;
};

// 1 / sqrt(d), the scale of the queries and keys.
template <typename acc_t>
acc_t inv_sqrt(int64_t d) {
  return 1 / std::sqrt(static_cast<acc_t>(d));
}

TaskTokens task_tokens(const SumShape& sh, int64_t task) {
  const int64_t begin = task % sh.chunks * sh.chunk_tokens;
  return {task / sh.chunks, begin, std::min(sh.n, begin + sh.chunk_tokens)};
}

void check_rows(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.stride(-1) == 1 || t.size(-1) == 1, name,
              " must be contiguous in its last dimension (the Python wrapper makes it so)");
}

// An output shaped like `like` in its memory layout where that keeps rows contiguous.
at::Tensor empty_rows_like(const at::Tensor& like) {
  auto out = at::empty_like(like, at::MemoryFormat::Preserve);
  return out.stride(-1) == 1 ? out : at::empty(like.sizes(), like.options());
}

at::TensorOptions acc_options(const at::Tensor& t) {
  return t.options().dtype(t.scalar_type() == at::kDouble ? at::kDouble : at::kFloat);
}

template <typename scalar_t>
struct QuerySumsArgs {
  using acc_t = cpu_acc_t<scalar_t>;
  const scalar_t* q;
  HeadRows qs;
  const bool* mask;  // (B, n) or null
  SumShape sh;
  acc_t* part;  // (B, chunks, H, d + 1): the energy-weighted query sum, then the energy sum
};

// Energies e_i = ||q_i|| / sqrt(d) of the scaled queries and the sums e_i q_i / sqrt(d), e_i.
template <typename scalar_t>
MMLINEAR_ISA_INLINE void query_sums_tasks(const QuerySumsArgs<scalar_t>& a, int64_t begin,
                                          int64_t end) {
  using acc_t = cpu_acc_t<scalar_t>;
  const SumShape& sh = a.sh;
  const int64_t d = sh.d, width = d + 1;
  const acc_t scale = inv_sqrt<acc_t>(d);
  for (int64_t task = begin; task < end; ++task) {
    const auto [b, i0, i1] = task_tokens(sh, task);
    acc_t* part = zeroed(a.part + task * sh.H * width, sh.H * width);
    for (int64_t i = i0; i < i1; ++i) {
      if (a.mask && a.mask[b * sh.n + i]) continue;
      for (int64_t h = 0; h < sh.H; ++h) {
        const scalar_t* qi = a.qs.row(a.q, b, h, i);
        const acc_t e = scale * std::sqrt(dot<acc_t>(qi, qi, d));
        acc_t* ph = part + h * width;
        axpy<acc_t>(e * scale, qi, ph, d);
        ph[d] += e;
      }
    }
  }
}
MMLINEAR_DEFINE_CPU_ISA_VARIANTS(query_sums_tasks, QuerySumsArgs)

template <typename scalar_t>
struct QuerySumsBackwardArgs {
  using acc_t = cpu_acc_t<scalar_t>;
  const acc_t *grad_queries, *grad_energy;  // (B, H, d), (B, H)
  const scalar_t* q;
  HeadRows qs;
  const bool* mask;
  SumShape sh;
  scalar_t* grad_q;
  HeadRows gs;
};

// With s = q / sqrt(d) and e = ||s||: the gradient of sum_i e_i s_i and sum_i e_i at s_i is
// e_i g + ((s_i . g) + g_e) s_i / e_i; zero at e_i = 0, as autograd's norm gives.
template <typename scalar_t>
MMLINEAR_ISA_INLINE void query_sums_backward_tasks(const QuerySumsBackwardArgs<scalar_t>& a,
                                                   int64_t begin, int64_t end) {
  using acc_t = cpu_acc_t<scalar_t>;
  const SumShape& sh = a.sh;
  const int64_t d = sh.d;
  const acc_t scale = inv_sqrt<acc_t>(d);
  for (int64_t task = begin; task < end; ++task) {
    const auto [b, i0, i1] = task_tokens(sh, task);
    for (int64_t i = i0; i < i1; ++i) {
      const bool masked = a.mask && a.mask[b * sh.n + i];
      for (int64_t h = 0; h < sh.H; ++h) {
        const scalar_t* qi = a.qs.row(a.q, b, h, i);
        scalar_t* gi = a.gs.row(a.grad_q, b, h, i);
        const acc_t e = masked ? acc_t(0) : scale * std::sqrt(dot<acc_t>(qi, qi, d));
        if (e == 0) {
          std::fill(gi, gi + d, scalar_t(0));
          continue;
        }
        const acc_t* g = a.grad_queries + (b * sh.H + h) * d;
        const acc_t coef = (scale * dot<acc_t>(qi, g, d) + a.grad_energy[b * sh.H + h]) / e;
#pragma omp simd
        for (int64_t m = 0; m < d; ++m)
          gi[m] = static_cast<scalar_t>(scale * (e * g[m] + coef * scale * static_cast<acc_t>(qi[m])));
      }
    }
  }
}
MMLINEAR_DEFINE_CPU_ISA_VARIANTS(query_sums_backward_tasks, QuerySumsBackwardArgs)

template <typename scalar_t>
struct KeyPoolArgs {
  using acc_t = cpu_acc_t<scalar_t>;
  const acc_t* central;  // (B, H, d)
  const scalar_t* k;
  HeadRows ks;
  const scalar_t* x;
  int64_t xsb, xsn;
  const bool* mask;
  SumShape sh;
  acc_t* part;  // (B, chunks, H, C + 1): the score-weighted input sum, then the score sum
};

// Scores s_hj = relu(q_bar_h . k_hj / sqrt(d)) and the sums s_hj x_j, s_hj. Branch-free
// ReLU: a non-positive score adds zero (random signs would mispredict half the time).
template <typename scalar_t>
MMLINEAR_ISA_INLINE void key_pool_tasks(const KeyPoolArgs<scalar_t>& a, int64_t begin,
                                        int64_t end) {
  using acc_t = cpu_acc_t<scalar_t>;
  const SumShape& sh = a.sh;
  const int64_t d = sh.d, C = sh.C, width = C + 1;
  const acc_t scale = inv_sqrt<acc_t>(d);
  for (int64_t task = begin; task < end; ++task) {
    const auto [b, j0, j1] = task_tokens(sh, task);
    acc_t* part = zeroed(a.part + task * sh.H * width, sh.H * width);
    for (int64_t j = j0; j < j1; ++j) {
      if (a.mask && a.mask[b * sh.n + j]) continue;
      const scalar_t* xj = a.x + b * a.xsb + j * a.xsn;
      for (int64_t h = 0; h < sh.H; ++h) {
        const scalar_t* kj = a.ks.row(a.k, b, h, j);
        const acc_t s =
            std::max(scale * dot<acc_t>(kj, a.central + (b * sh.H + h) * d, d), acc_t(0));
        acc_t* ph = part + h * width;
        axpy<acc_t>(s, xj, ph, C);
        ph[C] += s;
      }
    }
  }
}
MMLINEAR_DEFINE_CPU_ISA_VARIANTS(key_pool_tasks, KeyPoolArgs)

template <typename scalar_t>
struct KeyPoolBackwardArgs {
  using acc_t = cpu_acc_t<scalar_t>;
  const acc_t *grad_inputs, *grad_scores, *central;  // (B, H, C), (B, H), (B, H, d)
  const scalar_t* k;
  HeadRows ks;
  const scalar_t* x;
  int64_t xsb, xsn;
  const bool* mask;
  SumShape sh;
  acc_t* part;  // (B, chunks, H, d): the central query's gradient
  scalar_t* grad_k;
  HeadRows gks;
  scalar_t* grad_x;
  int64_t gxsb, gxsn;
};

// On a positive score, dL/ds_hj = x_j . g_h + g_s,h reaches k_hj and q_bar_h through the
// product; x_j gets sum_h s_hj g_h. A masked token gets no gradient.
template <typename scalar_t>
MMLINEAR_ISA_INLINE void key_pool_backward_tasks(const KeyPoolBackwardArgs<scalar_t>& a,
                                                 int64_t begin, int64_t end) {
  using acc_t = cpu_acc_t<scalar_t>;
  const SumShape& sh = a.sh;
  const int64_t d = sh.d, C = sh.C;
  const acc_t scale = inv_sqrt<acc_t>(d);
  std::vector<acc_t> row(C);
  for (int64_t task = begin; task < end; ++task) {
    const auto [b, j0, j1] = task_tokens(sh, task);
    acc_t* part = zeroed(a.part + task * sh.H * d, sh.H * d);
    for (int64_t j = j0; j < j1; ++j) {
      const bool masked = a.mask && a.mask[b * sh.n + j];
      const scalar_t* xj = a.x + b * a.xsb + j * a.xsn;
      scalar_t* gxj = a.grad_x + b * a.gxsb + j * a.gxsn;
      std::fill(row.begin(), row.end(), acc_t(0));
      for (int64_t h = 0; h < sh.H; ++h) {
        const scalar_t* kj = a.ks.row(a.k, b, h, j);
        scalar_t* gkj = a.gks.row(a.grad_k, b, h, j);
        const acc_t* c = a.central + (b * sh.H + h) * d;
        const acc_t s = masked ? acc_t(0) : scale * dot<acc_t>(kj, c, d);
        if (!(s > 0)) {
          std::fill(gkj, gkj + d, scalar_t(0));
          continue;
        }
        const acc_t* g = a.grad_inputs + (b * sh.H + h) * C;
        const acc_t gz = scale * (dot<acc_t>(xj, g, C) + a.grad_scores[b * sh.H + h]);
#pragma omp simd
        for (int64_t m = 0; m < d; ++m) gkj[m] = static_cast<scalar_t>(gz * c[m]);
        axpy<acc_t>(gz, kj, part + h * d, d);
        axpy<acc_t>(s, g, row.data(), C);
      }
#pragma omp simd
      for (int64_t m = 0; m < C; ++m) gxj[m] = static_cast<scalar_t>(row[m]);
    }
  }
}
MMLINEAR_DEFINE_CPU_ISA_VARIANTS(key_pool_backward_tasks, KeyPoolBackwardArgs)

const bool* mask_ptr(const at::Tensor& mask) {
  return mask.defined() ? mask.data_ptr<bool>() : nullptr;
}

}  // namespace

std::vector<at::Tensor> linear_infsa_query_sums_cpu(const at::Tensor& q, const at::Tensor& mask) {
  check_rows(q, "q");
  const auto sh = sum_shape(q, 0);
  auto part = at::empty({sh.B, sh.chunks, sh.H, sh.d + 1}, acc_options(q));
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "linear_infsa_query_sums_cpu", [&] {
    using acc_t = cpu_acc_t<scalar_t>;
    const QuerySumsArgs<scalar_t> args{q.data_ptr<scalar_t>(), head_rows(q), mask_ptr(mask), sh,
                                       part.data_ptr<acc_t>()};
    parallel_tasks(query_sums_tasks_for_cpu_isa<scalar_t>(), args, sh.B * sh.chunks);
  });
  const auto total = part.sum(1);  // (B, H, d + 1)
  return {total.narrow(-1, 0, sh.d).clone(), total.select(-1, sh.d).clone()};
}

at::Tensor linear_infsa_query_sums_backward_cpu(const at::Tensor& grad_queries,
                                                const at::Tensor& grad_energy,
                                                const at::Tensor& q, const at::Tensor& mask) {
  check_rows(q, "q");
  CHECK_CONTIGUOUS(grad_queries);
  CHECK_CONTIGUOUS(grad_energy);
  const auto sh = sum_shape(q, 0);
  auto grad_q = empty_rows_like(q);
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "linear_infsa_query_sums_backward_cpu", [&] {
    using acc_t = cpu_acc_t<scalar_t>;
    const QuerySumsBackwardArgs<scalar_t> args{
        grad_queries.data_ptr<acc_t>(), grad_energy.data_ptr<acc_t>(), q.data_ptr<scalar_t>(),
        head_rows(q), mask_ptr(mask), sh, grad_q.data_ptr<scalar_t>(), head_rows(grad_q)};
    parallel_tasks(query_sums_backward_tasks_for_cpu_isa<scalar_t>(), args, sh.B * sh.chunks);
  });
  return grad_q;
}

std::vector<at::Tensor> linear_infsa_key_pool_cpu(const at::Tensor& central, const at::Tensor& k,
                                                  const at::Tensor& x, const at::Tensor& mask) {
  check_rows(k, "k");
  check_rows(x, "x");
  CHECK_CONTIGUOUS(central);
  const auto sh = sum_shape(k, x.size(2));
  auto part = at::empty({sh.B, sh.chunks, sh.H, sh.C + 1}, acc_options(k));
  AT_DISPATCH_FLOATING_TYPES(k.scalar_type(), "linear_infsa_key_pool_cpu", [&] {
    using acc_t = cpu_acc_t<scalar_t>;
    const KeyPoolArgs<scalar_t> args{central.data_ptr<acc_t>(), k.data_ptr<scalar_t>(),
                                     head_rows(k), x.data_ptr<scalar_t>(), x.stride(0),
                                     x.stride(1), mask_ptr(mask), sh, part.data_ptr<acc_t>()};
    parallel_tasks(key_pool_tasks_for_cpu_isa<scalar_t>(), args, sh.B * sh.chunks);
  });
  const auto total = part.sum(1);  // (B, H, C + 1)
  return {total.narrow(-1, 0, sh.C).clone(), total.select(-1, sh.C).clone()};
}

std::vector<at::Tensor> linear_infsa_key_pool_backward_cpu(
    const at::Tensor& grad_inputs, const at::Tensor& grad_scores, const at::Tensor& central,
    const at::Tensor& k, const at::Tensor& x, const at::Tensor& mask) {
  check_rows(k, "k");
  check_rows(x, "x");
  CHECK_CONTIGUOUS(grad_inputs);
  CHECK_CONTIGUOUS(grad_scores);
  CHECK_CONTIGUOUS(central);
  const auto sh = sum_shape(k, x.size(2));
  auto part = at::empty({sh.B, sh.chunks, sh.H, sh.d}, central.options());
  auto grad_k = empty_rows_like(k), grad_x = empty_rows_like(x);
  AT_DISPATCH_FLOATING_TYPES(k.scalar_type(), "linear_infsa_key_pool_backward_cpu", [&] {
    using acc_t = cpu_acc_t<scalar_t>;
    const KeyPoolBackwardArgs<scalar_t> args{
        grad_inputs.data_ptr<acc_t>(), grad_scores.data_ptr<acc_t>(), central.data_ptr<acc_t>(),
        k.data_ptr<scalar_t>(), head_rows(k), x.data_ptr<scalar_t>(), x.stride(0), x.stride(1),
        mask_ptr(mask), sh, part.data_ptr<acc_t>(), grad_k.data_ptr<scalar_t>(),
        head_rows(grad_k), grad_x.data_ptr<scalar_t>(), grad_x.stride(0), grad_x.stride(1)};
    parallel_tasks(key_pool_backward_tasks_for_cpu_isa<scalar_t>(), args, sh.B * sh.chunks);
  });
  return {part.sum(1), grad_k, grad_x};
}

REGISTER_DEVICE_IMPL(linear_infsa_query_sums_impl, CPU, linear_infsa_query_sums_cpu);
REGISTER_DEVICE_IMPL(linear_infsa_query_sums_backward_impl, CPU,
                     linear_infsa_query_sums_backward_cpu);
REGISTER_DEVICE_IMPL(linear_infsa_key_pool_impl, CPU, linear_infsa_key_pool_cpu);
REGISTER_DEVICE_IMPL(linear_infsa_key_pool_backward_impl, CPU, linear_infsa_key_pool_backward_cpu);
