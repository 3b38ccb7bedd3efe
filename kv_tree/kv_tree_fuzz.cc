// libFuzzer target: the KvTree operation stream (kv_tree_op_driver.h). Any
// broken invariant aborts, which libFuzzer reports with the input.
//
//   cmake -B build-kvtree-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
//         -DBANYAN_CUDA=OFF -DBANYAN_FUZZ=ON && ninja -C build-kvtree-fuzz kv_tree_fuzz
//   build-kvtree-fuzz/kv_tree/kv_tree_fuzz -max_total_time=300 corpus/
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "kv_tree/kv_tree_op_driver.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::Status status = banyan::kv_tree::testing::RunOpStream(data, size);
  if (!status.ok()) {
    std::fprintf(stderr, "kv_tree invariant broken: %s\n", status.ToString().c_str());
    std::abort();
  }
  return 0;
}
