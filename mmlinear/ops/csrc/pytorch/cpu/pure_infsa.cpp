// CPU Pure InfSA without the N x S score matrix, flash-attention style: the scores are
// recomputed tile by tile (a block of query rows against a block of keys), each tile product
// a BLAS matrix product whose operands stay in cache, so the extra memory is O(B H N) plus
// one tile per thread whatever the sequence length:
// - forward: each query block sweeps all key blocks, accumulating relu(q k^T) v and the rows'
//   shares of ||relu(q k^T)||_F^2; the output is rescaled once the norm is known.
// - backward: one sweep per (sample, head) and chunk of query blocks gives grad q, the tile's
//   share of grad k and grad v (summed over chunks afterwards) and dL/drho; the norm's
//   gradient enters through the scalar <dO, O> computed beforehand.
// The element-wise tile work is compiled per CPU capability (cpu_isa.hpp).
#include <algorithm>
#include <cmath>
#include <vector>

#include "pytorch_cpp_helper.hpp"
#include "pytorch_device_registry.hpp"
#include "pytorch_ops.hpp"
#include "pure_infsa_norm.hpp"

namespace {

// Tile sides: a query block of kQueryBlock rows meets kKeyBlock keys at a time (a float32
// tile of 512 KiB, within the L2 cache of current x86 cores, with its operands).
constexpr int64_t kQueryBlock = 256;
constexpr int64_t kKeyBlock = 512;

struct PureInfsaShape {
  int64_t B, H, N, S, d;
  bool mask_keys, mask_queries;
};

PureInfsaShape pure_infsa_shape(const at::Tensor& q, const at::Tensor& k,
                                const at::Tensor& mask) {
  const bool masked = mask.defined();
  return {q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), masked,
          masked && q.size(2) == k.size(2)};
}

int64_t blocks_of(int64_t n, int64_t block) { return (n + block - 1) / block; }

// A (rows, cols) row-major matrix over memory the caller owns, for the BLAS tile products.
template <typename scalar_t>
at::Tensor matrix(const scalar_t* data, int64_t rows, int64_t cols) {
  return at::from_blob(const_cast<scalar_t*>(data), {rows, cols},
                       at::TensorOptions().dtype(c10::CppTypeToScalarType<scalar_t>::value));
}

// The rows [i0, i0 + rows) of head bh of a (B H, n, d) buffer, as a matrix.
template <typename scalar_t>
at::Tensor head_block(const scalar_t* data, int64_t bh, int64_t n, int64_t i0, int64_t rows,
                      int64_t d) {
  return matrix(data + (bh * n + i0) * d, rows, d);
}

// Whether each of the rows [i0, i0 + rows) of one sample is a valid (unpadded) token.
void valid_rows(const bool* mask, bool masked, int64_t i0, int64_t rows, bool* valid) {
  for (int64_t r = 0; r < rows; ++r) valid[r] = !(masked && mask[i0 + r]);
}

// scores <- relu(scores / d) on valid rows and keys, 0 elsewhere; the squares are added to
// row_sq per row unless it is null.
template <typename scalar_t>
struct ScoreTile {
  scalar_t* scores;
  int64_t rows, cols;
  const bool *valid_row, *valid_col;
};

template <typename scalar_t>
MMLINEAR_ISA_INLINE void relu_scores(const ScoreTile<scalar_t>& t, scalar_t scale2,
                                     scalar_t* row_sq) {
  for (int64_t r = 0; r < t.rows; ++r) {
    scalar_t* p = t.scores + r * t.cols;
    if (!t.valid_row[r]) {
      std::fill(p, p + t.cols, scalar_t(0));
      continue;
    }
    scalar_t sq = 0;
#pragma omp simd reduction(+ : sq)
    for (int64_t j = 0; j < t.cols; ++j) {
      const scalar_t s = t.valid_col[j] ? std::max(scale2 * p[j], scalar_t(0)) : scalar_t(0);
      p[j] = s;
      sq += s * s;
    }
    if (row_sq) row_sq[r] += sq;
  }
}

