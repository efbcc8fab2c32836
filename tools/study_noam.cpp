// `loom study noam`: the paper's learning-rate schedule (section 5.3),
//   lr(step) = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5),
// read from optim::Noam itself (driving a one-parameter Adam) for several
// warm-ups and widths: a linear rise for `warmup` steps, then decay as 1/sqrt(step).
// The table gives each curve's measured peak (step and rate), the formula's
// peak d_model^-0.5 * warmup^-0.5, and the rate at step 100000.
#include <cmath>

#include "gnuplot.h"
#include "loom/ops.h"
#include "loom/optim.h"
#include "study.h"

namespace loom::tools {

void study_noam(const StudyOptions& o) {
  constexpr int64_t kSteps = 100000;
  struct Curve {
    int64_t d_model, warmup;
  };
  const std::vector<Curve> curves = {{512, 1000}, {512, 4000}, {512, 8000}, {256, 4000}, {1024, 4000}};
  Table table{{"d_model", "warmup", "peak_step", "peak_lr", "formula_peak_lr", "lr_at_100k"}, {}};
  std::string data;
  Tensor dummy = zeros({1}).requires_grad_();
  for (const Curve& c : curves) {
    optim::Adam adam({dummy});
    optim::Noam noam(adam, c.d_model, c.warmup);
    int64_t peak_step = 0;
    double peak = -1;
    std::string rows;
    for (int64_t step = 1; step <= kSteps; ++step) {
      const double lr = noam.step();  // the rate Noam sets on the optimizer for this step
      if (lr > peak) peak = lr, peak_step = step;
      if (step % 200 == 0 || step == 1) rows += fmt::format("{} {:.9g}\n", step, lr);
    }
    table.rows.push_back({static_cast<double>(c.d_model), static_cast<double>(c.warmup), static_cast<double>(peak_step),
                          peak, 1.0 / std::sqrt(static_cast<double>(c.d_model) * static_cast<double>(c.warmup)),
                          noam.rate(kSteps)});
    data += rows + "\n\n";  // one gnuplot index per curve
  }
  write_table(o, "noam", table);
  for (const char* ext : {".png", ".svg"}) {
    GnuplotFigure figure(o.out + "/noam" + ext, 1300, 500);
    figure.add_data("lr", data);
    std::ostream& s = figure.script();
    s << "set multiplot layout 1,2 title 'The Noam schedule (optim::Noam, factor 1)'\nset grid\n"
      << "set xlabel 'step'\nset ylabel 'learning rate'\nset key top right\nset title 'd_model 512, warm-ups'\n";
    s << "plot $lr index 0 using 1:2 with lines title 'warmup 1000', $lr index 1 using 1:2 with lines title "
         "'warmup 4000', $lr index 2 using 1:2 with lines title 'warmup 8000'\n"
      << "set title 'warm-up 4000, widths'\n"
      << "plot $lr index 3 using 1:2 with lines title 'd_model 256', $lr index 1 using 1:2 with lines title "
         "'d_model 512', $lr index 4 using 1:2 with lines title 'd_model 1024'\nunset multiplot\n";
    figure.render();
  }
  fmt::print("plot: {}/noam.png, .svg\n", o.out);
}

}  // namespace loom::tools
