#pragma once
// The stand-in device: a device type backed by its own host memory that only
// kernels may touch (Storage::data() refuses outside a KernelScope), running the
// CPU kernels registered under its own name. Tests put every op and a whole
// training step on it and compare with the CPU: an op that reads memory behind
// the kernel table, or a kernel a device lacks, fails there the way it would on
// a GPU, in CI, without one.
namespace loom {

// Registers the stand-in Backend and copies every CPU kernel registered so far
// under DeviceType::standin. Idempotent.
void enable_standin_device();

}  // namespace loom
