#include "heatmap.h"

#include <algorithm>
#include <cmath>

#include "gnuplot.h"
#include "loom/error.h"

namespace loom::tools {

namespace {

// gnuplot tic labels at positions 0, 1, ...: ("a" 0, "b" 1, ...).
std::string tics(const std::vector<std::string>& labels) {
  std::string out = "(";
  for (size_t i = 0; i < labels.size(); ++i) out += fmt::format("{}{} {}", i ? ", " : "", gnuplot_quote(labels[i]), i);
  return out + ")";
}

}  // namespace

void draw_heatmaps(const std::string& path, const std::vector<HeatMap>& maps, int64_t grid_cols,
                   const HeatMapStyle& style) {
  LOOM_CHECK(!maps.empty() && grid_cols > 0, "heat map: nothing to draw to '{}'", path);
  int64_t rows = 0, cols = 0;
  for (const HeatMap& m : maps) {
    LOOM_CHECK(m.rows > 0 && m.cols > 0 && static_cast<int64_t>(m.values.size()) == m.rows * m.cols,
               "heat map '{}': {} values for {} x {}", m.title, m.values.size(), m.rows, m.cols);
    rows = std::max(rows, m.rows);
    cols = std::max(cols, m.cols);
  }
  const int64_t grid_rows = (static_cast<int64_t>(maps.size()) + grid_cols - 1) / grid_cols;
  const bool labelled = !maps[0].col_labels.empty();
  // Room for the cells and, when there are token labels, for the words along the axes.
  const int64_t side = style.panel_pixels > 0
                           ? style.panel_pixels
                           : std::clamp<int64_t>(std::max(rows, cols) * 16 + (labelled ? 110 : 60), 220, 700);
  GnuplotFigure figure(path, static_cast<int>(side * grid_cols), static_cast<int>(side * grid_rows + 40));
  std::ostream& s = figure.script();
  for (size_t k = 0; k < maps.size(); ++k) {
    std::string rows_text;
    for (int64_t r = 0; r < maps[k].rows; ++r) {
      for (int64_t c = 0; c < maps[k].cols; ++c)
        rows_text += fmt::format("{}{:.6g}", c ? " " : "", maps[k].values[static_cast<size_t>(r * maps[k].cols + c)]);
      rows_text += "\n";
    }
    figure.add_data(fmt::format("m{}", k), rows_text);
  }
  s << (style.diverging ? "set palette defined (0 '#2166ac', 0.5 'white', 1 '#b2182b')\n"
                        : "set palette defined (0 'white', 0.4 '#6baed6', 1 '#08306b')\n");
  s << fmt::format("set cbrange [{}:{}]\n", style.low, style.high)
    << "set tics scale 0\nset tics font ',7'\nunset key\n"
    << fmt::format("set multiplot layout {},{} title {}\n", grid_rows, grid_cols, gnuplot_quote(style.title));
  for (size_t k = 0; k < maps.size(); ++k) {
    const HeatMap& m = maps[k];
    s << "set title " << gnuplot_quote(m.title) << "\n"
      << fmt::format("set xrange [-0.5:{}]\nset yrange [{}:-0.5]\n", m.cols - 0.5, m.rows - 0.5)
      << (m.col_labels.empty() ? "set xtics autofreq norotate\n"
                               : "set xtics " + tics(m.col_labels) + " rotate by 90 right\n")
      << (m.row_labels.empty() ? "set ytics autofreq\n" : "set ytics " + tics(m.row_labels) + "\n") << "set xlabel "
      << gnuplot_quote(style.x_label) << "\nset ylabel " << gnuplot_quote(style.y_label) << "\n"
      << fmt::format("plot $m{} matrix with image\n", k);
  }
  s << "unset multiplot\n";
  figure.render();
}

}  // namespace loom::tools
