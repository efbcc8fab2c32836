// --device for the commands that run a model: cpu (the default), cuda or cuda:N.
#include "commands.h"

namespace loom::tools {

void add_device_option(CLI::App& cmd, std::string& device) {
  cmd.add_option("--device", device, "cpu, cuda or cuda:N (a GPU needs a build with CUDA)")->capture_default_str();
}

}  // namespace loom::tools
