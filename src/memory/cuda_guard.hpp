// CUDA does not survive fork: a child forked after its parent initialised CUDA gets
// undefined behaviour from its first CUDA call (CUDA_ERROR_NOT_INITIALIZED at best).
// Every CUDA entry point of the library asks this guard first, so that such a
// child gets a ConfigError saying what happened and what to do instead, and the
// process that initialises CUDA records itself here. Host code only: it is tested
// on machines without a GPU.
#pragma once

#include <string_view>
#include <sys/types.h>

namespace hogwild::detail {

// Called by the process that initialised CUDA, once the driver answered.
void note_cuda_initialised() noexcept;
// The process that initialised CUDA in this process's ancestry (0: none). A forked
// child inherits its parent's value, which is how it knows.
pid_t cuda_initialised_by() noexcept;
// Throws ConfigError naming `what` (the CUDA work asked for) when this process is a
// fork of a process that had initialised CUDA; returns otherwise.
void check_cuda_usable(std::string_view what);

}  // namespace hogwild::detail
