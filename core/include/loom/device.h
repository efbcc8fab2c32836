#pragma once
#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace loom {

// standin: separate host memory that only kernels may touch, running the CPU
// kernels under its own name (loom/standin.h): proves in CI, where there is no GPU,
// that every op reaches memory through the kernel table and the Backend.
enum class DeviceType : uint8_t { cpu, cuda, standin };
inline constexpr int kDeviceTypes = 3;

inline const char* device_type_name(DeviceType t) {
  switch (t) {
    case DeviceType::cpu: return "cpu";
    case DeviceType::cuda: return "cuda";
    case DeviceType::standin: return "standin";
  }
  return "?";
}

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static constexpr Device cpu() { return {DeviceType::cpu, 0}; }
  static constexpr Device cuda(int index = 0) { return {DeviceType::cuda, index}; }
  static constexpr Device standin(int index = 0) { return {DeviceType::standin, index}; }
  constexpr bool is_cpu() const { return type == DeviceType::cpu; }
  constexpr bool is_cuda() const { return type == DeviceType::cuda; }
  constexpr bool operator==(const Device&) const = default;
  std::string str() const { return is_cpu() ? "cpu" : fmt::format("{}:{}", device_type_name(type), index); }
};

inline constexpr Device kCPU = Device::cpu();

// "cpu", "cuda" (= cuda:0), "cuda:N" or "standin" from a command line, checked
// against this build and machine: an Error naming the flag's value when the
// build has no CUDA backend, no GPU is present or index N does not exist.
Device parse_device(const std::string& name);

}  // namespace loom

template <>
struct fmt::formatter<loom::Device> : fmt::formatter<std::string> {
  auto format(const loom::Device& d, format_context& ctx) const {
    return fmt::formatter<std::string>::format(d.str(), ctx);
  }
};
