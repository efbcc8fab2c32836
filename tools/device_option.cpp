// --device for the commands that run a model: cpu (the default), cuda or cuda:N.
#include "commands.h"

namespace loom::tools {

void add_device_option(CLI::App& cmd, std::string& device) {
  cmd.add_option("--device", device, "cpu, cuda or cuda:N (a GPU needs a build with CUDA)")->capture_default_str();
}

models::Batch to_device(const models::Batch& b, Device device) {
  if (device.is_cpu()) return b;
  return {b.src.to(device), b.tgt_in.to(device), b.tgt_out.to(device), b.src_tokens, b.tgt_tokens};
}

}  // namespace loom::tools
