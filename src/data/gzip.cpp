// File bytes in and out, gzip transparently.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/file_io.hpp"
#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"

namespace hogwild {

namespace detail {

namespace {

std::string errno_text() {
  return std::strerror(errno);
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

int open_for_reading(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError("cannot open " + path + ": " + errno_text());
  return fd;
}

// Reads up to n bytes at the current position; fewer only at end of file.
std::size_t read_some(int fd, char* out, std::size_t n, const std::string& path) {
  std::size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, out + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw IoError("cannot read " + path + ": " + errno_text());
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return got;
}

// inflateInit2 with 16 + MAX_WBITS: gzip wrapper only (a raw zlib stream is not a
// format any of our files come in).
struct Inflater {
  z_stream zs{};
  explicit Inflater(const std::string& name) {
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
      throw ResourceError("cannot start inflating " + name + ": out of memory");
  }
  ~Inflater() { inflateEnd(&zs); }
};

[[noreturn]] void inflate_failed(int rc, const z_stream& zs, const std::string& name) {
  if (rc == Z_MEM_ERROR) throw ResourceError("out of memory while inflating " + name);
  throw DataError(name, 0,
                  std::string("corrupt gzip stream (") + (zs.msg ? zs.msg : "unknown error") + ")");
}

}  // namespace

bool is_gzip(std::string_view b) noexcept {
  return b.size() >= 2 && static_cast<unsigned char>(b[0]) == 0x1f &&
         static_cast<unsigned char>(b[1]) == 0x8b;
}

std::string inflate_gzip(std::string_view in, const std::string& name) {
  Inflater inf(name);
  z_stream& zs = inf.zs;
  // The last 4 bytes hold the size of the last member mod 2^32: a good first guess
  // for one member. A forged one must not make us reserve gigabytes up front, so it
  // is trusted only up to 16:1 (text compresses 3 to 10:1); past that we grow.
  std::size_t guess = in.size() * 4;
  if (in.size() >= 18) {
    std::uint32_t isize;
    std::memcpy(&isize, in.data() + in.size() - 4, 4);  // little-endian by the gzip spec
    guess = std::clamp<std::size_t>(isize, in.size(), in.size() * 16);
  }
  std::string out(std::max<std::size_t>(guess, 4096), '\0');
  std::size_t in_pos = 0, out_pos = 0;
  for (;;) {
    if (out_pos == out.size()) out.resize(out.size() * 2);
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + in_pos));
    zs.avail_in = static_cast<uInt>(std::min<std::size_t>(in.size() - in_pos, UINT_MAX));
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + out_pos);
    zs.avail_out = static_cast<uInt>(std::min<std::size_t>(out.size() - out_pos, UINT_MAX));
    const uInt avail_in = zs.avail_in, avail_out = zs.avail_out;
    int rc = inflate(&zs, Z_NO_FLUSH);
    in_pos += avail_in - zs.avail_in;
    out_pos += avail_out - zs.avail_out;
    if (rc == Z_STREAM_END) {
      std::string_view rest = in.substr(in_pos);
      if (rest.empty()) break;
      // `cat a.gz b.gz` is a valid gzip file: carry on with the next member.
      if (is_gzip(rest)) {
        inflateReset(&zs);
        continue;
      }
      // Zero padding after the last member (tape blocks, some tools) is harmless.
      if (std::all_of(rest.begin(), rest.end(), [](char c) { return c == '\0'; })) break;
      throw DataError(name, 0, "unexpected bytes after the end of the gzip data");
    }
    if (rc == Z_BUF_ERROR && in_pos == in.size())
      throw DataError(name, 0, "truncated gzip stream (the file ends inside compressed data)");
    if (rc != Z_OK && rc != Z_BUF_ERROR) inflate_failed(rc, zs, name);
  }
  out.resize(out_pos);
  return out;
}

FileContent FileContent::read(const std::string& path) {
  FileContent c;
  {
    Fd f{open_for_reading(path)};
    struct stat st {};
    if (::fstat(f.fd, &st) != 0) throw IoError("cannot stat " + path + ": " + errno_text());
    if (S_ISDIR(st.st_mode)) throw IoError(path + ": is a directory");
    if (st.st_size == 0) return c;  // empty text: zero rows, the caller decides
  }
  c.map_ = MappedBuffer::map_file(path);
  std::string_view raw(reinterpret_cast<const char*>(c.map_->data()), c.map_->size());
  if (is_gzip(raw)) {
    c.inflated_ = inflate_gzip(raw, path);
    c.map_.reset();
    c.gzipped_ = true;
  }
  return c;
}

