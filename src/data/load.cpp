// load_dataset, the single entry point that turns any supported file into a
// Dataset: the format sniffed from the file's first bytes, then its reader.
#include <string>

#include "data/file_io.hpp"
#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"

namespace hogwild {

namespace {

struct Sniffed {
  FileFormat format;
  bool gzipped;
};

Sniffed sniff(const std::string& path) {
  bool gz = false;
  std::string h = detail::read_head(path, 4096, &gz);
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

}  // namespace

FileFormat detect_format(const std::string& path) {
  return sniff(path).format;
}

namespace {

// The file's rows as its format holds them (libsvm: sparse).
Dataset load_as_stored(const std::string& path, const std::string& labels_path,
                       const LoadOptions& options) {
  Sniffed s = sniff(path);
  switch (s.format) {
    case FileFormat::cache:
      // The cache is used in place through mmap, which a compressed file cannot be.
      if (s.gzipped)
        throw DataError(path, 0, "a gzip'ed cache cannot be memory-mapped; gunzip it first");
      if (!labels_path.empty())
        throw ConfigError("a labels file is only used with IDX images, not with the cache " + path);
      return open_cache(path);
    case FileFormat::idx: return read_idx(path, labels_path);
    case FileFormat::ratings:
      if (!labels_path.empty())
        throw ConfigError("a labels file is only used with IDX images; " + path +
                          " holds rating triples, whose ratings are in the file");
      return read_ratings(path);
    case FileFormat::libsvm:
      if (!labels_path.empty())
        throw ConfigError("a labels file is only used with IDX images; " + path +
                          " is libsvm text, whose labels are in the file");
      return read_libsvm(path, LibsvmOptions{options.threads});
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
