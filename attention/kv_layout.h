// KvLayout: the one description of how the paged KV cache is laid out in
// memory. kv_tree's page pool allocates storage in this layout; every
// attention kernel and reference reads it. Header-only, no dependencies, so
// kv_tree can include it without linking attention.
//
// One page id names the same page in every layer: a page holds `page_size`
// consecutive tokens of one tree node, for K and V, every layer and KV head.
// The storage is one block, indexed (all row-major):
//
//   [num_layers][2 (0 = K, 1 = V)][num_pages][num_kv_heads][page_size][head_dim]
//
// so that one KV head of one page is a contiguous page_size x head_dim tile
// (HND within a page), which is what a tensor-core tile load wants.
// Thread-compatible value type.
#ifndef BANYAN_ATTENTION_KV_LAYOUT_H_
#define BANYAN_ATTENTION_KV_LAYOUT_H_

#include <cstddef>
#include <cstdint>

namespace banyan::attention {

struct KvLayout {
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t page_size = 16;  // tokens per page
  int64_t num_pages = 0;
  int32_t dtype_bytes = 2;  // 4 for fp32, 2 for bf16 / fp16

  // Elements in one (layer, K|V, page, head) tile.
  constexpr int64_t TileElements() const { return int64_t{page_size} * head_dim; }
  // Elements of one page for one layer and one of K/V (all heads).
  constexpr int64_t PageElements() const { return TileElements() * num_kv_heads; }
  // Element offset of the K (kv = 0) or V (kv = 1) plane of one layer.
  constexpr int64_t PlaneOffset(int32_t layer, int32_t kv) const {
    return (int64_t{layer} * 2 + kv) * num_pages * PageElements();
  }
  // Element offset of token slot `slot` of `page` for one layer, K|V and head.
  constexpr int64_t Offset(int32_t layer, int32_t kv, int64_t page, int32_t head,
                           int32_t slot) const {
    return PlaneOffset(layer, kv) + (page * num_kv_heads + head) * TileElements() +
           int64_t{slot} * head_dim;
  }
  // Bytes of the whole pool.
  constexpr size_t TotalBytes() const {
    return static_cast<size_t>(num_layers) * 2 * num_pages * PageElements() * dtype_bytes;
  }
  // Bytes one page costs across all layers, K and V.
  constexpr size_t BytesPerPage() const {
    return static_cast<size_t>(num_layers) * 2 * PageElements() * dtype_bytes;
  }
};

// Whether two layouts are the same (every field; C++17 for nvcc, so no
// defaulted operator==).
constexpr bool SameKvLayout(const KvLayout& a, const KvLayout& b) {
  return a.num_layers == b.num_layers && a.num_kv_heads == b.num_kv_heads && a.head_dim == b.head_dim &&
         a.page_size == b.page_size && a.num_pages == b.num_pages && a.dtype_bytes == b.dtype_bytes;
}

}  // namespace banyan::attention

#endif  // BANYAN_ATTENTION_KV_LAYOUT_H_
