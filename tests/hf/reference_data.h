// Readers for the reference data that HF transformers produced on the GPU
// machine (tests/hf/make_tiny_models.py, tests/hf/check_gguf_logits.py), and
// the prefill helper the cross-implementation tests share.
//
// Paths: the source tree is found through $BANYAN_SOURCE_DIR when set (the
// device machine runs the bundle from another checkout path), else the
// compile-time BANYAN_SOURCE_DIR.
#ifndef BANYAN_TESTS_HF_REFERENCE_DATA_H_
#define BANYAN_TESTS_HF_REFERENCE_DATA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/forward.h"

namespace banyan::testing {

// Root of the source tree (see above).
std::string SourceDir();

// Reads a whole file; kNotFound when it cannot be opened.
absl::StatusOr<std::string> ReadFileBytes(const std::string& path);

// Runs `tokens` as one causal prefill through `backend` and returns the
// logits of every position, [tokens.size()][vocab].
absl::StatusOr<std::vector<float>> PrefillLogits(model::Backend& backend,
                                                 const std::vector<int32_t>& tokens,
                                                 DType kv_dtype);

}  // namespace banyan::testing

#endif  // BANYAN_TESTS_HF_REFERENCE_DATA_H_
