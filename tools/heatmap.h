#pragma once
// Heat maps as a grid of panels, drawn by gnuplot (tools/gnuplot.h): attention
// weights, positional encodings, masks. Row 0 is at the top, as in a matrix.
#include <string>
#include <vector>

namespace loom::tools {

struct HeatMap {
  std::string title;
  int64_t rows = 0, cols = 0;
  std::vector<double> values;                       // rows * cols, row-major
  std::vector<std::string> row_labels, col_labels;  // empty: numbered axes
};

struct HeatMapStyle {
  double low = 0, high = 1;  // the colour scale's range
  bool diverging = false;    // blue-white-red around 0 (else white to dark blue)
  std::string title;         // above the whole grid
  std::string x_label, y_label;
  int panel_pixels = 0;  // a panel's side; 0: from the number of rows and columns
};

// Draws `maps` in a grid of `grid_cols` columns to `path` (.png or .svg).
void draw_heatmaps(const std::string& path, const std::vector<HeatMap>& maps, int64_t grid_cols,
                   const HeatMapStyle& style);

}  // namespace loom::tools
