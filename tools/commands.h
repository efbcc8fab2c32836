#pragma once
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

#include "loom/device.h"
#include "loom/kernel_profile.h"
#include "loom/models/corpus_store.h"
#include "loom/models/data.h"

namespace loom::tools {

// Each subcommand adds itself to the app. An error is an exception (main prints it,
// exit 1); the four that can end otherwise set `exit_code`: gradcheck and explain
// (a failed check), bench (a refused comparison), train (128 + a signal).
void add_gradcheck_command(CLI::App& app, int& exit_code);
void add_explain_command(CLI::App& app, int& exit_code);
void add_graph_command(CLI::App& app);
void add_bench_command(CLI::App& app);
// Sets OpenMP's and OpenBLAS's thread counts (tools/threads.cpp).
void use_threads(int threads);
void add_threads_option(CLI::App& cmd, int& threads);  // --threads, 1 to 1024
// --precision float32|bf16, and for training mixed (bf16 activations too); use_precision
// sets the matmul precision (loom/matmul_precision.h) and says when the CPU cannot:
// returns whether the precision asked for takes effect (on CUDA: always); the caller
// turns on a model's mixed precision (Transformer::set_mixed_precision).
void add_precision_option(CLI::App& cmd, std::string& precision, bool training);
extern const char* const kPrecisionHelp;  // its help, for `loom train`'s table of options
bool use_precision(const std::string& precision, const std::string& device);
// Prints a KernelProfile collected over `runs` runs of `run_seconds` each (a `unit`:
// "step", "run") as `--profile` shows it; returns the same as JSON (tools/kernel_profile_table.cpp).
nlohmann::json print_kernel_profile(const KernelProfile& profile, int runs, double run_seconds, const char* unit,
                                    const Device& device, std::FILE* out);
// --device cpu|cuda|cuda:N, checked with loom::parse_device when the command runs
// (one-line error without a GPU) (tools/device_option.cpp).
void add_device_option(CLI::App& cmd, std::string& device);
// `bench step`, a subcommand of `bench` (tools/bench_step.cpp).
void add_bench_step_command(CLI::App& bench);
// `bench attention` (tools/bench_attention.cpp).
void add_bench_attention_command(CLI::App& bench);
void add_data_command(CLI::App& app);  // `data prepare` (tools/data_command.cpp)
// --progress auto|bar|lines|off (tools/progress.h's ProgressMode), the name kept in `progress`.
void add_progress_option(CLI::App& cmd, std::string& progress);
// Shows a store's preparation: its messages on stdout, a bar with pairs/s as `progress` says.
void show_preparation(models::PrepareOptions& how, const std::string& progress);
void add_train_command(CLI::App& app, int& exit_code);  // exit_code: 128 + signal when interrupted
void add_translate_commands(CLI::App& app);             // translate, bleu
void add_average_command(CLI::App& app);
void add_plot_command(CLI::App& app);       // tools/plot_command.cpp
void add_attention_command(CLI::App& app);  // tools/attention_command.cpp
void add_study_command(CLI::App& app);      // tools/study_command.cpp

}  // namespace loom::tools
