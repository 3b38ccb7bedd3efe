// libFuzzer target (-DBANYAN_FUZZ=ON, clang): see fuzz_entries.h.
#include "model/testdata/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return banyan::model::fuzz::FuzzGguf(data, size);
}
