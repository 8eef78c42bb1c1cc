// libFuzzer target: the libsvm/svmlight text parser on arbitrary bytes. Any input
// either parses or throws hogwild::Error; a crash, leak or hang is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    hogwild::parse_libsvm({reinterpret_cast<const char*>(data), size}, "fuzz.svm",
                          hogwild::LibsvmOptions{1});
  } catch (const hogwild::Error&) {
  }
  return 0;
}
