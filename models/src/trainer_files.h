#pragma once
// What trainer.cpp and trainer_files.cpp both know of a run folder's kept checkpoints.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "loom/models/run_folder.h"
#include "loom/models/trainer.h"

namespace loom::models {

// How many step-N checkpoints a run keeps (for --keep-last and --average-last).
int64_t kept_count(const TrainerOptions& o);
// "step-00001234.safetensors"
std::string kept_name(int64_t step);

}  // namespace loom::models
