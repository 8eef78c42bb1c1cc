// Bytes in and out of files for the readers and writers in src/data: gzip is
// recognised by its magic bytes (never by the file name) and inflated in memory;
// output files are written under a temporary name and renamed into place, so a
// reader never sees a half-written cache or text file.
#pragma once

#include <zlib.h>

#include <charconv>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hogwild/dataset.hpp"

namespace hogwild::detail {

bool is_gzip(std::string_view bytes) noexcept;

// Inflates one or more concatenated gzip members; errors name `name`.
std::string inflate_gzip(std::string_view compressed, const std::string& name);

// The whole content of a file: a plain file is mapped read-only (no copy), a gzip
// file is inflated into memory. An empty file has empty text().
class FileContent {
 public:
  static FileContent read(const std::string& path);
  // Computed on each call rather than stored: a moved std::string may move its
  // characters (short strings live inside the object).
  std::string_view text() const noexcept {
    if (gzipped_) return inflated_;
    if (map_) return {reinterpret_cast<const char*>(map_->data()), map_->size()};
    return {};
  }
  bool gzipped() const noexcept { return gzipped_; }

 private:
  std::shared_ptr<MappedBuffer> map_;
  std::string inflated_;
  bool gzipped_ = false;
};

// Up to `n` bytes from the start of the (inflated) content: enough to sniff a format
// without reading a whole file.
std::string read_head(const std::string& path, std::size_t n, bool* gzipped = nullptr);

// Writes all `n` bytes to `fd`, retrying short writes and EINTR; returns 0, or the
// errno that stopped it (ENOSPC for a write that wrote nothing).
int write_all(int fd, const void* data, std::size_t n) noexcept;

// True when `path` names an existing device, FIFO or socket (after links):
// /dev/null, /dev/stdout, a named pipe. Such a path is written as it is, since
// renaming a temporary over it would replace the node itself (as root, /dev/null
// became a regular file).
bool is_special_file(const std::string& path) noexcept;

// While alive, names `path` (a temporary being written) for
// remove_pending_temporary() (hogwild/metrics.hpp), which a signal handler that
// must exit at once calls, so that nothing half-written is left behind. One slot:
// the newest one holds it. An empty path names nothing.
class PendingTemporary {
 public:
  explicit PendingTemporary(const std::string& path) noexcept;
  ~PendingTemporary();
  PendingTemporary(const PendingTemporary&) = delete;
  PendingTemporary& operator=(const PendingTemporary&) = delete;
};

// A file written as `path.tmp.<pid>`, fsync'ed and renamed to `path` by commit().
// Destroyed without commit() (an exception on the way), it removes the temporary.
// A special file (is_special_file) is written in place, with no temporary.
class OutputFile {
 public:
  OutputFile(std::string path, bool gzip);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, std::size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  std::size_t written() const noexcept { return written_; }  // bytes before compression
  void commit();

 private:
  void write_raw(const void* data, std::size_t n);
  void deflate_some(int flush);

  std::string path_, tmp_;
  PendingTemporary pending_{tmp_};  // after tmp_: the signal handlers' view of it
  int fd_ = -1;
  bool gzip_ = false;
  bool committed_ = false;
  std::size_t written_ = 0;
  z_stream zs_{};
  std::vector<unsigned char> zbuf_;
};

// Text lines written through a 1 MiB buffer into an OutputFile (gzip'ed when the
// path ends in .gz); numbers in their shortest round-trip form (std::to_chars).
class TextWriter {
 public:
  explicit TextWriter(const std::string& path) : out_(path, path.ends_with(".gz")) {
    buf_.reserve(kFlush + 256);
  }
  template <class T>
  TextWriter& number(T x) {
    char num[64];
    buf_.append(num, std::to_chars(num, num + sizeof num, x).ptr);
    return *this;
  }
  TextWriter& put(char c) {
    buf_ += c;
    return *this;
  }
  void end_line() {
    buf_ += '\n';
    if (buf_.size() >= kFlush) {
      out_.write(buf_);
      buf_.clear();
    }
  }
  void commit() {
    out_.write(buf_);
    out_.commit();
  }

 private:
  static constexpr std::size_t kFlush = std::size_t{1} << 20;
  OutputFile out_;
  std::string buf_;
};

}  // namespace hogwild::detail