template <typename scalar_t>
struct PureInfsaForwardArgs {
  const scalar_t *q, *k, *v;
  const bool* mask;
  PureInfsaShape sh;
  scalar_t* unnormalised;
  scalar_t* row_sq;
};

template <typename scalar_t>
MMLINEAR_ISA_INLINE void pure_infsa_forward_tasks(const PureInfsaForwardArgs<scalar_t>& a,
                                                  int64_t begin, int64_t end) {
  const PureInfsaShape& sh = a.sh;
  const int64_t d = sh.d, q_blocks = blocks_of(sh.N, kQueryBlock);
  const scalar_t scale2 = 1 / static_cast<scalar_t>(d);  // q and k are each scaled by 1/sqrt(d)
  std::vector<scalar_t> tile(kQueryBlock * kKeyBlock);
  bool valid_q[kQueryBlock], valid_k[kKeyBlock];
  for (int64_t task = begin; task < end; ++task) {
    const int64_t bh = task / q_blocks, i0 = (task % q_blocks) * kQueryBlock;
    const int64_t rows = std::min(kQueryBlock, sh.N - i0), b = bh / sh.H;
    const bool* mb = sh.mask_keys ? a.mask + b * sh.S : nullptr;
    valid_rows(mb, sh.mask_queries, i0, rows, valid_q);
    const auto q_rows = head_block(a.q, bh, sh.N, i0, rows, d);
    auto out_rows = head_block(a.unnormalised, bh, sh.N, i0, rows, d);
    out_rows.zero_();
    scalar_t* sq = zeroed(a.row_sq + bh * sh.N + i0, rows);
    for (int64_t j0 = 0; j0 < sh.S; j0 += kKeyBlock) {
      const int64_t cols = std::min(kKeyBlock, sh.S - j0);
      valid_rows(mb, sh.mask_keys, j0, cols, valid_k);
      auto scores = matrix(tile.data(), rows, cols);
      at::mm_out(scores, q_rows, head_block(a.k, bh, sh.S, j0, cols, d).t());
      relu_scores<scalar_t>({tile.data(), rows, cols, valid_q, valid_k}, scale2, sq);
      out_rows.addmm_(scores, head_block(a.v, bh, sh.S, j0, cols, d));
    }
  }
}
MMLINEAR_DEFINE_CPU_ISA_VARIANTS(pure_infsa_forward_tasks, PureInfsaForwardArgs)

template <typename scalar_t>
struct PureInfsaBackwardArgs {
  const scalar_t *grad_out, *q, *k, *v;
  const bool* mask;
  const scalar_t *coef, *norm_coef;  // rho / (F + eps) and -<dO, O> / ((F + eps) F) per (b, h)
  PureInfsaShape sh;
  int64_t chunks;                  // query-block chunks per (sample, head)
  scalar_t *grad_q, *grad_k, *grad_v;
  scalar_t *partial_k, *partial_v;  // (chunks - 1, B H, S, d): the other chunks' shares
  scalar_t* row_grad_c;             // (B H N): the rows' shares of dL/dc, c = rho / (F + eps)
};

// dL/dP = gO v^T on the positive scores P becomes the gradient of the raw product q k^T:
// grad <- (c dL/dP + gf P) / d there, 0 elsewhere; the rows' sum of P dL/dP is dL/dc.
template <typename scalar_t>
MMLINEAR_ISA_INLINE void score_gradients(scalar_t* grad, const scalar_t* scores, int64_t rows,
                                         int64_t cols, scalar_t c, scalar_t gf, scalar_t scale2,
                                         scalar_t* row_grad_c) {
  for (int64_t r = 0; r < rows; ++r) {
    scalar_t* g = grad + r * cols;
    const scalar_t* p = scores + r * cols;
    scalar_t gc = 0;
#pragma omp simd reduction(+ : gc)
    for (int64_t j = 0; j < cols; ++j) {
      gc += p[j] * g[j];
      g[j] = p[j] > 0 ? scale2 * (c * g[j] + gf * p[j]) : scalar_t(0);
    }
    row_grad_c[r] += gc;
  }
}

