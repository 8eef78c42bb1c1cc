// load_dataset, the single entry point that turns any supported file into a
// Dataset: the format sniffed from the file's first bytes, then its reader.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "data/file_io.hpp"
#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"

namespace hogwild {

using detail::is_stream;
using detail::read_stream;
using detail::stream_name;

namespace {

struct Sniffed {
  FileFormat format;
  bool gzipped;
};

Sniffed sniff_head(std::string_view h, bool gz) {
  auto byte = [&](std::size_t i) { return static_cast<unsigned char>(h[i]); };
  if (h.starts_with("HWDSET01")) return {FileFormat::cache, gz};
  // IDX: two zero bytes, the element type (0x08 = unsigned byte), the number of
  // dimensions. No text format starts with two NULs.
  if (h.size() >= 4 && byte(0) == 0 && byte(1) == 0 && byte(2) == 0x08 && byte(3) >= 1 &&
      byte(3) <= 3)
    return {FileFormat::idx, gz};
  if (looks_like_ratings(h)) return {FileFormat::ratings, gz};
  return {FileFormat::libsvm, gz};
}

// The number of the first line that is neither blank nor a comment (1-based; 0 if
// `head` has none).
std::size_t first_line(std::string_view head) {
  std::size_t line = 1;
  for (std::size_t at = 0; at < head.size(); ++line) {
    const std::size_t end = std::min(head.find('\n', at), head.size());
    const std::string_view l = head.substr(at, end - at);
    const auto text = l.find_first_not_of(" \t\r");
    if (text != std::string_view::npos && l[text] != '#') return line;
    at = end + 1;
  }
  return 0;
}

// A libsvm reader's complaint about the first line it read: the file is then most
// likely no libsvm at all, so the message says which formats were tried.
[[noreturn]] void none_of_the_formats(const DataError& e) {
  throw DataError(e.file(), e.line(),
                  std::string(e.what()).substr(DataError::located(e.file(), e.line(), "").size()) +
                      "; the file is none of the formats hogwild reads, tried in this order: "
                      "the binary cache (magic HWDSET01), MNIST IDX (00 00 08 and 1 to 3 "
                      "dimensions), rating triples (user item rating), libsvm text (label "
                      "index:value ...), each gzip'ed or not");
}

Sniffed sniff(const std::string& path) {
  bool gz = false;
  const std::string h = detail::read_head(path, 4096, &gz);
  return sniff_head(h, gz);
}

// An IDX labels file's bytes: from a file (gzip'ed or not), or read to the end from
// a stream (`-`, a FIFO, <(...)), which cannot be mapped.
std::string read_labels(const std::string& path) {
  return is_stream(path) ? read_stream(path, stream_name(path)) : read_file_maybe_gz(path);
}

}  // namespace

Dataset detail::parse_stream(const std::string& bytes, const std::string& path,
                             const std::string& labels_path, const LoadOptions& options) {
  const std::string name = stream_name(path);
  switch (sniff_head(std::string_view(bytes).substr(0, 4096), false).format) {
    case FileFormat::cache:
      if (!labels_path.empty())
        throw ConfigError("a labels file is only used with IDX images, not with the cache " + name);
      return parse_cache(bytes, name);
    case FileFormat::idx:
      if (labels_path.empty())  // a file's are found beside it; a stream has no "beside"
        throw ConfigError("the IDX images from " + name +
                          " need their labels file: give it with --train-labels or --test-labels");
      if (path == "-" && labels_path == "-")
        throw ConfigError("standard input cannot hold both the IDX images and their labels: give "
                          "one of them as a file (or <(...))");
      return parse_idx(bytes, read_labels(labels_path), name, stream_name(labels_path));
    case FileFormat::ratings:
      if (!labels_path.empty())
        throw ConfigError("a labels file is only used with IDX images; " + name +
                          " holds rating triples, whose ratings are in the file");
      return parse_ratings(bytes, name);
    case FileFormat::libsvm:
      if (!labels_path.empty())
        throw ConfigError("a labels file is only used with IDX images; " + name +
                          " is libsvm text, whose labels are in the file");
      try {
        return parse_libsvm(bytes, name, LibsvmOptions{options.threads});
      } catch (const DataError& e) {
        if (e.line() > 0 && e.line() == first_line(bytes)) none_of_the_formats(e);
        throw;
      }
  }
  throw Error("unknown file format");  // unreachable: the switch covers every format
}

namespace {

Dataset load_stream(const std::string& path, const std::string& labels_path,
                    const LoadOptions& options) {
  return detail::parse_stream(read_stream(path, stream_name(path)), path, labels_path, options);
}

}  // namespace

FileFormat detect_format(const std::string& path) {
  return sniff(path).format;
}

namespace {

// The file's rows as its format holds them (libsvm: sparse).
Dataset load_as_stored(const std::string& path, const std::string& labels_path,
                       const LoadOptions& options) {
  if (is_stream(path)) return load_stream(path, labels_path, options);
  Sniffed s = sniff(path);
  switch (s.format) {
    case FileFormat::cache:
      // The cache is used in place through mmap, which a compressed file cannot be.
      if (s.gzipped)
        throw DataError(path, 0, "a gzip'ed cache cannot be memory-mapped; gunzip it first");
      if (!labels_path.empty())
        throw ConfigError("a labels file is only used with IDX images, not with the cache " + path);
      return open_cache(path);
    case FileFormat::idx:
      if (!labels_path.empty() && is_stream(labels_path))  // read to its end, not mapped
        return parse_idx(detail::FileContent::read(path).text(), read_labels(labels_path), path,
                         stream_name(labels_path));
      return read_idx(path, labels_path);
    case FileFormat::ratings:
      if (!labels_path.empty())
        throw ConfigError("a labels file is only used with IDX images; " + path +
                          " holds rating triples, whose ratings are in the file");
      return read_ratings(path);
    case FileFormat::libsvm:
      if (!labels_path.empty())
        throw ConfigError("a labels file is only used with IDX images; " + path +
                          " is libsvm text, whose labels are in the file");
      try {
        return read_libsvm(path, LibsvmOptions{options.threads});
      } catch (const DataError& e) {
        if (e.line() > 0 && e.line() == first_line(detail::read_head(path, 4096)))
          none_of_the_formats(e);
        throw;
      }
  }
  throw Error("unknown file format");  // unreachable: the switch covers every format
}

}  // namespace

Dataset load_dataset(const std::string& path, const std::string& labels_path,
                     const LoadOptions& options) {
  return with_storage(load_as_stored(path, labels_path, options), options.storage,
                      options.dense_at);
}

}  // namespace hogwild

