// MappedBuffer: the one place where the data layer calls mmap. Anonymous shared
// mappings hold datasets parsed in memory (forked workers inherit them without a
// copy); file mappings hold binary caches (the page cache is the only copy).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "hogwild/dataset.hpp"
#include "hogwild/error.hpp"

namespace hogwild {

namespace {

std::string errno_text() {
  return std::strerror(errno);
}

// mmap refuses a length of 0; an empty dataset still gets one page, so data() is
// never null and seal()/munmap need no special case.
std::size_t map_length(std::size_t bytes) {
  return std::max<std::size_t>(bytes, 1);
}

// Closes the descriptor on every path out of map_file.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::shared_ptr<MappedBuffer> MappedBuffer::anonymous(std::size_t bytes) {
  void* p =
      ::mmap(nullptr, map_length(bytes), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw ResourceError("cannot map " + std::to_string(bytes) +
                        " bytes of shared memory: " + errno_text());
  return std::shared_ptr<MappedBuffer>(new MappedBuffer(static_cast<std::byte*>(p), bytes));
}

std::shared_ptr<MappedBuffer> MappedBuffer::map_file(const std::string& path) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) throw IoError("cannot open " + path + ": " + errno_text());
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw IoError("cannot stat " + path + ": " + errno_text());
  if (!S_ISREG(st.st_mode)) throw IoError(path + ": not a regular file");
  if (st.st_size == 0) throw IoError(path + ": empty file");
  // MAP_SHARED: every process that maps the file shares the page cache. A file
  // truncated under the mapping would fault (SIGBUS); our writers never do that,
  // they write a new file and rename it over the old one.
  auto size = static_cast<std::size_t>(st.st_size);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, f.fd, 0);
  if (p == MAP_FAILED) {
    if (errno == ENOMEM)
      throw ResourceError("cannot map " + path + " (" + std::to_string(size) +
                          " bytes): " + errno_text());
    throw IoError("cannot map " + path + ": " + errno_text());
  }
  return std::shared_ptr<MappedBuffer>(new MappedBuffer(static_cast<std::byte*>(p), size));
}

std::shared_ptr<MappedBuffer> MappedBuffer::map_memory_file(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size == 0) {
    const std::string why = st.st_size == 0 ? "empty" : errno_text();
    ::close(fd);
    throw ResourceError("cannot map a memory file: " + why);
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const std::string why = errno_text();
    ::close(fd);
    throw ResourceError("cannot map a memory file of " + std::to_string(size) + " bytes: " + why);
  }
  return std::shared_ptr<MappedBuffer>(new MappedBuffer(static_cast<std::byte*>(p), size, fd));
}

MappedBuffer::~MappedBuffer() {
  if (fd_ >= 0) ::close(fd_);
  ::munmap(data_, map_length(size_));
}

void MappedBuffer::release(std::size_t begin, std::size_t end) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  begin = (begin + page - 1) / page * page;
  end = std::min(end, size_) / page * page;
  if (begin >= end) return;
  // MADV_REMOVE frees the shared memory behind the range, which MADV_DONTNEED
  // would only unmap from this process.
  if (::madvise(data_ + begin, end - begin, MADV_REMOVE) != 0)
    throw ResourceError("cannot release " + std::to_string(end - begin) +
                        " bytes of shared memory: " + errno_text());
}

void MappedBuffer::seal() {
  if (::mprotect(data_, map_length(size_), PROT_READ) != 0)
    throw ResourceError("cannot make a " + std::to_string(size_) +
                        "-byte mapping read-only: " + errno_text());
}

}  // namespace hogwild
