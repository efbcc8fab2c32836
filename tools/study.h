#pragma once
// `loom study NAME`: the paper's design choices answered by measurement, one
// file per study (tools/study_<name>.cpp). Each measures with loom itself,
// writes <out>/<name>.png (and .svg) and a table <out>/<name>.csv, and prints
// the table as markdown.
#include <cstdint>
#include <string>
#include <vector>

namespace loom::tools {

struct StudyOptions {
  std::string out = "study";
  std::string data;          // a Multi30k-layout folder, for the studies that train
  int64_t sentences = 1000;  // training pairs those studies read
  int64_t vocab = 1000;      // their SentencePiece pieces
  int64_t steps = 0;         // training steps (0: the study's own default)
  int threads = 2;
  uint64_t seed = 1;
};

struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<double>> rows;
};

// <out>/<name>.csv, atomically; and the table as markdown on stdout.
void write_table(const StudyOptions& o, const std::string& name, const Table& table);

void study_scaling(const StudyOptions& o);
void study_positions(const StudyOptions& o);
void study_noam(const StudyOptions& o);
void study_masks(const StudyOptions& o);
void study_label_smoothing(const StudyOptions& o);  // trains: needs --data
void study_norm_warmup(const StudyOptions& o);      // trains: needs --data

}  // namespace loom::tools
