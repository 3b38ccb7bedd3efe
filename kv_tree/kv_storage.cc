#include "kv_tree/kv_storage.h"

#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace banyan::kv_tree {

absl::StatusOr<attention::KvLayout> MakeKvLayout(const KvPoolConfig& config) {
  if (config.num_layers <= 0 || config.num_kv_heads <= 0 || config.head_dim <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV pool shape must be positive: layers ", config.num_layers, ", kv heads ",
                     config.num_kv_heads, ", head dim ", config.head_dim));
  }
  if (config.page_size <= 0 || config.page_size > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("page size must be in [1, 4096], got ", config.page_size));
  }
  attention::KvLayout layout;
  layout.num_layers = config.num_layers;
  layout.num_kv_heads = config.num_kv_heads;
  layout.head_dim = config.head_dim;
  layout.page_size = config.page_size;
  layout.dtype_bytes = static_cast<int32_t>(DTypeSize(config.dtype));
  // Guard the per-page product against overflow before dividing.
  const unsigned __int128 per_page = static_cast<unsigned __int128>(config.num_layers) * 2 *
                                     config.num_kv_heads * config.head_dim * config.page_size *
                                     layout.dtype_bytes;
  if (per_page > std::numeric_limits<size_t>::max() / 2) {
    return absl::InvalidArgumentError("KV page size in bytes overflows");
  }
  const size_t bytes_per_page = layout.BytesPerPage();
  const size_t pages = config.byte_budget / bytes_per_page;
  if (pages == 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("KV byte budget ", config.byte_budget, " holds no page of ", bytes_per_page,
                     " bytes"));
  }
  if (pages > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV byte budget gives ", pages, " pages; page ids must fit int32"));
  }
  layout.num_pages = static_cast<int64_t>(pages);
  return layout;
}

absl::StatusOr<std::unique_ptr<HostKvStorage>> HostKvStorage::Create(const KvPoolConfig& config) {
  absl::StatusOr<attention::KvLayout> layout = MakeKvLayout(config);
  if (!layout.ok()) return layout.status();
  absl::StatusOr<HostBuffer> buffer = HostBuffer::Allocate(layout->TotalBytes());
  if (!buffer.ok()) return buffer.status();
  return std::unique_ptr<HostKvStorage>(
      new HostKvStorage(*layout, config.dtype, std::move(buffer).value()));
}

absl::Status HostKvStorage::CopyPage(int64_t src_page, int64_t dst_page, int32_t num_slots) {
  if (src_page < 0 || src_page >= layout_.num_pages || dst_page < 0 ||
      dst_page >= layout_.num_pages || src_page == dst_page) {
    return absl::InvalidArgumentError(
        absl::StrCat("CopyPage: bad pages ", src_page, " -> ", dst_page, " of ", layout_.num_pages));
  }
  if (num_slots < 0 || num_slots > layout_.page_size) {
    return absl::InvalidArgumentError(absl::StrCat("CopyPage: bad slot count ", num_slots));
  }
  if (num_slots == 0) return absl::OkStatus();
  char* base = static_cast<char*>(buffer_.data());
  const size_t bytes = static_cast<size_t>(num_slots) * layout_.head_dim * layout_.dtype_bytes;
  for (int32_t layer = 0; layer < layout_.num_layers; ++layer) {
    for (int32_t kv = 0; kv < 2; ++kv) {
      for (int32_t head = 0; head < layout_.num_kv_heads; ++head) {
        const int64_t src = layout_.Offset(layer, kv, src_page, head, 0) * layout_.dtype_bytes;
        const int64_t dst = layout_.Offset(layer, kv, dst_page, head, 0) * layout_.dtype_bytes;
        std::memcpy(base + dst, base + src, bytes);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace banyan::kv_tree
