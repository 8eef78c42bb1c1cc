// A library loaded at run time (NCCL, cuBLAS): libhogwild then loads on machines
// without it, and only a run that needs it is told why not. The first of the names
// that loads is kept for the process's life (never closed: its entry points stay
// valid); failure() says what went wrong, the first missing entry point included.
#pragma once

#include <dlfcn.h>

#include <fmt/format.h>
#include <initializer_list>
#include <string>
#include <type_traits>

namespace hogwild::detail {

class DynamicLibrary {
 public:
  explicit DynamicLibrary(std::initializer_list<const char*> names) {
    for (const char* name : names)
      if (!handle_) handle_ = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!handle_) failure_ = dlerror();
  }
  // fn = the entry point `name`, or null (and failure() says so).
  template <class Fn>
  void get(const char* name, Fn& fn) {
    fn = handle_ ? reinterpret_cast<std::remove_reference_t<Fn>>(dlsym(handle_, name)) : nullptr;
    if (handle_ && !fn && failure_.empty()) failure_ = fmt::format("it has no {}", name);
  }
  // Empty when the library and every entry point asked for were found.
  const std::string& failure() const noexcept { return failure_; }

 private:
  void* handle_ = nullptr;
  std::string failure_;
};

}  // namespace hogwild::detail
