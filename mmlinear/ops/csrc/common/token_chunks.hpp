// How the Linear-InfSA sum kernels split a sequence of tokens into chunks.
//
// Each chunk's partial sums land in their own slot of a (B, chunks, ...) buffer that is then
// summed in a fixed order, so the result depends on the sequence length only, never on the
// number of threads (training resumes bit for bit) and no atomics are needed.
#pragma once

#include <algorithm>
#include <cstdint>

namespace mmlinear {

// At most this many chunks per sample: enough tasks for every core of a CPU (or, times the
// heads, every SM of a GPU) at batch 1, while the partial sums stay a few megabytes.
constexpr int64_t kMaxTokenChunks = 64;

// Tokens per chunk for a sequence of n tokens: at least `min_tokens` (so short sequences are
// not split into slivers), rounded up to a multiple of `multiple` (a GPU tile).
inline int64_t chunk_tokens(int64_t n, int64_t min_tokens, int64_t multiple = 1) {
  const int64_t even = (n + kMaxTokenChunks - 1) / kMaxTokenChunks;
  const int64_t tokens = std::max(min_tokens, even);
  return (tokens + multiple - 1) / multiple * multiple;
}

inline int64_t num_chunks(int64_t n, int64_t tokens_per_chunk) {
  return std::max<int64_t>(1, (n + tokens_per_chunk - 1) / tokens_per_chunk);
}

}  // namespace mmlinear
