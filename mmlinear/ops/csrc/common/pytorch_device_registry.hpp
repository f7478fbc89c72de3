// Device registry in the mmcv pattern: every op has one device-independent entry point
// (`<op>_impl`) and one implementation per device, registered at library load. Dispatch
// picks the implementation for the device of the first tensor argument and checks that
// every other defined tensor lives on that same device, so a CPU-only build loads fine and
// a CUDA tensor then gets a clear error instead of a silent host fallback.
#pragma once

#include <torch/extension.h>

#include <array>
#include <optional>
#include <string>
#include <utility>

namespace mmlinear {

// What this build holds, for the error of a device without an implementation (kept out of
// the TORCH_CHECK call: a preprocessor directive inside macro arguments is undefined).
#ifdef MMLINEAR_WITH_CUDA
inline constexpr const char* kBuiltKernels = "CPU and CUDA kernels";
#else
inline constexpr const char* kBuiltKernels = "CPU kernels only";
#endif

template <typename FnType, FnType Key>
class DeviceRegistry {
 public:
  static DeviceRegistry& instance() {
    static DeviceRegistry registry;
    return registry;
  }

  void add(c10::DeviceType device, FnType fn) { table_[index(device)] = fn; }

  FnType find(c10::DeviceType device) const { return table_[index(device)]; }

 private:
  static size_t index(c10::DeviceType device) { return static_cast<size_t>(device); }

  std::array<FnType, static_cast<size_t>(c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES)>
      table_{};
};

// Non-tensor arguments (scalars, flags) carry no device.
template <typename T>
std::optional<c10::Device> argument_device(const T&) {
  return std::nullopt;
}

// An undefined tensor stands for an absent optional input (e.g. no mask).
inline std::optional<c10::Device> argument_device(const at::Tensor& t) {
  if (!t.defined()) return std::nullopt;
  return t.device();
}

template <typename FnType, FnType Key, typename... Args>
auto dispatch_device_impl(const char* name, Args&&... args) {
  std::optional<c10::Device> first;
  std::string mismatch;
  auto visit = [&](const std::optional<c10::Device>& device) {
    if (!device) return;
    if (!first) {
      first = device;
    } else if (*device != *first && mismatch.empty()) {
      mismatch = device->str();
    }
  };
  (visit(argument_device(args)), ...);
  TORCH_CHECK(first.has_value(), name, ": no tensor argument to dispatch on.");
  TORCH_CHECK(mismatch.empty(), name, ": inconsistent devices, the first tensor is on ",
              first->str(), " but another is on ", mismatch, ".");
  FnType fn = DeviceRegistry<FnType, Key>::instance().find(first->type());
  TORCH_CHECK(fn != nullptr, name, ": implementation for device ",
              c10::DeviceTypeName(first->type()), " not found (this build of mmlinear._ext has ",
              kBuiltKernels, ").");
  return fn(std::forward<Args>(args)...);
}

}  // namespace mmlinear

#define MMLINEAR_CONCAT_INNER(a, b) a##b
#define MMLINEAR_CONCAT(a, b) MMLINEAR_CONCAT_INNER(a, b)

// Registers `fn` as the `device` (CPU, CUDA, ...) implementation of the entry point `key`.
#define REGISTER_DEVICE_IMPL(key, device, fn)                                              \
  static const bool MMLINEAR_CONCAT(key##_##device##_registered_, __LINE__) = [] {        \
    ::mmlinear::DeviceRegistry<decltype(&key), key>::instance().add(c10::DeviceType::device, \
                                                                    fn);                  \
    return true;                                                                           \
  }()

// Calls the implementation of `key` registered for the device of the first tensor argument.
#define DISPATCH_DEVICE_IMPL(key, ...) \
  ::mmlinear::dispatch_device_impl<decltype(&key), key>(#key, __VA_ARGS__)
