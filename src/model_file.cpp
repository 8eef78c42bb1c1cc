// The model file (hogwild/model_file.hpp): safetensors with hogwild's metadata.
#include "hogwild/model_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/file_io.hpp"
#include "hogwild/config.hpp"
#include "hogwild/error.hpp"
#include "memory/half.hpp"

namespace hogwild {

namespace {

static_assert(std::endian::native == std::endian::little, "model files are little-endian");

// A header longer than this is not one of ours (safetensors' own readers cap it at 100 MB).
constexpr std::uint64_t kMaxHeader = 100u << 20;

// The model file open for reading at any offset: the file itself, or a stream's
// bytes in an anonymous memory file (memfd).
std::shared_ptr<const int> open_for_reading(const std::string& path, const std::string& name) {
  auto closing = [](const int* fd) {
    if (*fd >= 0) ::close(*fd);
    delete fd;
  };
  auto gzipped = [&] {
    try {
      bool gz = false;
      detail::read_head(path, 2, &gz);
      return gz;
    } catch (const std::exception&) {
      return false;  // unreadable: open() below says why
    }
  };
  if (detail::is_stream(path) || gzipped()) {
    const std::string bytes = detail::read_stream(path, name);
    return {new int(detail::memory_file(bytes, "the model from " + name)), closing};
  }
  std::shared_ptr<const int> f(new int(::open(path.c_str(), O_RDONLY | O_CLOEXEC)), closing);
  if (*f < 0) throw IoError(fmt::format("cannot open model file {}: {}", path, std::strerror(errno)));
  return f;
}

void read_exactly(int fd, std::uint64_t offset, void* out, std::size_t n, const std::string& path) {
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw IoError(fmt::format("cannot read model file {}: {}", path, std::strerror(errno)));
    if (got == 0) throw DataError(path, 0, "truncated: the file ends inside a tensor");
    p += got;
    n -= static_cast<std::size_t>(got);
    offset += static_cast<std::uint64_t>(got);
  }
}

std::size_t dtype_bytes(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F16") return 2;
  return 0;
}

std::string text_of(const std::vector<float>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (float x : v) a.push_back(x);
  return a.dump();
}

const char* to_string(LabelKind k) {
  switch (k) {
    case LabelKind::binary: return "binary";
    case LabelKind::multiclass: return "multiclass";
    case LabelKind::real: return "real";
    case LabelKind::binary_or_real: break;
  }
  return "?";
}

}  // namespace

bool looks_like_model_file(std::string_view head) noexcept {
  if (head.size() < 10) return false;
  std::uint64_t n = 0;
  std::memcpy(&n, head.data(), 8);
  return n >= 2 && n <= kMaxHeader && head[8] == '{';
}