std::string read_head(const std::string& path, std::size_t n, bool* gzipped) {
  Fd f{open_for_reading(path)};
  std::string raw(std::max<std::size_t>(n, 2), '\0');
  raw.resize(read_some(f.fd, raw.data(), raw.size(), path));
  if (gzipped) *gzipped = is_gzip(raw);
  if (!is_gzip(raw)) {
    raw.resize(std::min(raw.size(), n));
    return raw;
  }
  Inflater inf(path);
  std::string out(n, '\0');
  inf.zs.next_out = reinterpret_cast<Bytef*>(out.data());
  inf.zs.avail_out = static_cast<uInt>(n);
  std::vector<char> buf(4096);
  std::copy(raw.begin(), raw.end(), buf.begin());
  std::size_t have = raw.size();
  while (inf.zs.avail_out > 0 && have > 0) {
    inf.zs.next_in = reinterpret_cast<Bytef*>(buf.data());
    inf.zs.avail_in = static_cast<uInt>(have);
    int rc = inflate(&inf.zs, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) break;
    if (rc != Z_OK && rc != Z_BUF_ERROR) inflate_failed(rc, inf.zs, path);
    // zlib keeps what it could not use yet in its window; feed the rest next time.
    std::size_t left = inf.zs.avail_in;
    std::memmove(buf.data(), buf.data() + (have - left), left);
    have = left + read_some(f.fd, buf.data() + left, buf.size() - left, path);
    if (have == left && rc == Z_BUF_ERROR) break;  // nothing new and no progress
  }
  out.resize(n - inf.zs.avail_out);
  return out;
}

// The temporary file being written (PendingTemporary). `g_pending_set` is cleared
// before the name changes and set after.
namespace {
char g_pending_tmp[4096];
volatile sig_atomic_t g_pending_set = 0;
}  // namespace

PendingTemporary::PendingTemporary(const std::string& path) noexcept {
  g_pending_set = 0;
  if (!path.empty() && path.size() < sizeof g_pending_tmp) {
    std::memcpy(g_pending_tmp, path.c_str(), path.size() + 1);
    g_pending_set = 1;
  }
}

PendingTemporary::~PendingTemporary() { g_pending_set = 0; }

void remove_pending_temporary() noexcept {
  if (g_pending_set) ::unlink(g_pending_tmp);
}

namespace {

// N of "/dev/fd/N", "/proc/self/fd/N" or "/proc/<this pid>/fd/N", else -1.
int descriptor_path(const std::string& p) {
  const std::string own = "/proc/" + std::to_string(::getpid()) + "/fd/";
  for (const std::string& prefix : {std::string("/dev/fd/"), std::string("/proc/self/fd/"), own}) {
    if (!p.starts_with(prefix) || p.size() == prefix.size() || p.size() > prefix.size() + 9) continue;
    const std::string digits = p.substr(prefix.size());
    if (digits.find_first_not_of("0123456789") == std::string::npos) return std::stoi(digits);
  }
  return -1;
}

}  // namespace

