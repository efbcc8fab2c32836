#pragma once
// The one way loom writes a file (checkpoints, vocabularies, translations,
// benchmark results): into a temporary beside the target, flushed to the disk
// (fsync), then renamed over the target, and the folder synced. A crash, a kill
// or a full disk leaves the old file or the new one, never half of one, so a
// truncated file is never mistaken for a good one.
#include <fstream>
#include <string>
#include <vector>

namespace loom {

// `<path>.tmp.<pid>`: beside the target (rename is atomic only within a file
// system), and distinct per process.
std::string temporary_path(const std::string& path);

// Makes a finished temporary durable and gives it the target's name: fsync,
// rename, fsync of the folder. For files another library wrote (SentencePiece).
// On error the temporary is removed and loom::Error names both paths.
void commit_file(const std::string& temporary, const std::string& path);

// The same for a folder another writer filled (a corpus store): every file in
// `temporary` and the folder itself synced, then renamed to `path`, which must not
// exist. On error the temporary is removed and loom::Error names both paths.
void commit_folder(const std::string& temporary, const std::string& path);

// A file written through a stream; nothing appears at `path` until commit(). A
// `path` that is a symbolic link is written through: its target gets the file.
// Destroyed uncommitted (an error on the way), it removes its temporary.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  std::ostream& stream() { return out_; }
  // Checks every write succeeded (disk full is an error naming the file), then commit_file.
  void commit();

 private:
  std::string path_, temporary_;
  std::ofstream out_;
  bool committed_ = false;
};

// Removes the temporaries of the AtomicFiles alive now, and lets no new one be
// made: for a process about to die of a signal (a second Ctrl-C during a save),
// so that no temporary outlives its writer. Called from a thread, not a handler.
void remove_live_temporaries();

// Removes the temporaries in `folder` (files or folders named `<name>.tmp.<pid>`)
// whose writer is no longer alive, and returns their names; only those of
// `<target>` when `target` is given. Call with whatever lock keeps a second
// writer of the same names out.
std::vector<std::string> remove_dead_temporaries(const std::string& folder, const std::string& target = "");

// The whole of `contents` to `path`, atomically.
void write_file(const std::string& path, const std::string& contents);

// The whole of the file at `path` (bytes as they are); loom::Error names the file
// when it cannot be opened or read.
std::string read_file(const std::string& path);

// A copy of `from` at `to`, through write_file (a vocabulary beside a checkpoint).
void copy_file(const std::string& from, const std::string& to);

}  // namespace loom
