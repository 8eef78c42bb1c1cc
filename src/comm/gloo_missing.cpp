// Built without Gloo (libgloo-dev or libhiredis-dev missing, or -Dgloo=disabled):
// the factory says so.
#include "comm/gloo.hpp"
#include "comm/nccl.hpp"

namespace hogwild {

namespace {
[[noreturn]] void missing() {
  throw ConfigError(
      "this hogwild was built without Gloo: install libgloo-dev and libhiredis-dev "
      "(scripts/install-deps.sh) and build again");
}
}  // namespace

std::unique_ptr<Communicator> make_gloo_communicator(const GlooOptions&, unsigned, unsigned) {
  missing();
}

void detail::store_exchange_nccl_id(const GlooOptions&, unsigned, char (&)[128],
                                    const std::function<void(char (&)[128])>&,
                                    const std::atomic<std::int32_t>*) {
  missing();
}

bool gloo_built() noexcept { return false; }

std::vector<JoinedNode> gloo_join_nodes(const GlooOptions&, unsigned, unsigned, const std::string&,
                                        const std::atomic<std::int32_t>*) {
  missing();
}

void gloo_join_failed(const GlooOptions&, unsigned, const std::string&) noexcept {}

void gloo_leave_join(const GlooOptions&, unsigned, unsigned) noexcept {}

bool gloo_run_id_used(const GlooOptions&, unsigned) { return false; }

bool gloo_erase_run(const GlooOptions&, unsigned, unsigned) { return true; }

}  // namespace hogwild
