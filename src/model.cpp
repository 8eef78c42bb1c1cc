#include "hogwild/model.hpp"

#include "hogwild/error.hpp"

namespace hogwild {

// Byte rows (dense_u8) only for a model that reads them: the others would read
// RowView::value, which such rows leave null.
void Model::check_rows(const Dataset& data) const {
  if (data.layout() == Layout::dense_u8 && !reads_byte_rows())
    throw ConfigError("model " + name() + " reads float rows, and " + data.source() +
                      " holds bytes (dense-u8): pass Dataset::widened() (the trainer "
                      "does this itself)");
}

void require_feature_rows(const std::string& model, const Problem& problem) {
  if (problem.layout == Layout::ratings)
    throw ConfigError("model " + model + " needs feature rows (libsvm, IDX images, a cache of "
                      "them), and the training set holds rating triples (user item rating): "
                      "--model mf learns from those");
}

void Model::predict_rows(const ParamSet&, std::span<const RowView>, float*) const {
  throw ConfigError("model " + name() +
                    " does not predict rows (its class defines no outputs() and predict_rows)");
}

}  // namespace hogwild
