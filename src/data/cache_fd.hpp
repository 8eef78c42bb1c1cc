// A dataset handed to another process as a descriptor: the binary cache's bytes in
// a memory file (memfd), which the receiver maps read-only. How a worker started by
// the fork server gets its rows: the parent checked them, so the file carries no
// section checksums and the worker checks its structure (header, sections) alone.
#pragma once

#include <string>

#include "hogwild/dataset.hpp"

namespace hogwild::detail {

// A close-on-exec memory file holding `d` in the cache format; the caller owns it.
int cache_memfd(const Dataset& d);
// The dataset in memory file `fd` (from cache_memfd), named `name` in messages.
Dataset open_cache_fd(int fd, const std::string& name);

}  // namespace hogwild::detail
