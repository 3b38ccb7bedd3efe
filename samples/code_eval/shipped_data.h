// The datasets shipped in samples/data/, by path in the source tree
// (BANYAN_SOURCE_DIR, which the build defines for the tests and `banyan eval`).
#ifndef BANYAN_SAMPLES_CODE_EVAL_SHIPPED_DATA_H_
#define BANYAN_SAMPLES_CODE_EVAL_SHIPPED_DATA_H_

#include <string>

namespace banyan::samples {

// 5 MBPP-style problems written for Banyan (3 asserts each).
inline std::string ShippedMbppTiny() { return std::string(BANYAN_SOURCE_DIR) + "/samples/data/mbpp_tiny.jsonl"; }

// 6 problems written for Banyan in APPS's format (3 standard input, 2 call-based, 1 without tests).
inline std::string ShippedAppsTiny() { return std::string(BANYAN_SOURCE_DIR) + "/samples/data/apps_tiny.jsonl"; }

}  // namespace banyan::samples

#endif  // BANYAN_SAMPLES_CODE_EVAL_SHIPPED_DATA_H_
