#pragma once
// Pictures through gnuplot, driven as a process (Debian's gnuplot-nox; scripts/setup
// installs it): loom writes a script with its data inline, gnuplot draws PNG
// (cairo) or SVG. The picture goes to a temporary beside the target and is
// renamed over it (loom/atomic_file.h), so a failed plot leaves no half file.
#include <sstream>
#include <string>
#include <vector>

namespace loom::tools {

class GnuplotFigure {
 public:
  // The format comes from the extension of `path`: .png or .svg; another is an
  // error naming `flag` (the option that gave the path).
  GnuplotFigure(std::string path, int width, int height, const std::string& flag = "--out");

  // Inline data, plotted as `$name`: one row per line, values separated by spaces.
  void add_data(const std::string& name, const std::string& rows);
  // The plotting commands (everything after `set terminal` and `set output`).
  std::ostream& script() { return script_; }
  // Runs gnuplot; an error carries gnuplot's own message and the target path.
  void render();

 private:
  std::string path_, terminal_;
  std::ostringstream data_, script_;
};

// A string as a gnuplot single-quoted literal (no escapes inside but '').
std::string gnuplot_quote(const std::string& text);

// "png" or "svg" from a path's extension, or an error naming `flag`.
std::string picture_format(const std::string& path, const std::string& flag);

}  // namespace loom::tools
