// `loom plot RUN_DIR... --out FILE.png|svg`: the curves of one or more runs'
// metrics.jsonl (tools/training_monitor.h), runs overlaid for comparison: the
// training loss, the validation loss, the learning rate and the global gradient
// norm against the step, one panel each, drawn by gnuplot (tools/gnuplot.h).
#include <filesystem>
#include <map>

#include "commands.h"
#include "gnuplot.h"
#include "loom/error.h"
#include "options.h"
#include "training_monitor.h"

namespace loom::tools {

namespace {

struct PlotOptions {
  std::vector<std::string> runs;
  std::string out;
  int width = 1200, height = 800;
  bool layers = false;  // two more panels: each layer's gradient norm and update/weight ratio
};

// A JSON number as gnuplot data; a missing or null one is NaN (a gap).
std::string value(const nlohmann::json& record, const char* key) {
  if (!record.contains(key) || !record[key].is_number()) return "NaN";
  return fmt::format("{:.9g}", record[key].get<double>());
}

// The run's name in the legend: its folder's name, or the whole path when two runs share it.
std::string label(const std::vector<std::string>& runs, size_t i) {
  auto name = [](const std::string& run) {
    return std::filesystem::path(run).lexically_normal().filename().string().empty()
               ? std::filesystem::path(run).lexically_normal().parent_path().filename().string()
               : std::filesystem::path(run).lexically_normal().filename().string();
  };
  for (size_t j = 0; j < runs.size(); ++j)
    if (j != i && name(runs[j]) == name(runs[i])) return runs[i];
  return name(runs[i]);
}

void run_plot(const PlotOptions& o) {
  picture_format(o.out, "--out");
  GnuplotFigure figure(o.out, o.width, o.layers ? o.height * 3 / 2 : o.height);
  struct Series {
    std::string train, val;
    std::map<std::string, std::string> layers;  // layer -> "step grad_norm update_ratio" rows
  };
  std::vector<Series> series(o.runs.size());
  size_t with_data = 0;
  double last_step = 1;  // every panel spans the same steps, so the panels line up
  for (size_t i = 0; i < o.runs.size(); ++i) {
    const std::string path = o.runs[i] + "/metrics.jsonl";
    LOOM_CHECK(std::filesystem::exists(path), "plot: '{}' has no metrics.jsonl (written by `loom train`)", o.runs[i]);
    int64_t skipped = 0;
    for (const nlohmann::json& r : read_metrics(path, &skipped)) {
      if (r.contains("step") && r["step"].is_number()) last_step = std::max(last_step, r["step"].get<double>());
      if (r["type"] == "train")
        series[i].train +=
            fmt::format("{} {} {} {}\n", value(r, "step"), value(r, "loss"), value(r, "lr"), value(r, "grad_norm"));
      if (o.layers && r["type"] == "train" && r.contains("layers") && r["layers"].is_object())
        for (const auto& [layer, numbers] : r["layers"].items())
          series[i].layers[layer] +=
              fmt::format("{} {} {}\n", value(r, "step"), value(numbers, "grad_norm"), value(numbers, "update_ratio"));
      if (r["type"] == "val")
        series[i].val += fmt::format("{} {} {}\n", value(r, "step"), value(r, "val_loss"), value(r, "bleu"));
    }
    if (skipped)
      fmt::print(stderr,
                 "loom: warning: plot: skipped {} line(s) of '{}' that are not whole JSON records "
                 "(a run stopped mid-write)\n",
                 skipped, path);
    if (series[i].train.empty() && series[i].val.empty())
      fmt::print(stderr, "loom: warning: plot: '{}' has no training or validation records yet\n", path);
    else
      ++with_data;
    figure.add_data(fmt::format("train{}", i), series[i].train);
    figure.add_data(fmt::format("val{}", i), series[i].val);
    size_t k = 0;
    for (const auto& [layer, rows] : series[i].layers) figure.add_data(fmt::format("layer{}_{}", i, k++), rows);
  }
  LOOM_CHECK(with_data > 0, "plot: none of the {} run(s) has a training or validation record", o.runs.size());

  std::ostream& s = figure.script();
  s << "set multiplot layout " << (o.layers ? 3 : 2) << ",2 title "
    << gnuplot_quote("loom plot: " + std::to_string(o.runs.size()) + " run(s)")
    << "\nset grid\nset key top right\nset xlabel 'step'\n"
    << fmt::format("set xrange [0:{}]\n", last_step * 1.02);
  // One panel: for each run with data in `block`, column `column` against the step.
  auto panel = [&](const std::string& title, const char* block, int column, const std::string& style, bool log_y) {
    s << "set title " << gnuplot_quote(title) << "\n" << (log_y ? "set logscale y\n" : "unset logscale y\n");
    std::string plots;
    for (size_t i = 0; i < o.runs.size(); ++i) {
      const std::string& rows = std::string(block) == "train" ? series[i].train : series[i].val;
      if (rows.empty()) continue;
      plots += fmt::format("{}${}{} using 1:{} with {} linecolor {} title {}", plots.empty() ? "" : ", ", block, i,
                           column, style, i + 1, gnuplot_quote(label(o.runs, i)));
    }
    if (plots.empty())  // keeps the panel (and the grid of four) with a note instead of an error
      s << "set label 1 'no records' at graph 0.5,0.5 center\nplot [0:1][0:1] -1 notitle\nunset label 1\n";
    else
      s << "plot " << plots << "\n";
  };
  panel("training loss (per target token)", "train", 2, "lines", false);
  panel("validation loss", "val", 2, "linespoints pointtype 7", false);
  panel("learning rate", "train", 3, "lines", false);
  panel("gradient norm (global, before the step)", "train", 4, "lines", true);
  // Per layer: one line per (run, layer); the run's name is left out when there is one run.
  auto layer_panel = [&](const std::string& title, int column) {
    s << "set title " << gnuplot_quote(title) << "\nset logscale y\nset key outside right font ',7'\n";
    std::string plots;
    for (size_t i = 0; i < o.runs.size(); ++i) {
      size_t k = 0;
      for (const auto& [layer, rows] : series[i].layers)
        plots += fmt::format("{}$layer{}_{} using 1:{} with lines title {}", plots.empty() ? "" : ", ", i, k++, column,
                             gnuplot_quote(o.runs.size() > 1 ? label(o.runs, i) + ": " + layer : layer));
    }
    if (plots.empty())
      s << "set label 1 'no per-layer records' at graph 0.5,0.5 center\nplot [0:1][1:2] 0 notitle\nunset label 1\n";
    else
      s << "plot " << plots << "\n";
  };
  if (o.layers) {
    layer_panel("gradient norm per layer", 2);
    layer_panel("update / weight ratio per layer", 3);
  }
  s << "unset multiplot\n";
  figure.render();
  fmt::print("plot: {} run(s) -> {}\n", o.runs.size(), o.out);
}

}  // namespace

void add_plot_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("plot",
                                 "draw a run's metrics.jsonl (loss, validation loss, lr, gradient norm); "
                                 "several runs overlaid");
  auto o = std::make_shared<PlotOptions>();
  cmd->add_option("runs", o->runs, "run folders (each with metrics.jsonl)")->required();
  cmd->add_option("--out", o->out, "picture to write: .png or .svg")->required();
  cmd->add_flag("--layers", o->layers, "also each layer's gradient norm and update/weight ratio");
  cmd->add_option("--width", o->width, "pixels")->capture_default_str()->check(in_range(200, 10000));
  cmd->add_option("--height", o->height, "pixels")->capture_default_str()->check(in_range(200, 10000));
  cmd->callback([o] { run_plot(*o); });
}

}  // namespace loom::tools
