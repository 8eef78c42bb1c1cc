// Built without Gloo (libgloo-dev or libhiredis-dev missing, or -Dgloo=disabled):
// the factory says so.
#include "comm/gloo.hpp"

namespace hogwild {

std::unique_ptr<Communicator> make_gloo_communicator(const GlooOptions&, unsigned, unsigned) {
  throw ConfigError(
      "this hogwild was built without Gloo: install libgloo-dev and libhiredis-dev "
      "(scripts/install-deps.sh) and build again");
}

bool gloo_built() noexcept { return false; }

bool gloo_run_id_used(const GlooOptions&, unsigned) { return false; }

bool gloo_erase_run(const GlooOptions&, unsigned, unsigned) { return true; }

}  // namespace hogwild