ModelFileHeader read_model_header(const std::string& file) {
  ModelFileHeader h;
  h.name = detail::stream_name(file);
  h.file = open_for_reading(file, h.name);
  const int fd = *h.file;
  const std::string& path = h.name;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw IoError(fmt::format("model file {}: not a regular file", path));
  h.file_bytes = static_cast<std::uint64_t>(st.st_size);
  auto bad = [&](const std::string& why) { return DataError(path, 0, why); };
  if (h.file_bytes < 8)
    throw bad(fmt::format("not a model file: {} bytes, and a safetensors file starts with 8 bytes "
                          "of header length", h.file_bytes));
  std::uint64_t n = 0;
  read_exactly(fd, 0, &n, 8, path);
  if (n > kMaxHeader || n > h.file_bytes - 8)
    throw bad(fmt::format("not a model file, or truncated: its first 8 bytes give a header of {} "
                          "bytes, and the file has {} after them", n, h.file_bytes - 8));
  std::string text(n, '\0');
  read_exactly(fd, 8, text.data(), n, path);
  h.data_offset = 8 + n;
  nlohmann::json j;
  try {
    // A name given twice would be read as its last: refused (safetensors' own rule).
    std::set<std::string> names;
    j = nlohmann::json::parse(text, [&](int depth, nlohmann::json::parse_event_t event,
                                        nlohmann::json& parsed) {
      if (depth == 1 && event == nlohmann::json::parse_event_t::key &&
          !names.insert(parsed.get<std::string>()).second)
        throw std::runtime_error("\"" + parsed.get<std::string>() + "\" is given twice");
      return true;
    });
  } catch (const std::exception& e) {
    throw bad(fmt::format("not a model file: its header is not JSON ({})", e.what()));
  }
  if (!j.is_object()) throw bad("not a model file: its header is not a JSON object");
  const std::uint64_t data_bytes = h.file_bytes - h.data_offset;
  for (auto& [name, v] : j.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) throw bad("__metadata__ is not an object of strings");
      for (auto& [k, s] : v.items()) {
        if (!s.is_string()) throw bad(fmt::format("__metadata__ \"{}\" is not a string", k));
        h.metadata[k] = s.get<std::string>();
      }
      continue;
    }
    ModelFileTensor t;
    t.name = name;
    try {
      t.dtype = v.at("dtype").get<std::string>();
      t.shape = v.at("shape").get<std::vector<std::uint64_t>>();
      const auto offsets = v.at("data_offsets").get<std::vector<std::uint64_t>>();
      if (offsets.size() != 2) throw std::runtime_error("data_offsets has not 2 values");
      t.begin = offsets[0];
      t.end = offsets[1];
    } catch (const std::exception& e) {
      throw bad(fmt::format("tensor \"{}\": {}", name, e.what()));
    }
    const std::size_t width = dtype_bytes(t.dtype);
    if (width == 0)
      throw bad(fmt::format("tensor \"{}\" is {}: hogwild reads F32 and F16", name, t.dtype));
    std::uint64_t count = 1;
    for (auto d : t.shape) {
      if (d != 0 && count > std::numeric_limits<std::uint64_t>::max() / 8 / d)
        throw bad(fmt::format("tensor \"{}\": its shape overflows", name));
      count *= d;
    }
    if (t.begin > t.end || t.end - t.begin != count * width)
      throw bad(fmt::format("tensor \"{}\": bytes {} to {} do not hold its {} {} values", name,
                            t.begin, t.end, count, t.dtype));
    if (t.end > data_bytes)
      throw bad(fmt::format("truncated: tensor \"{}\" ends at byte {} of the data, and the file "
                            "holds {}", name, t.end, data_bytes));
    h.tensors.push_back(std::move(t));
  }
  // The tensors cover the data exactly, one after another (as safetensors requires:
  // no overlap, no hole, nothing after the last).
  std::sort(h.tensors.begin(), h.tensors.end(), [](const auto& a, const auto& b) {
    return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
  });
  std::uint64_t covered = 0;
  for (const auto& t : h.tensors) {
    if (t.begin < covered)
      throw bad(fmt::format("tensor \"{}\" overlaps the one before it", t.name));
    if (t.begin > covered)
      throw bad(fmt::format("bytes {} to {} of the data belong to no tensor", covered, t.begin));
    covered = t.end;
  }
  if (covered != data_bytes)
    throw bad(fmt::format("{} bytes after the last tensor (the tensors end at byte {} of {}): "
                          "not a file --save-model wrote", data_bytes - covered, covered, data_bytes));
  const auto format = h.metadata.find("format");
  if (format == h.metadata.end() || format->second != kModelFileFormat)
    throw bad(fmt::format("a safetensors file, but not a hogwild model (its __metadata__ has no "
                          "format \"{}\"); hogwild predicts with the files --save-model writes",
                          kModelFileFormat));
  return h;
}

std::string output_kind(std::size_t outputs, const LabelMap& labels) {
  if (labels.kind() == LabelKind::real) return "value";
  return outputs == labels.classes() ? "probabilities" : "score";
}

std::map<std::string, std::string> model_metadata(const ModelDescription& d) {
  const Problem& p = d.problem;
  return {
      {"format", kModelFileFormat},
      {"format_version", fmt::format("{}", kModelFileVersion)},
      {"hogwild_version", HOGWILD_VERSION},
      {"model", d.model},
      {"options", nlohmann::json(d.options).dump()},
      {"features", fmt::format("{}", p.features)},
      {"classes", fmt::format("{}", p.classes)},
      {"layout", to_string(p.layout)},
      {"users", fmt::format("{}", p.users)},
      {"items", fmt::format("{}", p.items)},
      {"target_mean", fmt::format("{}", p.target_mean)},
      {"labels", to_string(d.labels.kind())},
      {"label_values", text_of(d.labels.values())},
      {"sign_convention", d.labels.sign_convention() ? "true" : "false"},
      {"outputs", fmt::format("{}", d.outputs)},
      {"output", d.output},
      {"data", d.data.describe()},
      {"data_fingerprint", nlohmann::json{{"rows", d.data.rows},
                                          {"cols", d.data.cols},
                                          {"nnz", d.data.nnz},
                                          {"hash", d.data.hash}}
                               .dump()},
      {"epochs", fmt::format("{}", d.epochs)},
  };
}

