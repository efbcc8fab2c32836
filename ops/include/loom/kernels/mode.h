#pragma once
// Fast kernels or the plain reference kernels kept beside them. The reference
// kernels are straightforward loops a student can step through; the test matrix
// diffs the two on every sample. Set LOOM_KERNELS=reference to run everything on
// the reference kernels.
namespace loom {

enum class KernelMode { fast, reference };

KernelMode kernel_mode();
void set_kernel_mode(KernelMode mode);

class KernelModeGuard {
 public:
  explicit KernelModeGuard(KernelMode mode) : previous_(kernel_mode()) { set_kernel_mode(mode); }
  ~KernelModeGuard() { set_kernel_mode(previous_); }
  KernelModeGuard(const KernelModeGuard&) = delete;
  KernelModeGuard& operator=(const KernelModeGuard&) = delete;

 private:
  KernelMode previous_;
};

}  // namespace loom
