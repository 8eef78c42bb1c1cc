#include "hogwild/checkpoint.hpp"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "data/file_io.hpp"
#include "hogwild/error.hpp"
#include "hogwild/metrics.hpp"
#include "hogwild/options.hpp"
#include "hogwild/trainer.hpp"
#include "modes/mode_def.hpp"

namespace hogwild {

namespace {

static_assert(std::endian::native == std::endian::little, "checkpoints are little-endian");

constexpr char kMagic[8] = {'H', 'W', 'C', 'K', 'P', 'T', '0', '1'};
constexpr std::size_t kHeaderBytes = 8 + 4 + 4 + 8;
constexpr std::size_t kMaxWorkers = 1024;  // as TrainConfig::validate
constexpr std::size_t kMaxName = 4096;

std::uint32_t crc(std::uint32_t c, const void* p, std::size_t n) {
  const auto* b = static_cast<const Bytef*>(p);
  while (n > 0) {  // zlib takes 32-bit lengths
    const auto chunk = static_cast<uInt>(std::min<std::size_t>(n, 1u << 30));
    c = static_cast<std::uint32_t>(crc32(c, b, chunk));
    b += chunk;
    n -= chunk;
  }
  return c;
}

// The checkpoint's bytes, in order, through `Out` (Out::append(data, n)), with the
// CRC-32 of everything before it at the end. The payload's size is computed first,
// so that a file is written front to back in one pass and a tensor read from where
// it lives (TensorSource) a chunk at a time: the writer never holds a copy of the
// weights.
template <class Out>
class Writer {
 public:
  explicit Writer(Out& out) : out_(out) {}
  void raw(const void* p, std::size_t n) {
    crc_ = crc(crc_, p, n);
    section_crc_ = crc(section_crc_, p, n);
    out_.append(static_cast<const char*>(p), n);
  }
  // A section: its length, its `bytes` (what is written until end_section), and the
  // CRC-32 of both, so that a reader can check it before reading what it holds.
  void begin_section(std::uint64_t bytes) {
    section_crc_ = 0;
    put(bytes);
    section_end_ = out_.size() + bytes;
  }
  void end_section() {
    HOGWILD_ENFORCE_EQ(out_.size(), section_end_);
    const std::uint32_t sum = section_crc_;  // raw() goes on updating section_crc_
    put(sum);
  }
  template <class T>
  void put(const T& v) {
    raw(&v, sizeof v);
  }
  void str(const std::string& s) {
    put(static_cast<std::uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  void finish() {
    const std::uint32_t sum = crc_;
    out_.append(reinterpret_cast<const char*>(&sum), sizeof sum);
  }

 private:
  Out& out_;
  std::uint32_t crc_ = 0, section_crc_ = 0;
  std::size_t section_end_ = 0;
};

// The payload's sections (version 3): each is its length (8 bytes), its bytes and
// the CRC-32 of both (4), so that a flipped bit is found in the section it is in.
constexpr std::uint64_t kSectionFrame = 8 + 4;

std::uint64_t options_bytes(const Checkpoint& c) {
  std::uint64_t n = 4;
  for (auto& [k, v] : c.config) n += 8 + k.size() + v.size();
  return n;
}

std::uint64_t state_bytes(const Checkpoint& c) {
  std::uint64_t n = 4 * 8 + 4 + 8 + 4;
  for (auto& s : c.workers) n += 4 + 4 + 8 + 8 + 8 + 4 + 8 * s.epoch_loss.size();
  return n + 4;  // the tensor count
}

std::uint64_t tensor_bytes(const std::string& name, std::uint64_t values) {
  return 4 + name.size() + 8 + 4 * values;
}

std::uint64_t payload_bytes(const Checkpoint& c, std::span<const TensorSource> more) {
  std::uint64_t n = 2 * kSectionFrame + options_bytes(c) + state_bytes(c);
  for (auto& t : c.tensors) n += kSectionFrame + tensor_bytes(t.name, t.values.size());
  for (auto& t : more) n += kSectionFrame + tensor_bytes(t.name, t.size);
  return n;
}

template <class Out>
void emit(const Checkpoint& c, std::span<const TensorSource> more, Out& out) {
  Writer<Out> w(out);
  w.raw(kMagic, sizeof kMagic);
  w.put(kCheckpointVersion);
  w.put(std::uint32_t{0});
  w.put(payload_bytes(c, more));
  const std::size_t written_before = out.size();
  w.begin_section(options_bytes(c));
  w.put(static_cast<std::uint32_t>(c.config.size()));
  for (auto& [k, v] : c.config) {
    w.str(k);
    w.str(v);
  }
  w.end_section();
  w.begin_section(state_bytes(c));
  for (std::uint64_t v : {c.data.rows, c.data.cols, c.data.nnz, c.data.hash}) w.put(v);
  w.put(c.restarts);
  w.put(c.train_seconds);
  w.put(static_cast<std::uint32_t>(c.workers.size()));
  for (auto& s : c.workers) {
    w.put(s.epochs_done);
    w.put(s.epoch);
    w.put(s.position);
    w.put(s.samples);
    w.put(s.loss);
    w.put(static_cast<std::uint32_t>(s.epoch_loss.size()));
    for (double l : s.epoch_loss) w.put(l);
  }
  w.put(static_cast<std::uint32_t>(c.tensors.size() + more.size()));
  w.end_section();
  for (auto& t : c.tensors) {
    w.begin_section(tensor_bytes(t.name, t.values.size()));
    w.str(t.name);
    w.put(static_cast<std::uint64_t>(t.values.size()));
    w.raw(t.values.data(), t.values.size() * sizeof(float));
    w.end_section();
  }
  std::vector<float> chunk;
  for (auto& t : more) {
    w.begin_section(tensor_bytes(t.name, t.size));
    w.str(t.name);
    w.put(static_cast<std::uint64_t>(t.size));
    chunk.resize(std::min(t.size, kCheckpointChunkFloats));
    for (std::size_t at = 0; at < t.size; at += chunk.size()) {
      const std::size_t n = std::min(chunk.size(), t.size - at);
      t.read(at, n, chunk.data());
      w.raw(chunk.data(), n * sizeof(float));
    }
    w.end_section();
  }
  HOGWILD_ENFORCE_EQ(out.size() - written_before, payload_bytes(c, more));
  w.finish();
}

// Into memory (serialize_checkpoint).
class StringOut {
 public:
  explicit StringOut(std::size_t reserve) { s_.reserve(reserve); }
  void append(const char* p, std::size_t n) { s_.append(p, n); }
  std::size_t size() const noexcept { return s_.size(); }
  std::string take() { return std::move(s_); }

 private:
  std::string s_;
};

// Into a file through a 1 MiB buffer (the records are many small fields); larger
// pieces (a tensor's chunk) go straight through.
class FileOut {
 public:
  explicit FileOut(const std::string& path) : file_(path, false) { buf_.reserve(kBuffer); }
  void append(const char* p, std::size_t n) {
    size_ += n;
    if (buf_.size() + n > kBuffer) flush();
    if (n >= kBuffer) return file_.write(p, n);
    buf_.append(p, n);
  }
  std::size_t size() const noexcept { return size_; }
  void commit() {
    flush();
    file_.commit();
  }

 private:
  void flush() {
    if (!buf_.empty()) file_.write(buf_);
    buf_.clear();
  }
  static constexpr std::size_t kBuffer = 1 << 20;
  detail::OutputFile file_;
  std::string buf_;
  std::size_t size_ = 0;
};

// Reads the payload; every length is checked against what is left before use.
class Reader {
 public:
  Reader(std::string_view b, const std::string& name, std::string section = {})
      : b_(b), name_(name), section_(std::move(section)) {}
  template <class T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, b_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  std::string str(const char* what) {
    const auto n = get<std::uint32_t>(what);
    if (n > kMaxName) throw fail(fmt::format("{} of {} bytes is too long", what, n));
    need(n, what);
    std::string s(b_.substr(at_, n));
    at_ += n;
    return s;
  }
  std::vector<float> floats(const char* what) {
    const auto n = get<std::uint64_t>(what);
    if (n > left() / sizeof(float))
      throw fail(fmt::format("{} declares {} values but only {} bytes remain", what, n, left()));
    std::vector<float> v(n);
    if (n) std::memcpy(v.data(), b_.data() + at_, n * sizeof(float));  // data() may be null
    at_ += n * sizeof(float);
    return v;
  }
  // A count of records of at least `min_bytes` each, checked against what is left.
  std::uint32_t count(const char* what, std::size_t min_bytes, std::size_t max) {
    const auto n = get<std::uint32_t>(what);
    if (n > max || n > left() / min_bytes)
      throw fail(fmt::format("{} {} is impossible here ({} bytes remain)", what, n, left()));
    return n;
  }
  std::size_t left() const { return b_.size() - at_; }
  DataError fail(const std::string& what) const {
    return DataError(name_, 0, section_.empty() ? what : fmt::format("the {} section: {}", section_, what));
  }

 private:
  void need(std::size_t n, const char* what) const {
    if (n > left()) throw fail(fmt::format("truncated in {}", what));
  }
  std::string_view b_;
  const std::string& name_;
  std::string section_;  // where it reads, for messages ("" in a version 2 file)
  std::size_t at_ = 0;
};

void read_options(Reader& r, Checkpoint& c) {
  const auto nconfig = r.count("option count", 8, 1024);
  for (std::uint32_t i = 0; i < nconfig; ++i) {
    std::string k = r.str("option name");
    c.config.emplace_back(std::move(k), r.str("option value"));
  }
}

void read_state(Reader& r, Checkpoint& c) {
  c.data.rows = r.get<std::uint64_t>("data fingerprint");
  c.data.cols = r.get<std::uint64_t>("data fingerprint");
  c.data.nnz = r.get<std::uint64_t>("data fingerprint");
  c.data.hash = r.get<std::uint64_t>("data fingerprint");
  c.restarts = r.get<std::uint32_t>("restart count");
  c.train_seconds = r.get<double>("training time");
  const auto nworkers = r.count("worker count", 36, kMaxWorkers);
  if (nworkers == 0) throw r.fail("no workers");
  for (std::uint32_t i = 0; i < nworkers; ++i) {
    WorkerState s;
    s.epochs_done = r.get<std::uint32_t>("worker state");
    s.epoch = r.get<std::uint32_t>("worker state");
    s.position = r.get<std::uint64_t>("worker state");
    s.samples = r.get<std::uint64_t>("worker state");
    s.loss = r.get<double>("worker state");
    const auto nloss = r.count("epoch loss count", sizeof(double), 1000000);
    for (std::uint32_t e = 0; e < nloss; ++e) s.epoch_loss.push_back(r.get<double>("epoch loss"));
    c.workers.push_back(s);
  }
}

void read_tensor(Reader& r, Checkpoint& c) {
  NamedTensor t;
  t.name = r.str("tensor name");
  t.values = r.floats("tensor values");
  c.tensors.push_back(std::move(t));
}

// A section's name for messages: "options", "training state", "tensor 2 ('W1')"
// (its name where the bytes hold a printable one).
std::string section_label(std::size_t k, std::string_view bytes) {
  if (k == 0) return "options";
  if (k == 1) return "training state";
  std::string label = fmt::format("tensor {}", k - 1);
  std::uint32_t n = 0;
  if (bytes.size() >= 4) std::memcpy(&n, bytes.data(), 4);
  if (bytes.size() >= 4 && n > 0 && n <= 64 && n <= bytes.size() - 4) {
    const std::string_view name = bytes.substr(4, n);
    if (std::all_of(name.begin(), name.end(), [](char ch) { return ch >= 0x20 && ch < 0x7f; }))
      label += fmt::format(" ('{}')", name);
  }
  return label;
}

template <class T>
std::uint32_t crc_of(std::uint32_t c, std::span<const T> s, std::size_t max_bytes, bool tail) {
  const std::size_t bytes = std::min(s.size_bytes(), max_bytes);
  const auto* p = reinterpret_cast<const char*>(s.data());
  return crc(c, tail ? p + s.size_bytes() - bytes : p, bytes);
}

// crc_of every one of d's values as floats. A dense_u8 set's pixels are hashed as
// the floats they stand for (byte_value), a chunk at a time, so its fingerprint is
// its widened() copy's, and that of the same IDX files read as floats: a checkpoint
// of either resumes with the other.
std::uint32_t crc_of_values(std::uint32_t c, const Dataset& d) {
  if (d.layout() != Layout::dense_u8) return crc_of(c, d.values(), SIZE_MAX, false);
  const auto pixels = d.pixels();
  std::vector<float> values(std::size_t{1} << 16);
  for (std::size_t at = 0; at < pixels.size(); at += values.size()) {
    const std::size_t n = std::min(values.size(), pixels.size() - at);
    for (std::size_t i = 0; i < n; ++i) values[i] = byte_value(pixels[at + i]);
    c = crc_of(c, std::span<const float>(values.data(), n), SIZE_MAX, false);
  }
  return c;
}

}  // namespace

DataFingerprint DataFingerprint::of(const Dataset& d) {
  DataFingerprint f{d.rows(), d.cols(), d.nnz(), 0};
  std::uint32_t c = crc_of(0, d.labels(), SIZE_MAX, false);
  c = crc_of(c, d.offsets(), SIZE_MAX, false);
  c = crc_of(c, d.indices(), SIZE_MAX, false);
  f.hash = crc_of_values(c, d);
  return f;
}

std::string DataFingerprint::describe() const {
  return fmt::format("{} rows, {} columns, {} non-zeros, hash {:08x}", rows, cols, nnz, hash);
}

std::uint32_t Checkpoint::epochs_done() const {
  if (workers.empty()) return 0;
  std::uint32_t m = UINT32_MAX;
  for (auto& w : workers) m = std::min(m, w.epochs_done);
  return m;
}

std::string serialize_checkpoint(const Checkpoint& c) {
  StringOut out(kHeaderBytes + payload_bytes(c, {}) + 4);
  emit(c, {}, out);
  return out.take();
}

Checkpoint parse_checkpoint(std::string_view b, const std::string& name) {
  auto fail = [&](const std::string& what) { return DataError(name, 0, what); };
  if (b.size() < sizeof kMagic || std::memcmp(b.data(), kMagic, sizeof kMagic) != 0)
    throw fail("not a hogwild checkpoint (bad magic)");
  if (b.size() < kHeaderBytes + 4)
    throw fail(fmt::format("truncated: {} bytes, less than a header", b.size()));
  std::uint32_t version, reserved;
  std::uint64_t payload;
  std::memcpy(&version, b.data() + 8, sizeof version);
  std::memcpy(&reserved, b.data() + 12, sizeof reserved);
  std::memcpy(&payload, b.data() + 16, sizeof payload);
  if (version != kCheckpointVersion && version != 2)
    throw fail(fmt::format("checkpoint format version {}, this build reads 2 and {}", version,
                           kCheckpointVersion));
  if (reserved != 0)
    throw fail(fmt::format("reserved header field is {:#x}, not 0 (written by a newer build?)",
                           reserved));
  if (payload != b.size() - kHeaderBytes - 4)
    throw fail(fmt::format("the header declares {} bytes of payload but the file has {} "
                           "(truncated or padded)", payload, b.size() - kHeaderBytes - 4));
  std::uint32_t stored;
  std::memcpy(&stored, b.data() + b.size() - 4, sizeof stored);
  const bool whole = stored == crc(0, b.data(), b.size() - 4);
  Checkpoint c;
  if (version == 2) {  // one checksum for the whole file
    if (!whole) throw fail("checksum mismatch (corrupt file)");
    Reader r(b.substr(kHeaderBytes, payload), name);
    read_options(r, c);
    read_state(r, c);
    const auto ntensors = r.count("tensor count", 12, 1024);
    for (std::uint32_t i = 0; i < ntensors; ++i) read_tensor(r, c);
    if (r.left() != 0) throw fail(fmt::format("{} unexpected bytes after the tensors", r.left()));
    return c;
  }
  // Each section against its own checksum before anything in it is read: a flipped
  // bit is named where it is.
  std::vector<std::pair<std::string_view, std::string>> sections;  // bytes, label
  std::string_view rest = b.substr(kHeaderBytes, payload);
  std::uint64_t at = kHeaderBytes;
  while (!rest.empty()) {
    const std::size_t k = sections.size();
    std::uint64_t length = 0;
    if (rest.size() >= 8) std::memcpy(&length, rest.data(), 8);
    if (rest.size() < kSectionFrame || length > rest.size() - kSectionFrame)
      throw fail(fmt::format("the {} section at byte {} declares {} bytes, more than the {} "
                             "left (corrupt or truncated file)", section_label(k, {}), at, length,
                             rest.size() < kSectionFrame ? 0 : rest.size() - kSectionFrame));
    const std::string_view bytes = rest.substr(8, length);
    std::uint32_t sum;
    std::memcpy(&sum, rest.data() + 8 + length, 4);
    std::string label = section_label(k, bytes);
    if (sum != crc(0, rest.data(), 8 + length))
      throw fail(fmt::format("checksum mismatch in the {} section (bytes {} to {}): corrupt file",
                             label, at, at + kSectionFrame + length));
    sections.emplace_back(bytes, std::move(label));
    rest.remove_prefix(kSectionFrame + length);
    at += kSectionFrame + length;
  }
  if (!whole)  // every section and the header check out: the file's own checksum does not
    throw fail("checksum mismatch in the file's checksum (its last 4 bytes): corrupt file");
  if (sections.size() < 2) throw fail("no training state section");
  auto reader = [&](std::size_t k) { return Reader(sections[k].first, name, sections[k].second); };
  auto done = [&](const Reader& r, std::size_t k) {
    if (r.left() != 0)
      throw fail(fmt::format("{} unexpected bytes at the end of the {} section", r.left(),
                             sections[k].second));
  };
  Reader options = reader(0);
  read_options(options, c);
  done(options, 0);
  Reader state = reader(1);
  read_state(state, c);
  const auto ntensors = state.get<std::uint32_t>("tensor count");
  done(state, 1);
  if (ntensors != sections.size() - 2)
    throw fail(fmt::format("the training state section counts {} tensors, the file holds {}",
                           ntensors, sections.size() - 2));
  for (std::size_t k = 2; k < sections.size(); ++k) {
    Reader r = reader(k);
    read_tensor(r, c);
    done(r, k);
  }
  return c;
}

Checkpoint read_checkpoint(const std::string& path) {
  if (detail::is_stream(path)) {  // `-`, a pipe: read whole, then checked as a file is
    const std::string name = detail::stream_name(path);
    return parse_checkpoint(detail::read_stream(path, name), name);
  }
  auto content = detail::FileContent::read(path);
  return parse_checkpoint(content.text(), path);
}

void write_checkpoint(const Checkpoint& c, const std::string& path) { write_checkpoint(c, {}, path); }

void write_checkpoint(const Checkpoint& c, std::span<const TensorSource> tensors,
                      const std::string& path) {
  FileOut out(path);  // an exception before commit() removes the temporary
  emit(c, tensors, out);
  out.commit();
}

std::vector<std::pair<std::string, std::string>> config_fingerprint(const TrainConfig& c) {
  std::vector<std::pair<std::string, std::string>> f;
  for (const auto& o : train_options()) {
    if (!o.resume_must_match || !o.mode.empty()) continue;
    // The workers that train (serial and dp: one process).
    f.emplace_back("--" + o.name, o.name == "workers" ? fmt::format("{}", is_parallel(c.mode) ? c.workers : 1u)
                                                      : o.get(c));
  }
  // The mode's fields that a resume must match (simulated's --simulate-access and
  // --cost-model: a resumed run on other costs was taken for the same study).
  for (const auto& o : detail::mode_def(c.mode).config_options())
    if (o.resume_must_match) f.emplace_back("--" + o.name, o.get(c));
  // The mode's own options that a resume must match, as the mode resolves them.
  for (const auto& o : detail::mode_def(c.mode).options())
    if (o.resume_must_match)
      f.emplace_back("--" + o.name, fmt::format("{}", detail::mode_option(c, o.name)));
  return f;
}

void check_resumable(const Checkpoint& c, const TrainConfig& config, const Dataset& train,
                     const std::string& path) {
  std::string then, now, hint;
  auto differ = [&](const std::string& what, const std::string& a, const std::string& b) {
    then += (then.empty() ? "" : ", ") + what + " " + a;
    now += (now.empty() ? "" : ", ") + what + " " + b;
    // --layout hot (or auto's probe) chose K from the data: the user gave no --hot-k.
    if (what == "--hot-k" && a != "0")
      hint = fmt::format(" (the run it continues kept a hot window of {} features, which --layout "
                         "hot chose or --hot-k gave: resume with --hot-k {})", a, a);
  };
  const auto mine = config_fingerprint(config);
  for (const auto& option : mine) {
    auto it = std::find_if(c.config.begin(), c.config.end(),
                           [&](auto& p) { return p.first == option.first; });
    // Those written before the simulated mode's fields were kept: not known, not
    // compared.
    if (it == c.config.end() && (option.first == "--simulate-access" || option.first == "--cost-model"))
      continue;
    // Checkpoints written before --partition existed trained contiguous slices, and
    // those written before --factors, fp32 factors.
    const std::string absent = option.first == "--partition" ? "contiguous"
                               : option.first == "--factors" ? "fp32"
                                                             : "(absent)";
    const std::string theirs = it == c.config.end() ? absent : it->second;
    if (theirs != option.second) differ(option.first, theirs, option.second);
  }
  const DataFingerprint data = DataFingerprint::of(train);
  if (!(data == c.data)) differ("training data of", c.data.describe(), data.describe());
  if (!then.empty())
    throw ConfigError(fmt::format("cannot resume from {}: it was written with {}; this run has {}{}",
                                  path, then, now, hint));
  std::uint32_t furthest = 0;  // workers run ahead of each other
  for (auto& w : c.workers) furthest = std::max(furthest, w.epochs_done);
  if (furthest >= config.epochs)
    throw ConfigError(fmt::format("cannot resume from {}: {} already completed {} epoch(s) and "
                                  "this run asks for --epochs {}; ask for more", path,
                                  c.workers.size() > 1 ? "a worker has" : "it has", furthest,
                                  config.epochs));
}

}  // namespace hogwild