template <typename scalar_t>
MMLINEAR_ISA_INLINE void pure_infsa_backward_tasks(const PureInfsaBackwardArgs<scalar_t>& a,
                                                   int64_t begin, int64_t end) {
  const PureInfsaShape& sh = a.sh;
  const int64_t d = sh.d, q_blocks = blocks_of(sh.N, kQueryBlock);
  const int64_t per_chunk = blocks_of(q_blocks, a.chunks);
  const scalar_t scale2 = 1 / static_cast<scalar_t>(d);
  std::vector<scalar_t> score_tile(kQueryBlock * kKeyBlock), grad_tile(kQueryBlock * kKeyBlock);
  bool valid_q[kQueryBlock], valid_k[kKeyBlock];
  for (int64_t task = begin; task < end; ++task) {
    const int64_t bh = task / a.chunks, chunk = task % a.chunks, b = bh / sh.H;
    const bool* mb = sh.mask_keys ? a.mask + b * sh.S : nullptr;
    const scalar_t c = a.coef[bh], gf = a.norm_coef[bh];
    // The first chunk accumulates into the gradients themselves, the others into their own
    // partial sums (added afterwards), so that no two threads write the same rows.
    const int64_t kv_offset = (chunk == 0 ? bh : ((chunk - 1) * sh.B * sh.H + bh)) * sh.S * d;
    auto grad_k = matrix((chunk == 0 ? a.grad_k : a.partial_k) + kv_offset, sh.S, d);
    auto grad_v = matrix((chunk == 0 ? a.grad_v : a.partial_v) + kv_offset, sh.S, d);
    grad_k.zero_();
    grad_v.zero_();
    const int64_t block_end = std::min(q_blocks, (chunk + 1) * per_chunk);
    for (int64_t block = chunk * per_chunk; block < block_end; ++block) {
      const int64_t i0 = block * kQueryBlock, rows = std::min(kQueryBlock, sh.N - i0);
      valid_rows(mb, sh.mask_queries, i0, rows, valid_q);
      const auto q_rows = head_block(a.q, bh, sh.N, i0, rows, d);
      const auto go_rows = head_block(a.grad_out, bh, sh.N, i0, rows, d);
      auto grad_q_rows = head_block(a.grad_q, bh, sh.N, i0, rows, d);
      grad_q_rows.zero_();
      scalar_t* gc = zeroed(a.row_grad_c + bh * sh.N + i0, rows);
      for (int64_t j0 = 0; j0 < sh.S; j0 += kKeyBlock) {
        const int64_t cols = std::min(kKeyBlock, sh.S - j0);
        valid_rows(mb, sh.mask_keys, j0, cols, valid_k);
        const auto k_rows = head_block(a.k, bh, sh.S, j0, cols, d);
        const auto v_rows = head_block(a.v, bh, sh.S, j0, cols, d);
        auto scores = matrix(score_tile.data(), rows, cols);
        auto grads = matrix(grad_tile.data(), rows, cols);
        at::mm_out(scores, q_rows, k_rows.t());
        relu_scores<scalar_t>({score_tile.data(), rows, cols, valid_q, valid_k}, scale2,
                              nullptr);
        at::mm_out(grads, go_rows, v_rows.t());
        score_gradients<scalar_t>(grad_tile.data(), score_tile.data(), rows, cols, c, gf,
                                  scale2, gc);
        grad_q_rows.addmm_(grads, k_rows);
        grad_k.narrow(0, j0, cols).addmm_(grads.t(), q_rows);
        grad_v.narrow(0, j0, cols).addmm_(scores.t(), go_rows, 1, c);
      }
    }
  }
}
MMLINEAR_DEFINE_CPU_ISA_VARIANTS(pure_infsa_backward_tasks, PureInfsaBackwardArgs)

}  // namespace

