// `loom`: the command-line front end. Subcommands live one per file.
#include <fmt/core.h>

#include "commands.h"
#include "loom/error.h"

int main(int argc, char** argv) {
  CLI::App app{"loom: reverse-mode autodiff, from tensors to the Transformer"};
  app.require_subcommand(1);
  int exit_code = 0;
  loom::tools::add_gradcheck_command(app, exit_code);
  loom::tools::add_bench_command(app, exit_code);
  loom::tools::add_train_command(app);
  loom::tools::add_translate_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const loom::Error& e) {
    fmt::print(stderr, "loom: error: {}\n", e.what());
    return 1;
  }
  return exit_code;
}