ModelDescription describe_model(const ModelFileHeader& h, const std::string& path) {
  auto get = [&](const char* key) -> const std::string& {
    const auto it = h.metadata.find(key);
    if (it == h.metadata.end())
      throw DataError(path, 0, fmt::format("the model's metadata has no \"{}\"", key));
    return it->second;
  };
  auto whole = [&](const char* key) {
    const std::string& s = get(key);
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size())
      throw DataError(path, 0, fmt::format("metadata \"{}\" is \"{}\", not a whole number", key, s));
    return v;
  };
  ModelDescription d;
  try {
    const std::uint64_t version = whole("format_version");
    if (version > kModelFileVersion)
      throw DataError(path, 0, fmt::format("model file format {} is newer than this hogwild's ({})",
                                           version, kModelFileVersion));
    d.model = get("model");
    const auto options = nlohmann::json::parse(get("options"));
    for (auto& [k, v] : options.items()) d.options[k] = v.get<std::string>();
    d.problem.features = whole("features");
    d.problem.classes = whole("classes");
    d.problem.users = whole("users");
    d.problem.items = whole("items");
    // What a training set can have (32-bit feature ids, the label map's classes).
    auto at_most = [&](const char* key, std::uint64_t v, std::uint64_t most) {
      if (v > most)
        throw DataError(path, 0, fmt::format("metadata \"{}\" is {}, more than a model has (at most {})",
                                             key, v, most));
    };
    at_most("features", d.problem.features, std::numeric_limits<std::uint32_t>::max());
    at_most("users", d.problem.users, std::numeric_limits<std::uint32_t>::max());
    at_most("items", d.problem.items, std::numeric_limits<std::uint32_t>::max());
    at_most("classes", d.problem.classes, LabelMap::kMaxClasses);
    d.problem.target_mean = std::stod(get("target_mean"));
    const std::string& layout = get("layout");
    bool known = false;
    for (Layout l : {Layout::sparse, Layout::dense, Layout::ratings, Layout::dense_u8})
      if (layout == to_string(l)) d.problem.layout = l, known = true;
    if (!known) throw DataError(path, 0, fmt::format("metadata \"layout\" is \"{}\"", layout));
    const std::string& kind = get("labels");
    const LabelKind k = kind == "binary"       ? LabelKind::binary
                        : kind == "multiclass" ? LabelKind::multiclass
                        : kind == "real"       ? LabelKind::real
                                               : throw DataError(path, 0, fmt::format(
                                                     "metadata \"labels\" is \"{}\"", kind));
    d.labels = LabelMap::restore(k, nlohmann::json::parse(get("label_values")).get<std::vector<float>>(),
                                 get("sign_convention") == "true");
    d.outputs = whole("outputs");
    d.output = get("output");
    const auto f = nlohmann::json::parse(get("data_fingerprint"));
    d.data = {f.at("rows").get<std::uint64_t>(), f.at("cols").get<std::uint64_t>(),
              f.at("nnz").get<std::uint64_t>(), f.at("hash").get<std::uint64_t>()};
    d.epochs = static_cast<std::uint32_t>(whole("epochs"));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw DataError(path, 0, fmt::format("the model's metadata does not read: {}", e.what()));
  }
  return d;
}

void write_model_file(const ModelDescription& d, std::span<const ShapedTensor> tensors,
                      const std::string& path) {
  // The F32 tensors first, then the F16 ones, so that every tensor starts at a
  // multiple of its element's size (safetensors' own writer orders them so).
  std::vector<const ShapedTensor*> order;
  for (const auto& t : tensors)
    if (!t.half) order.push_back(&t);
  for (const auto& t : tensors)
    if (t.half) order.push_back(&t);
  nlohmann::ordered_json header;
  header["__metadata__"] = model_metadata(d);
  std::uint64_t offset = 0;
  for (const ShapedTensor* p : order) {
    const ShapedTensor& t = *p;
    std::vector<std::size_t> shape = t.shape.empty() ? std::vector<std::size_t>{t.source.size} : t.shape;
    std::uint64_t count = 1;
    for (auto s : shape) count *= s;
    HOGWILD_ENFORCE_EQ(count, std::uint64_t{t.source.size});
    const std::uint64_t width = t.half ? 2 : 4;
    header[t.source.name] = {{"dtype", t.half ? "F16" : "F32"},
                             {"shape", shape},
                             {"data_offsets", {offset, offset + width * count}}};
    offset += width * count;
  }
  std::string text = detail::json_text(header);
  text.append((8 - text.size() % 8) % 8, ' ');  // the tensors 8-byte aligned, as safetensors pads
  detail::OutputFile out(path, false);
  const std::uint64_t n = text.size();
  out.write(&n, sizeof n);
  out.write(text);
  std::vector<float> chunk;
  std::vector<std::uint16_t> halves;
  for (const ShapedTensor* p : order)
    for (std::size_t begin = 0; begin < p->source.size; begin += kCheckpointChunkFloats) {
      const ShapedTensor& t = *p;
      const std::size_t count = std::min(kCheckpointChunkFloats, t.source.size - begin);
      chunk.resize(count);
      t.source.read(begin, count, chunk.data());
      if (!t.half) {
        out.write(chunk.data(), count * sizeof(float));
        continue;
      }
      // Each value was a half before it was read as a float: exact both ways.
      halves.resize(count);
      for (std::size_t i = 0; i < count; ++i) halves[i] = detail::float_to_half(chunk[i]);
      out.write(halves.data(), count * sizeof(std::uint16_t));
    }
  out.commit();
}

std::vector<float> read_model_tensor(const ModelFileHeader& h, const ModelFileTensor& t) {
  const int fd = *h.file;
  const std::string& path = h.name;
  const std::size_t width = dtype_bytes(t.dtype);
  const std::size_t count = (t.end - t.begin) / width;
  std::vector<float> out(count);
  if (width == 4) {
    read_exactly(fd, h.data_offset + t.begin, out.data(), count * 4, path);
  } else {
    std::vector<std::uint16_t> halves(count);
    read_exactly(fd, h.data_offset + t.begin, halves.data(), count * 2, path);
    for (std::size_t i = 0; i < count; ++i) out[i] = detail::half_to_float(halves[i]);
  }
  return out;
}

}  // namespace hogwild
