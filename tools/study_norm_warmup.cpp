// `loom study norm-warmup --data DIR`: post-norm (the paper's
// LayerNorm(x + sublayer(x))) against pre-norm (x + sublayer(LayerNorm(x))),
// each with the Noam warm-up (100 steps here) and without (warm-up 1: the
// full rate d_model^-0.5 from the first step, then the same decay). Four real
// tiny runs, same seed and data; every step's gradient norm per layer (the
// optim::grad_norm of the layer's parameters, before the step) over the first
// --steps (default 60) steps, and the training loss. Xiong et al. (2020) find
// post-norm's gradients largest near the output at the start, which is why it
// needs the warm-up; the pictures show what these tiny runs do.
#include <cmath>
#include <map>

#include "gnuplot.h"
#include "loom/optim.h"
#include "study_runs.h"
#include "training_monitor.h"

namespace loom::tools {

void study_norm_warmup(const StudyOptions& o) {
  const int64_t steps = o.steps > 0 ? o.steps : 60;
  StudyCorpus corpus = load_study_corpus(o, "norm-warmup", o.vocab, 10);
  fmt::print("norm-warmup: {} training pairs, {} pieces, {} steps per run\n", corpus.train.size(), corpus.vocab->size(),
             steps);
  struct Recipe {
    bool pre_norm;
    int64_t warmup;
  };
  const Recipe recipes[] = {{false, 100}, {false, 1}, {true, 100}, {true, 1}};
  // The layers of the tiny preset, in model order; pre-norm adds the final norms.
  const std::vector<std::string> layers = {"src_embed",        "encoder.layers.0", "encoder.layers.1", "encoder.norm",
                                           "decoder.layers.0", "decoder.layers.1", "decoder.norm"};
  Table table{{"pre_norm", "warmup", "step", "loss", "grad_norm"}, {}};
  for (const std::string& l : layers) table.columns.push_back(l);
  std::vector<std::string> blocks;
  for (const Recipe& r : recipes) {
    std::string rows;
    train_tiny(corpus, {.pre_norm = r.pre_norm, .warmup = r.warmup, .steps = steps}, o.seed,
               [&](int64_t step, double loss, models::Transformer& model) {
                 std::map<std::string, std::vector<Tensor>> groups;
                 std::vector<Tensor> all;
                 for (const auto& [name, p] : model.named_parameters()) {
                   groups[layer_of(name)].push_back(p);
                   all.push_back(p);
                 }
                 std::vector<double> row = {r.pre_norm ? 1.0 : 0.0, static_cast<double>(r.warmup),
                                            static_cast<double>(step), loss, optim::grad_norm(all)};
                 for (const std::string& l : layers) row.push_back(groups.count(l) ? optim::grad_norm(groups[l]) : NAN);
                 for (size_t c = 2; c < row.size(); ++c) rows += fmt::format("{}{:.9g}", c > 2 ? " " : "", row[c]);
                 rows += "\n";
                 table.rows.push_back(std::move(row));
               });
    blocks.push_back(rows);
    fmt::print("  {}, warm-up {}: {} steps, last loss {:.3f}\n", r.pre_norm ? "pre-norm" : "post-norm", r.warmup, steps,
               table.rows.back()[3]);
    std::fflush(stdout);
  }
  write_table(o, "norm-warmup", table);
  for (const char* ext : {".png", ".svg"}) {
    GnuplotFigure figure(o.out + "/norm-warmup" + ext, 1400, 1000);
    for (size_t i = 0; i < blocks.size(); ++i) figure.add_data(fmt::format("r{}", i), blocks[i]);
    std::ostream& s = figure.script();
    s << "set multiplot layout 2,2 title 'Gradient norm per layer over the first " << steps
      << " steps (tiny preset, real runs)'\nset grid\nset logscale y\nset xlabel 'step'\nset ylabel 'gradient norm'\n"
      << "set key outside right\nset yrange [1e-4:*]\n";
    for (size_t i = 0; i < blocks.size(); ++i) {
      s << "set title "
        << gnuplot_quote(fmt::format(
               "{}, {}", recipes[i].pre_norm ? "pre-norm" : "post-norm",
               recipes[i].warmup > 1 ? fmt::format("warm-up {}", recipes[i].warmup) : std::string("no warm-up")))
        << "\nplot ";
      // Columns: 1 step, 2 loss, 3 global norm, 4.. the layers.
      for (size_t l = 0; l < layers.size(); ++l)
        s << fmt::format("$r{} using 1:{} with lines title {}, ", i, 4 + l, gnuplot_quote(layers[l]));
      s << fmt::format("$r{} using 1:3 with lines lw 2 lc 'black' title 'all'\n", i);
    }
    s << "unset multiplot\n";
    figure.render();
  }
  fmt::print("plot: {}/norm-warmup.png, .svg\n", o.out);
}

}  // namespace loom::tools
