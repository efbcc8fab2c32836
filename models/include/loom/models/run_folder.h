#pragma once
// A training run's folder, guarded: one run writes in it at a time (an advisory
// lock, held for the run's life and released by the kernel if the process dies),
// a finished or interrupted run is never overwritten by a new one, and the
// temporaries of a writer that died are swept away.
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace loom::models {

class RunFolderLock {
 public:
  // Locks <folder>/.lock (created if missing); a folder another process holds is
  // a loom::Error naming it (pid, host, command, since when) and `command`.
  RunFolderLock(const std::string& folder, const std::string& command);
  ~RunFolderLock();
  RunFolderLock(const RunFolderLock&) = delete;
  RunFolderLock& operator=(const RunFolderLock&) = delete;

 private:
  int fd_ = -1;
};

// The kept checkpoints of a run folder (--keep-last, --average-last), oldest first:
// its step-<N>.safetensors files, with their steps.
std::vector<std::pair<int64_t, std::filesystem::path>> kept_checkpoints(const std::string& folder);

// Those of them that were validated: saved at a checkpoint (an epoch's end,
// --save-every, --save-minutes, the run's end), whose metadata holds the validation
// loss, rather than --keep-every or --keep-per-epoch snapshots between checkpoints.
std::vector<std::pair<int64_t, std::filesystem::path>> validated_checkpoints(const std::string& folder);

// The files of a run in `folder` (model.safetensors, training_state.safetensors,
// best/, average/, step-N.safetensors), by name; empty when it holds none.
std::vector<std::string> run_files(const std::string& folder);

// Removes `<name>.tmp.<pid>` temporaries (loom/atomic_file.h) that no living
// writer owns, in `folder` and its best/ and average/; returns their names. Call
// with the folder's lock held.
std::vector<std::string> remove_stale_temporaries(const std::string& folder);

}  // namespace loom::models