namespace hogwild::detail {

// Standard input (`-`) or a file that can be read only once, front to back: a FIFO,
// /dev/stdin, a process substitution <(...). Its size is unknown up front and it
// cannot be mapped or sniffed and then opened again (a pipe read "0 rows").
bool is_stream(const std::string& path) {
  if (path == "-") return true;
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) ||
                                            S_ISSOCK(st.st_mode));
}

// All of a stream's bytes, inflated when they are gzip'ed.
std::string read_stream(const std::string& path, const std::string& name) {
  const int fd = path == "-" ? ::dup(STDIN_FILENO) : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError(fmt::format("cannot read {}: {}", name, std::strerror(errno)));
  // The memory devices but /dev/null (/dev/zero, /dev/urandom: major 1) never end:
  // read to the end, they filled the memory before anything was said.
  if (struct stat st {}; ::fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 &&
                         minor(st.st_rdev) != 3) {
    ::close(fd);
    throw ConfigError(fmt::format("{}: a device, not a file or a pipe (its bytes would never end)", name));
  }
  std::string bytes;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw IoError(fmt::format("cannot read {}: {}", name, std::strerror(err)));
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return detail::is_gzip(bytes) ? detail::inflate_gzip(bytes, name) : bytes;
}

std::string stream_name(const std::string& path) { return path == "-" ? "standard input" : path; }

}  // namespace hogwild::detail
