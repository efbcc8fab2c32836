#pragma once
// A file mapped read-only into memory: its pages are read when touched, and
// processes that map the same file share them (the page cache), so every rank of
// a data-parallel run reads one corpus store without a copy of its own.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace loom {

class MappedFile {
 public:
  // Errors name the file. An empty file maps to an empty span.
  explicit MappedFile(std::string path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Pages are used in no order (batches pick pairs across the whole file): no read-ahead.
  void expect_random_access() const;

 private:
  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace loom
