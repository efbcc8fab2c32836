#pragma once
// The one way loom writes a file (checkpoints, vocabularies, translations,
// benchmark results): into a temporary beside the target, flushed to the disk
// (fsync), then renamed over the target, and the folder synced. A crash, a kill
// or a full disk leaves the old file or the new one, never half of one, so a
// truncated file is never mistaken for a good one.
#include <fstream>
#include <string>

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

// The whole of `contents` to `path`, atomically.
void write_file(const std::string& path, const std::string& contents);

}  // namespace loom
