// Runtime CPU-capability dispatch of the CPU kernels, the way ATen dispatches its own.
//
// The wheel is built for the x86-64 baseline (no -march flag: it must run on any x86-64 CPU),
// which leaves the vector loops at SSE2. So each hot per-task function of a kernel is compiled
// three times, for AVX512 (F, BW, VL, DQ and FMA, as ATen's AVX512 kernels), AVX2 + FMA and the
// baseline, through GCC's `target` attribute: the task body is an always-inline template, so its
// `#pragma omp simd` loops are vectorised with the instruction set of each variant. At run time
// the variant of the capability ATen itself runs at is called: at::get_cpu_capability() checks
// the CPU (and the OS's register support) and honours ATEN_CPU_CAPABILITY=default|avx2|avx512,
// which therefore selects the variant for every kernel, ATen's and ours alike.
#pragma once

#include <ATen/Version.h>

#include <string>

namespace mmlinear {

enum class CpuIsa { kDefault, kAvx2, kAvx512 };

#if defined(__x86_64__) && defined(__GNUC__)
#define MMLINEAR_CPU_ISA_VARIANTS 1
#define MMLINEAR_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define MMLINEAR_TARGET_AVX2 __attribute__((target("avx2,fma")))
#else
#define MMLINEAR_CPU_ISA_VARIANTS 0
#define MMLINEAR_TARGET_AVX512
#define MMLINEAR_TARGET_AVX2
#endif

// Forces inlining into each variant, so that the variant's instruction set applies to the body.
#define MMLINEAR_ISA_INLINE inline __attribute__((always_inline))

// The capability the kernels run at, decided once per process.
inline CpuIsa cpu_isa() {
  static const CpuIsa isa = [] {
#if MMLINEAR_CPU_ISA_VARIANTS
    const std::string capability = at::get_cpu_capability();
    if (capability == "AVX512") return CpuIsa::kAvx512;
    if (capability == "AVX2") return CpuIsa::kAvx2;
#endif
    return CpuIsa::kDefault;
  }();
  return isa;
}

inline const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512:
      return "AVX512";
    case CpuIsa::kAvx2:
      return "AVX2";
    default:
      return "DEFAULT";
  }
}

}  // namespace mmlinear

// For the tasks of a kernel, `template <typename scalar_t> MMLINEAR_ISA_INLINE void
// name(const Args<scalar_t>&, int64_t begin, int64_t end)` running tasks [begin, end), defines
// `name##_for_cpu_isa<scalar_t>()`: a pointer to the variant compiled for mmlinear::cpu_isa().
// Take it once per launch and call it from at::parallel_for's lambda, which is itself compiled
// for the baseline.
#define MMLINEAR_DEFINE_CPU_ISA_VARIANTS(name, Args)                                  \
  template <typename scalar_t>                                                        \
  MMLINEAR_TARGET_AVX512 void name##_avx512(const Args<scalar_t>& args, int64_t begin, \
                                            int64_t end) {                            \
    name<scalar_t>(args, begin, end);                                                 \
  }                                                                                   \
  template <typename scalar_t>                                                        \
  MMLINEAR_TARGET_AVX2 void name##_avx2(const Args<scalar_t>& args, int64_t begin,     \
                                        int64_t end) {                                \
    name<scalar_t>(args, begin, end);                                                 \
  }                                                                                   \
  template <typename scalar_t>                                                        \
  void name##_baseline(const Args<scalar_t>& args, int64_t begin, int64_t end) {      \
    name<scalar_t>(args, begin, end);                                                 \
  }                                                                                   \
  template <typename scalar_t>                                                        \
  auto name##_for_cpu_isa() {                                                         \
    switch (mmlinear::cpu_isa()) {                                                    \
      case mmlinear::CpuIsa::kAvx512:                                                 \
        return &name##_avx512<scalar_t>;                                              \
      case mmlinear::CpuIsa::kAvx2:                                                   \
        return &name##_avx2<scalar_t>;                                                \
      default:                                                                        \
        return &name##_baseline<scalar_t>;                                            \
    }                                                                                 \
  }
