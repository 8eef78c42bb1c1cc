// Model files: a trained model as it leaves the tool (--save-model), in the
// safetensors format that PyTorch, JAX and numpy users load weights from: 8 bytes
// of little-endian header length N, N bytes of a JSON header, then the tensors'
// raw little-endian bytes. The header names each tensor with its dtype (F32), shape
// and byte range; its "__metadata__" (strings only, as the format asks) holds what
// predicting needs without the training command:
//
//   format "hogwild-model", format_version "1", hogwild_version,
//   model ("logistic", "softmax", "mlp", "mf", or a registered model's name),
//   options (a JSON object: the model's options as the command line writes them,
//     {"bias": "true", "hidden": "256,128", "l2": "0", "rank": "10", ...}),
//   features, classes, layout, users, items, target_mean (the Problem),
//   labels ("binary", "multiclass", "real"), label_values (a JSON array of the
//     training labels, sorted: class k's label), sign_convention ("true": 0/1 or
//     -1/+1 labels, anything above 0 positive),
//   outputs (values a prediction has per row), output ("probabilities", "score"
//     or "value": Model::outputs),
//   data (the training data's fingerprint, as DataFingerprint::describe), epochs.
//
// A file is written whole or not at all (hogwild's one output writer: a temporary
// renamed into place), or streamed to standard output for "-".
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hogwild/checkpoint.hpp"
#include "hogwild/labels.hpp"
#include "hogwild/model.hpp"
#include "hogwild/problem.hpp"

namespace hogwild {

inline constexpr const char* kModelFileFormat = "hogwild-model";
inline constexpr std::uint32_t kModelFileVersion = 1;

// One tensor of a model file: where its bytes lie after the header.
struct ModelFileTensor {
  std::string name;
  std::string dtype;  // "F32" or "F16"
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0, end = 0;  // byte offsets past the header
};

// A model file's header, checked against the file's size: every tensor within
// the file, its bytes its shape's, no two overlapping.
struct ModelFileHeader {
  std::map<std::string, std::string> metadata;
  std::vector<ModelFileTensor> tensors;  // in the order of their bytes
  std::uint64_t data_offset = 0;         // 8 + the header's length
  std::uint64_t file_bytes = 0;
  std::string name;  // for messages: the path, or "standard input"
  std::shared_ptr<const int> file;  // its open descriptor, which read_model_tensor reads
};

// `path` may be `-` or a pipe: it is then read whole first (and inflated when
// gzip'ed). DataError naming `path` for a file that is not a safetensors file (too short, a
// header length past its end, a header that is not a JSON object, a tensor
// outside the file or of a dtype or shape that does not add up), or one without
// hogwild's metadata (another program's weights); IoError for an unreadable one.
ModelFileHeader read_model_header(const std::string& path);
// True when `head` (a file's first bytes) starts like a safetensors file.
bool looks_like_model_file(std::string_view head) noexcept;

// What a trained model is, beside its weights (the header's metadata).
struct ModelDescription {
  std::string model;
  std::map<std::string, std::string> options;  // model options, as the CLI writes them
  Problem problem;
  LabelMap labels;
  std::size_t outputs = 0;
  std::string output;  // "probabilities", "score", "value"
  DataFingerprint data;
  std::uint32_t epochs = 0;
};
std::map<std::string, std::string> model_metadata(const ModelDescription& d);
// The description a header's metadata gives; ConfigError for one that is missing
// a key or holds a value that does not read.
ModelDescription describe_model(const ModelFileHeader& header, const std::string& path);
// "probabilities" (outputs == classes), "score" or "value", for a model configured
// for `problem` that predicts `outputs` values a row.
std::string output_kind(std::size_t outputs, const LabelMap& labels);

// Writes `tensors` (each with its shape: TensorSpec::shape, or {size}) as a model
// file; a full disk is ResourceError and leaves any previous file as it was.
struct ShapedTensor {
  TensorSource source;  // name is the tensor's
  std::vector<std::size_t> shape;
  bool half = false;  // written as F16 (MF's factors under --factors fp16), else F32
};
void write_model_file(const ModelDescription& d, std::span<const ShapedTensor> tensors,
                      const std::string& path);

// A tensor's values as floats (F32, or F16 widened), read from the header's file.
std::vector<float> read_model_tensor(const ModelFileHeader& header, const ModelFileTensor& tensor);

}  // namespace hogwild