std::vector<at::Tensor> pure_infsa_forward_cpu(const at::Tensor& q, const at::Tensor& k,
                                               const at::Tensor& v, const at::Tensor& rho,
                                               const at::Tensor& key_padding_mask, double eps) {
  CHECK_CONTIGUOUS(q);
  CHECK_CONTIGUOUS(k);
  CHECK_CONTIGUOUS(v);
  const auto sh = pure_infsa_shape(q, k, key_padding_mask);
  auto out = at::empty_like(q);
  auto row_sq = at::empty({sh.B, sh.H, sh.N}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "pure_infsa_forward_cpu", [&] {
    const PureInfsaForwardArgs<scalar_t> args{
        q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
        sh.mask_keys ? key_padding_mask.data_ptr<bool>() : nullptr, sh, out.data_ptr<scalar_t>(),
        row_sq.data_ptr<scalar_t>()};
    parallel_tasks(pure_infsa_forward_tasks_for_cpu_isa<scalar_t>(), args,
                   sh.B * sh.H * blocks_of(sh.N, kQueryBlock));
  });
  const auto norm = pure_infsa_norm(row_sq, rho, eps);
  out.mul_(norm.coef.to(q.scalar_type()).view({sh.B, sh.H, 1, 1}));
  return {out, norm.fro_norm};
}

std::vector<at::Tensor> pure_infsa_backward_cpu(const at::Tensor& grad_out, const at::Tensor& q,
                                                const at::Tensor& k, const at::Tensor& v,
                                                const at::Tensor& rho,
                                                const at::Tensor& key_padding_mask,
                                                const at::Tensor& fro_norm,
                                                const at::Tensor& out_dot, double eps) {
  CHECK_CONTIGUOUS(grad_out);
  const auto sh = pure_infsa_shape(q, k, key_padding_mask);
  const auto factors =
      pure_infsa_backward_coefficients(rho, fro_norm, out_dot, eps, q.scalar_type());
  // Query blocks of one (sample, head) are split into chunks only when there are fewer
  // (sample, head) pairs than threads; each extra chunk costs an (S, d) partial sum of grad k
  // and grad v, so the memory stays linear in S.
  const int64_t q_blocks = blocks_of(sh.N, kQueryBlock);
  const int64_t pairs = std::max<int64_t>(1, sh.B * sh.H);
  const int64_t chunks =
      std::max<int64_t>(1, std::min(q_blocks, blocks_of(at::get_num_threads(), pairs)));
  auto grad_q = at::empty_like(q), grad_k = at::empty_like(k), grad_v = at::empty_like(v);
  auto partial_k = at::empty({chunks - 1, sh.B, sh.H, sh.S, sh.d}, q.options());
  auto partial_v = at::empty_like(partial_k);
  auto row_grad_c = at::empty({sh.B, sh.H, sh.N}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "pure_infsa_backward_cpu", [&] {
    const PureInfsaBackwardArgs<scalar_t> args{
        grad_out.data_ptr<scalar_t>(), q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(),
        v.data_ptr<scalar_t>(), sh.mask_keys ? key_padding_mask.data_ptr<bool>() : nullptr,
        factors.coef.data_ptr<scalar_t>(), factors.norm_coef.data_ptr<scalar_t>(), sh, chunks,
        grad_q.data_ptr<scalar_t>(), grad_k.data_ptr<scalar_t>(), grad_v.data_ptr<scalar_t>(),
        partial_k.data_ptr<scalar_t>(), partial_v.data_ptr<scalar_t>(),
        row_grad_c.data_ptr<scalar_t>()};
    parallel_tasks(pure_infsa_backward_tasks_for_cpu_isa<scalar_t>(), args, sh.B * sh.H * chunks);
  });
  if (chunks > 1) {
    grad_k.add_(partial_k.sum(0));
    grad_v.add_(partial_v.sum(0));
  }
  auto grad_rho = row_grad_c.sum(-1, false, rho.scalar_type()) / factors.denom;
  return {grad_q, grad_k, grad_v, grad_rho};
}

REGISTER_DEVICE_IMPL(pure_infsa_forward_impl, CPU, pure_infsa_forward_cpu);
REGISTER_DEVICE_IMPL(pure_infsa_backward_impl, CPU, pure_infsa_backward_cpu);
