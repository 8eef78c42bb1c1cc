// Bytes in and out of files for the readers and writers in src/data: gzip is
// recognised by its magic bytes (never by the file name) and inflated in memory;
// output files are written under a temporary name and renamed into place, so a
// reader never sees a half-written cache or text file.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <zlib.h>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hogwild/data_io.hpp"
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

// Standard input (`-`) or a file that can be read only once, front to back: a FIFO,
// /dev/stdin on a pipe, a process substitution <(...).
bool is_stream(const std::string& path);
// All of a stream's bytes, inflated when they are gzip'ed; errors name `name`.
std::string read_stream(const std::string& path, const std::string& name);
// "standard input" for `-`, else the path.
std::string stream_name(const std::string& path);
// The data set in a stream's bytes (read_stream's), in whichever format they hold,
// as load_dataset reads `path` when it is a stream.
Dataset parse_stream(const std::string& bytes, const std::string& path,
                     const std::string& labels_path, const LoadOptions& options);

// Up to `n` bytes from the start of the (inflated) content: enough to sniff a format
// without reading a whole file.
std::string read_head(const std::string& path, std::size_t n, bool* gzipped = nullptr);

// Writes all `n` bytes to `fd`, retrying short writes and EINTR; returns 0, or the
// errno that stopped it (ENOSPC for a write that wrote nothing).
int write_all(int fd, const void* data, std::size_t n) noexcept;

// An anonymous memory file (memfd) holding `bytes`, read back at any offset through
// its descriptor or as /proc/self/fd/N (a stream's bytes for a reader that needs a
// file). Close-on-exec unless `inherited`; ResourceError naming `what` when memory
// runs short.
int memory_file(std::string_view bytes, const std::string& what, bool inherited = false);

// Where an output named `path` goes, links followed (up to 40):
// - stream: an open descriptor, written at its current offset as the run goes: `-`
//   (standard output), and any path whose links lead to /dev/fd/N, /proc/self/fd/N
//   or this process's /proc/PID/fd/N (/dev/stdout is such a link). Renaming a file
//   over it would replace the link, or the file the shell redirected into.
// - in_place: an existing device, FIFO or socket (/dev/null, a named pipe), opened
//   and written as it is (as root, a rename over /dev/null made it a regular file).
// - replace: anything else; `path` is then the file at the end of the links, which
//   is written as a temporary beside it and renamed over it, so that the links stay.
struct OutputTarget {
  enum class Kind : std::uint8_t { stream, in_place, replace } kind = Kind::replace;
  int fd = -1;       // stream: the descriptor
  std::string path;  // in_place, replace: the file, links followed
};
// Throws IoError (exit 2) for a descriptor that is not open or a loop of links.
OutputTarget output_target(const std::string& path);
// Whether `path` is standard output, however named (-, /dev/stdout, a link to
// /proc/self/fd/1); false for "" (no output).
bool is_stdout(const std::string& path);

// A JSON document's text for an output (a summary, a metrics line, a model file's
// header): bytes that are not UTF-8, a path named in another encoding, written as
// U+FFFD, where nlohmann's dump() would throw once the work is done. indent: dump()'s.
std::string json_text(const nlohmann::json& j, int indent = -1);

// The temporaries `<file>.tmp.<pid>` beside `file` whose writer is gone (killed
// before its rename): its pid is no process here, and no one holds the lock that a
// writer keeps on its temporary (so a writer on another machine sharing the folder
// is left alone). Removed; returns how many.
std::size_t remove_stale_temporaries(const std::string& file) noexcept;

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

// The one writer of every output file (summaries, checkpoints, caches, converted
// data): output_target(path) says where the bytes go. Replace: written as
// `<file>.tmp.<pid>` (stale ones of dead writers removed first), fsync'ed, renamed
// over the file, and the folder fsync'ed, so that a reader never sees half a file
// and a crash leaves the previous version; destroyed without commit() (an exception
// on the way), it removes the temporary. Stream and in place: written as they come.
// A full disk or quota is ResourceError (exit 4), other failures IoError.
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
  [[noreturn]] void fail(const std::string& doing, int err);
  void write_raw(const void* data, std::size_t n);
  void deflate_some(int flush);

  std::string path_;  // as given, for messages
  OutputTarget target_;
  std::string tmp_;   // replace: the temporary
  PendingTemporary pending_{tmp_};  // after tmp_: the signal handlers' view of it
  int fd_ = -1;
  bool own_fd_ = true;  // false for a stream's descriptor, which stays open
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
