// `loom`: the command-line front end. Subcommands live one per file.
//
// What the command guarantees: whatever the input, it ends with exit code 0
// (done), 1 (an error while running) or 2 (a bad command line), and an error is
// one line on stderr, "loom: error: ...", naming the file, flag or size at fault.
// No exception escapes main, so nothing aborts (rc 134) and stdout is flushed.
#include <fmt/core.h>

#include <cstdio>
#include <filesystem>
#include <new>
#include <regex>

#include "commands.h"
#include "stop_signals.h"
#include "loom/error.h"

namespace {

int error(const std::string& message, int code) {
  std::fflush(stdout);  // what was printed before the error comes first
  fmt::print(stderr, "loom: error: {}\n", message);
  return code;
}

// CLI11 would say "The following arguments were not expected: trian" or "A
// subcommand is required"; empty when argv names a command (or asks for --help).
std::string missing_or_unknown_command(const CLI::App& app, int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "";
  std::string names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (!name.empty() && sub->check_name(name)) return "";
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  if (name.empty()) return fmt::format("no command given (the commands are {}; see `loom --help`)", names);
  if (name[0] == '-') return "";
  return fmt::format("unknown command '{}' (the commands are {}; see `loom --help`)", name, names);
}

// CLI11's "--seed: At Most 1 required but received 2" in words a person would write.
std::string plain_parse_error(const std::string& message) {
  static const std::regex repeated(R"((\S+): At Most 1 required but received (\d+))");
  std::smatch m;
  if (std::regex_match(message, m, repeated))
    return fmt::format("{}: given {} times; give it once", m[1].str(), m[2].str());
  return message;
}

}  // namespace

int main(int argc, char** argv) {
  loom::tools::route_stop_signals();  // first: every thread started later inherits the block
  CLI::App app{"loom: reverse-mode autodiff, from tensors to the Transformer"};
  app.require_subcommand(1);
  int exit_code = 0;
  try {
    loom::tools::add_gradcheck_command(app, exit_code);
    loom::tools::add_explain_command(app, exit_code);
    loom::tools::add_graph_command(app);
    loom::tools::add_bench_command(app);
    loom::tools::add_data_command(app);
    loom::tools::add_train_command(app, exit_code);
    loom::tools::add_translate_commands(app);
    loom::tools::add_average_command(app);
    loom::tools::add_plot_command(app);
    loom::tools::add_attention_command(app);
    loom::tools::add_study_command(app);
    if (std::string message = missing_or_unknown_command(app, argc, argv); !message.empty()) return error(message, 2);
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return error(plain_parse_error(e.what()), 2);
  } catch (const loom::Error& e) {
    return error(e.what(), 1);
  } catch (const std::filesystem::filesystem_error& e) {
    // libstdc++: "filesystem error: cannot create directories: Not a directory [runs/x]"
    return error(fmt::format("{}: '{}'", e.code().message(), e.path1().string()), 1);
  } catch (const std::bad_alloc&) {
    return error(
        "out of memory: the machine could not give what this run asked for "
        "(a smaller --beam, --batch or --max-tokens asks for less)",
        1);
  } catch (const std::exception& e) {
    return error(e.what(), 1);
  } catch (...) {  // not even a std::exception: still one line, never an abort
    return error("an unknown exception stopped the command", 1);
  }
  return exit_code;
}