OutputTarget output_target(const std::string& path) {
  if (path == "-") return {OutputTarget::Kind::stream, STDOUT_FILENO, {}};
  std::string p = path;
  for (int hops = 0;; ++hops) {
    if (const int fd = descriptor_path(p); fd >= 0) {
      if (::fcntl(fd, F_GETFD) < 0)
        throw IoError(fmt::format("cannot write {}: descriptor {} is not open", path, fd));
      return {OutputTarget::Kind::stream, fd, {}};
    }
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) break;
    if (hops == 40)
      throw IoError(fmt::format("cannot write {}: too many levels of symbolic links", path));
    std::vector<char> buf(static_cast<std::size_t>(st.st_size > 0 ? st.st_size : 255) + 1);
    const ssize_t n = ::readlink(p.c_str(), buf.data(), buf.size());
    if (n < 0 || static_cast<std::size_t>(n) >= buf.size())
      throw IoError(fmt::format("cannot write {}: cannot read the link {}: {}", path, p,
                                errno_text()));
    const std::string to(buf.data(), static_cast<std::size_t>(n));
    const auto slash = p.rfind('/');
    p = to.starts_with('/') || slash == std::string::npos ? to : p.substr(0, slash + 1) + to;
  }
  struct stat st;
  if (::stat(p.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
    return {OutputTarget::Kind::in_place, -1, p};
  return {OutputTarget::Kind::replace, -1, p};
}

bool is_stdout(const std::string& path) {
  if (path.empty()) return false;
  const OutputTarget t = output_target(path);
  return t.kind == OutputTarget::Kind::stream && t.fd == STDOUT_FILENO;
}

std::string json_text(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::size_t remove_stale_temporaries(const std::string& file) noexcept {
  const auto slash = file.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : file.substr(0, slash + 1);
  const std::string stem = (slash == std::string::npos ? file : file.substr(slash + 1)) + ".tmp.";
  std::size_t removed = 0;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (!name.starts_with(stem) || name.size() == stem.size() || name.size() > stem.size() + 9)
      continue;
    const std::string digits = name.substr(stem.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // its writer lives
    // A writer holds a lock on its temporary while it writes: one of another machine
    // that shares the folder (its pid means nothing here) is left alone too.
    const std::string stale = (slash == std::string::npos ? "" : dir) + name;
    const int fd = ::open(stale.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) continue;
    const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (free && ::unlink(stale.c_str()) == 0) ++removed;
    ::close(fd);
  }
  ::closedir(d);
  return removed;
}

OutputFile::OutputFile(std::string path, bool gzip)
    : path_(std::move(path)),
      target_(output_target(path_)),
      tmp_(target_.kind == OutputTarget::Kind::replace
               ? target_.path + ".tmp." + std::to_string(::getpid())
               : ""),
      gzip_(gzip) {
  switch (target_.kind) {
    case OutputTarget::Kind::stream:
      std::fflush(nullptr);  // what stdio holds for the same descriptor goes first
      fd_ = target_.fd;
      own_fd_ = false;
      break;
    case OutputTarget::Kind::in_place:
      fd_ = ::open(target_.path.c_str(), O_WRONLY | O_CLOEXEC);
      break;
    case OutputTarget::Kind::replace:
      remove_stale_temporaries(target_.path);
      fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      // Held until the descriptor closes: remove_stale_temporaries leaves it alone.
      if (fd_ >= 0) (void)::flock(fd_, LOCK_EX | LOCK_NB);
      break;
  }
  if (fd_ < 0) throw IoError("cannot create " + path_ + ": " + errno_text());
  if (gzip_) {
    if (deflateInit2(&zs_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK) {
      if (own_fd_) ::close(fd_);
      if (!tmp_.empty()) ::unlink(tmp_.c_str());
      throw ResourceError("cannot start compressing " + path_ + ": out of memory");
    }
    zbuf_.resize(1 << 18);
  }
}

OutputFile::~OutputFile() {
  if (gzip_) deflateEnd(&zs_);
  if (fd_ >= 0 && own_fd_) ::close(fd_);
  if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

void OutputFile::fail(const std::string& doing, int err) {
  if (fd_ >= 0 && own_fd_) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  const std::string msg = fmt::format("cannot {} {}: {}", doing, path_, std::strerror(err));
  if (is_out_of_space(err))
    throw ResourceError(msg + (tmp_.empty() ? "" : "; the previous version of the file, if any, "
                                                   "is intact"));
  if (err == EPIPE) throw PipeError(msg);
  throw IoError(msg);
}

int memory_file(std::string_view bytes, const std::string& what, bool inherited) {
  const int fd = ::memfd_create("hogwild", inherited ? 0 : MFD_CLOEXEC);
  const int err = fd < 0 ? errno : write_all(fd, bytes.data(), bytes.size());
  if (err == 0) return fd;
  if (fd >= 0) ::close(fd);
  throw ResourceError(fmt::format("cannot hold {} in memory: {}", what, std::strerror(err)));
}

int write_all(int fd, const void* data, std::size_t n) noexcept {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? errno : ENOSPC;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return 0;
}

void OutputFile::write_raw(const void* data, std::size_t n) {
  if (const int err = write_all(fd_, data, n)) fail("write", err);
}

void OutputFile::deflate_some(int flush) {
  int rc;
  do {
    zs_.next_out = zbuf_.data();
    zs_.avail_out = static_cast<uInt>(zbuf_.size());
    rc = deflate(&zs_, flush);
    HOGWILD_ENFORCE(rc != Z_STREAM_ERROR, "deflate state clobbered");
    write_raw(zbuf_.data(), zbuf_.size() - zs_.avail_out);
  } while (zs_.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
}

void OutputFile::write(const void* data, std::size_t n) {
  written_ += n;
  if (!gzip_) return write_raw(data, n);
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    std::size_t step = std::min<std::size_t>(n, UINT_MAX);
    zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(p));
    zs_.avail_in = static_cast<uInt>(step);
    deflate_some(Z_NO_FLUSH);
    p += step;
    n -= step;
  }
}

void OutputFile::commit() {
  if (gzip_) {
    zs_.next_in = nullptr;
    zs_.avail_in = 0;
    deflate_some(Z_FINISH);
  }
  if (tmp_.empty()) {  // a stream or a special file: nothing to sync or rename
    if (own_fd_ && ::close(fd_) != 0) {
      const int err = errno;
      fd_ = -1;
      fail("write", err);
    }
    fd_ = -1;
    committed_ = true;
    return;
  }
  if (::fsync(fd_) != 0) fail("write", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("write", errno);
  if (::rename(tmp_.c_str(), target_.path.c_str()) != 0) fail("write", errno);
  committed_ = true;
  // The rename is durable only once the folder is on disk too.
  const auto slash = target_.path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : target_.path.substr(0, slash + 1);
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace detail

std::string read_file_maybe_gz(const std::string& path) {
  auto content = detail::FileContent::read(path);
  return std::string(content.text());
}

}  // namespace hogwild
