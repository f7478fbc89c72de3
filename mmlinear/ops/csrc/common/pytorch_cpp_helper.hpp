// Small helpers shared by the C++ entry points and the CPU kernels.
#pragma once

#include <ATen/Parallel.h>
#include <torch/extension.h>

#include <algorithm>

#include "cpu_isa.hpp"

#define CHECK_CONTIGUOUS(x) \
  TORCH_CHECK((x).is_contiguous(), #x " must be contiguous (the Python wrapper makes it so).")

// The accumulation type of the CPU kernels: double for double inputs, float otherwise.
template <typename scalar_t>
using cpu_acc_t = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;

// A dot product over the head dimension; a plain loop the compiler vectorises for the
// instruction set of the kernel variant it is inlined into (cpu_isa.hpp).
template <typename acc_t, typename A, typename B>
MMLINEAR_ISA_INLINE acc_t dot(const A* __restrict__ a, const B* __restrict__ b, int64_t n) {
  acc_t sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += static_cast<acc_t>(a[i]) * static_cast<acc_t>(b[i]);
  return sum;
}

// y += alpha * x over the head dimension.
template <typename acc_t, typename scalar_t>
MMLINEAR_ISA_INLINE void axpy(acc_t alpha, const scalar_t* __restrict__ x, acc_t* __restrict__ y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * static_cast<acc_t>(x[i]);
}

// The `size` values from `data` set to zero; returns `data` (a task's own accumulators).
template <typename T>
MMLINEAR_ISA_INLINE T* zeroed(T* data, int64_t size) {
  std::fill(data, data + size, T(0));
  return data;
}

// Runs the tasks [0, num_tasks) of a kernel across ATen's threads, one task per grain, through
// `tasks`: the variant of its task function for this CPU (`<name>_for_cpu_isa<scalar_t>()`,
// cpu_isa.hpp), taken once per launch.
template <typename Args>
void parallel_tasks(void (*tasks)(const Args&, int64_t, int64_t), const Args& args,
                    int64_t num_tasks) {
  at::parallel_for(0, num_tasks, 1, [&](int64_t begin, int64_t end) { tasks(args, begin, end); });
}
