// MNIST IDX reader (the format of MNIST and Fashion-MNIST): a big-endian header
// {0, 0, element type, number of dimensions, one uint32 per dimension} and the raw
// elements. Only unsigned bytes (type 0x08) are read: images as 2-D or 3-D arrays
// (kept as bytes: a Layout::dense_u8 set), labels as 1-D. Every size in the header
// is checked against the bytes actually present before anything is allocated, so a
// hostile header costs nothing.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "data/file_io.hpp"
#include "data/sections.hpp"
#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"

namespace hogwild {

namespace {

struct IdxArray {
  std::string_view bytes;
  std::vector<std::size_t> dims;
  std::size_t header = 0;
  std::size_t item = 1;  // elements per entry: product of dims[1..]
  // dims[0] * item elements.
  const unsigned char* data() const {
    return reinterpret_cast<const unsigned char*>(bytes.data()) + header;
  }
};

std::uint32_t be32(const unsigned char* p) {
  return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | p[3];
}

std::string dims_text(const std::vector<std::size_t>& dims) {
  std::string s;
  for (std::size_t i = 1; i < dims.size(); ++i) {
    if (i > 1) s += 'x';
    s += std::to_string(dims[i]);
  }
  return s;
}

// `what` names an entry ("image", "label") in messages.
IdxArray parse_array(std::string_view bytes, const std::string& path, std::size_t min_dims,
                     std::size_t max_dims, const char* what) {
  IdxArray a;
  a.bytes = bytes;
  auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  auto fail = [&](const std::string& msg) { return DataError(path, 0, msg); };

  if (bytes.size() < 4)
    throw fail("too short for an IDX header (" + std::to_string(bytes.size()) + " bytes)");
  if (b[0] != 0 || b[1] != 0) throw fail("not an IDX file (the first two bytes are not zero)");
  if (b[2] != 0x08) {
    char type[8];
    std::snprintf(type, sizeof type, "0x%02X", b[2]);
    throw fail(std::string("IDX element type ") + type +
               " is not supported (only unsigned bytes, 0x08)");
  }
  const std::size_t nd = b[3];
  if (nd < min_dims || nd > max_dims) {
    std::string want = std::to_string(min_dims);
    if (max_dims != min_dims) want += " or " + std::to_string(max_dims);
    throw fail("an IDX " + std::string(what) + " file has " + want +
               (max_dims == 1 ? " dimension" : " dimensions") + ", this one has " +
               std::to_string(nd) + (nd == 1 ? " (is it a labels file?)" : ""));
  }
  const std::size_t header = 4 + 4 * nd;
  if (bytes.size() < header)
    throw fail("truncated IDX header: " + std::to_string(nd) + " dimensions need " +
               std::to_string(header) + " bytes, the file has " + std::to_string(bytes.size()));

  std::size_t total = 1;
  bool overflow = false;
  for (std::size_t i = 0; i < nd; ++i) {
    a.dims.push_back(be32(b + 4 + 4 * i));
    overflow |= __builtin_mul_overflow(total, a.dims.back(), &total);
    if (i > 0) a.item *= a.dims.back();
  }
  const std::string declared = std::to_string(a.dims[0]) + " " + what + "s" +
                               (nd > 1 ? " of " + dims_text(a.dims) : std::string());
  if (overflow || total > bytes.size() - header)
    throw fail("truncated: the header declares " + declared + " (" +
               (overflow ? std::string("more than 2^64") : std::to_string(total + header)) +
               " bytes) but the file has " + std::to_string(bytes.size()) + " bytes");
  if (total < bytes.size() - header)
    throw fail("the header declares " + declared + " (" + std::to_string(total + header) +
               " bytes) but the file has " + std::to_string(bytes.size()) + " bytes");
  if (nd > 1 && a.item == 0) throw fail("the header declares " + declared + " of size 0");
  a.header = header;
  return a;
}

bool exists(const std::string& p) {
  std::error_code ec;
  return std::filesystem::exists(p, ec);
}

// The labels file next to the images; tolerates one of the pair being gzip'ed.
std::string find_labels(const std::string& images_path) {
  std::string guess = idx_labels_path_for(images_path);
  if (guess.empty())
    throw ConfigError("cannot tell which labels file goes with " + images_path +
                      " (its name has no \"images-idx3\"); name the labels file explicitly");
  if (exists(guess)) return guess;
  std::string other = guess.ends_with(".gz") ? guess.substr(0, guess.size() - 3) : guess + ".gz";
  return exists(other) ? other : guess;  // reading `guess` reports the missing file
}

}  // namespace

std::string idx_labels_path_for(const std::string& images_path) {
  const std::string from = "images-idx3", to = "labels-idx1";
  std::size_t slash = images_path.rfind('/');
  std::size_t name = slash == std::string::npos ? 0 : slash + 1;
  std::size_t at = images_path.rfind(from);
  if (at == std::string::npos || at < name) return "";
  return images_path.substr(0, at) + to + images_path.substr(at + from.size());
}

namespace {

Dataset build(std::string_view image_file, std::string_view label_file,
              const std::string& images_path, const std::string& lpath) {
  IdxArray images = parse_array(image_file, images_path, 2, 3, "image");
  IdxArray labels = parse_array(label_file, lpath, 1, 1, "label");
  const std::size_t rows = images.dims[0], cols = images.item;
  if (labels.dims[0] != rows)
    throw DataError(lpath, 0,
                    "has " + std::to_string(labels.dims[0]) + " labels but " + images_path +
                        " has " + std::to_string(rows) + " images");
  if (cols > std::numeric_limits<std::uint32_t>::max())
    throw DataError(images_path, 0, "images of " + std::to_string(cols) + " pixels are too large");

  // The pixels are kept as the file has them, one byte each (Layout::dense_u8:
  // value = byte / 255); Dataset::widened() makes floats of them where needed.
  auto s = detail::make_sections(Layout::dense_u8, 0, rows, rows * cols);
  auto storage = MappedBuffer::anonymous(s.end);
  auto* out_labels = detail::section<float>(storage->data(), s.labels);
  auto* out_pixels = detail::section<std::uint8_t>(storage->data(), s.values);
  const unsigned char* label_bytes = labels.data();
  for (std::size_t r = 0; r < rows; ++r) out_labels[r] = label_bytes[r];
  if (rows * cols != 0) std::memcpy(out_pixels, images.data(), rows * cols);
  storage->seal();
  return Dataset::view_u8(storage, rows, cols, out_labels, out_pixels, images_path);
}

}  // namespace

Dataset read_idx(const std::string& images_path, const std::string& labels_path) {
  const std::string lpath = labels_path.empty() ? find_labels(images_path) : labels_path;
  const auto images = detail::FileContent::read(images_path);
  const auto labels = detail::FileContent::read(lpath);
  return build(images.text(), labels.text(), images_path, lpath);
}

Dataset parse_idx(std::string_view images, std::string_view labels, const std::string& name) {
  return build(images, labels, name, name + " (labels)");
}

Dataset parse_idx(std::string_view images, std::string_view labels, const std::string& name,
                  const std::string& labels_name) {
  return build(images, labels, name, labels_name);
}

}  // namespace hogwild
