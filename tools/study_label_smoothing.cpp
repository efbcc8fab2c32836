// `loom study label-smoothing --data DIR`: what label smoothing (section 5.4,
// eps 0.1) does. First the target distribution itself, read back from the
// gradient of loom's label_smoothed_cross_entropy at uniform logits
// (d loss / d logits = softmax - target): the true class keeps 1 - eps + eps/V,
// every other class gets eps/V. Then two real tiny runs, eps 0 and eps 0.1,
// same seed and steps: validation perplexity (exp of the plain cross-entropy)
// and BLEU of greedy translations, at four points of the run. The paper: smoothing
// "hurts perplexity, as the model learns to be more unsure, but improves
// accuracy and BLEU score". Tables: label-smoothing.csv (the runs) and
// label-smoothing-targets.csv (the distributions).
#include <cmath>

#include "gnuplot.h"
#include "loom/ops.h"
#include "study_runs.h"

namespace loom::tools {

void study_label_smoothing(const StudyOptions& o) {
  constexpr int64_t kClasses = 10, kTarget = 3;
  Table targets{{"eps", "q_target", "q_other", "q_sum"}, {}};
  std::string bars;
  for (double eps : {0.0, 0.1, 0.2, 0.4}) {
    Tensor logits = zeros({1, kClasses}, {DType::f64}).requires_grad_();
    label_smoothed_cross_entropy(logits, from_vector<int64_t>({kTarget}, {1}, {DType::i64}), eps).backward();
    const std::vector<double> g = logits.grad().to_vector<double>();
    std::vector<double> q(kClasses);
    double total = 0;
    for (int64_t c = 0; c < kClasses; ++c) total += q[c] = 1.0 / kClasses - g[c];  // softmax(0) = 1/V
    targets.rows.push_back({eps, q[kTarget], q[(kTarget + 1) % kClasses], total});
    for (int64_t c = 0; c < kClasses; ++c) bars += fmt::format("{} {:.9g}\n", c, q[c]);
    bars += "\n\n";
  }
  write_table(o, "label-smoothing-targets", targets);

  const int64_t steps = o.steps > 0 ? o.steps : 400;
  StudyCorpus corpus = load_study_corpus(o, "label-smoothing", o.vocab, 200);
  fmt::print("label-smoothing: {} training pairs, {} validation pairs, {} pieces, {} steps per run\n",
             corpus.train.size(), corpus.val.size(), corpus.vocab->size(), steps);
  Table runs{{"eps", "step", "val_ppl", "val_bleu"}, {}};
  std::string curves;
  for (double eps : {0.0, 0.1}) {
    // Measured at each quarter of the run.
    train_tiny(corpus, {.smoothing = eps, .steps = steps}, o.seed, {}, [&](int64_t step, models::Transformer& model) {
      if (step % std::max<int64_t>(1, steps / 4) != 0 && step != steps) return;
      const double ppl = std::exp(validation_cross_entropy(model, corpus)), bleu = validation_bleu(model, corpus);
      runs.rows.push_back({eps, static_cast<double>(step), ppl, bleu});
      curves += fmt::format("{} {:.9g} {:.9g}\n", step, ppl, bleu);
      fmt::print("  eps {}: step {}: validation perplexity {:.2f}, BLEU {:.2f}\n", eps, step, ppl, bleu);
      std::fflush(stdout);
    });
    curves += "\n\n";
  }
  write_table(o, "label-smoothing", runs);
  for (const char* ext : {".png", ".svg"}) {
    GnuplotFigure figure(o.out + "/label-smoothing" + ext, 1500, 450);
    figure.add_data("q", bars);
    figure.add_data("runs", curves);
    figure.script() << "set multiplot layout 1,3 title 'Label smoothing: the target distribution, and two tiny runs'\n"
                    << "set grid\nset style fill solid 0.8\nset boxwidth 0.2\nset xlabel 'class (the true one: "
                    << kTarget << ")'\nset ylabel 'target probability'\nset title 'targets over " << kClasses
                    << " classes'\nset logscale y\nset yrange [0.005:1.2]\n"
                    << "plot for [i=0:3] $q index i using ($1 + (i - 1.5) * 0.2):($2 > 0 ? $2 : 1e-9) with boxes title "
                       "sprintf('eps %.1f', word('0 0.1 0.2 0.4', i + 1) + 0)\n"
                    << "unset logscale y\nset autoscale y\nset style data linespoints\nset xlabel 'step'\n"
                    << "set title 'validation perplexity'\nset ylabel 'perplexity'\n"
                    << "plot $runs index 0 using 1:2 pt 7 title 'eps 0', $runs index 1 using 1:2 pt 7 title 'eps 0.1'\n"
                    << "set title 'validation BLEU (greedy)'\nset ylabel 'BLEU'\n"
                    << "plot $runs index 0 using 1:3 pt 7 title 'eps 0', $runs index 1 using 1:3 pt 7 title 'eps 0.1'\n"
                    << "unset multiplot\n";
    figure.render();
  }
  fmt::print("plot: {}/label-smoothing.png, .svg\n", o.out);
}

}  // namespace loom::tools
