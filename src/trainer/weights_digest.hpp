// weights_sha256: one run's final weights as a SHA-256 digest, so that a claim that
// two runs ended with the same weights (a seed's reproducibility, a simulated run
// against a real one, a resumed run against a straight one) can be checked from
// their summaries. The bytes digested, tensor by tensor in ascending order of name
// (byte-wise): the name, a zero byte, the number of values as a 64-bit little-endian
// integer, then the values as 32-bit little-endian IEEE floats (fp16 factors
// widened, as every reader of the weights sees them). AdaGrad's state is not part of
// it. So the digest of a model file's tensors, or of hogwild.Result.weights, is the
// same computed anywhere (docs/CLI.md, "The summary").
#pragma once

#include <string>

#include "hogwild/param_set.hpp"

namespace hogwild::detail {

// Lower-case hex. Reads the tensors where they live (host or device memory); call
// it when nothing writes them any more.
std::string weights_sha256(const ParamSet& params);

}  // namespace hogwild::detail
