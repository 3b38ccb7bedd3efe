#include "attention/testing/random_plan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "attention/reference/reference_attention.h"

namespace banyan::attention::testing {

TreePlan BuildTreePlan(const std::vector<TreeNode>& nodes, const PlanOptions& options, Rng& rng) {
  const int32_t n = static_cast<int32_t>(nodes.size());
  std::vector<char> has_child(nodes.size(), 0);
  for (const TreeNode& node : nodes) {
    if (node.parent >= 0) has_child[node.parent] = 1;
  }
  // Rows, and per node the (row, limit) pairs that read it.
  std::vector<std::vector<std::pair<int32_t, int32_t>>> readers(nodes.size());
  TreePlan out;
  int32_t rows = 0;
  for (int32_t leaf = 0; leaf < n; ++leaf) {
    if (has_child[leaf]) continue;
    std::vector<int32_t> path;
    for (int32_t v = leaf; v >= 0; v = nodes[v].parent) path.push_back(v);
    std::reverse(path.begin(), path.end());
    const int32_t leaf_rows = options.prefill ? nodes[leaf].length : 1;
    for (int32_t j = 0; j < leaf_rows; ++j) {
      for (int32_t v : path) {
        const bool causal = options.prefill && v == leaf;
        readers[v].push_back({rows, causal ? j + 1 : nodes[v].length});
      }
      out.row_path.push_back(path);
      ++rows;
    }
  }
  AttentionPlan& plan = out.plan;
  plan.Clear();
  plan.page_size = options.page_size;
  plan.num_queries = rows;
  int64_t page_count = 0;
  for (int32_t v = 0; v < n; ++v) {
    const int32_t first = options.random_first_slot ? static_cast<int32_t>(rng.UniformInt(options.page_size)) : 0;
    const int32_t pages = (first + nodes[v].length + options.page_size - 1) / options.page_size;
    for (int32_t p = 0; p < pages; ++p) plan.page_indices.push_back(static_cast<int32_t>(page_count++));
    plan.segment_page_indptr.push_back(static_cast<int32_t>(plan.page_indices.size()));
    plan.segment_first_slot.push_back(first);
    plan.segment_length.push_back(nodes[v].length);
    for (const auto& [row, limit] : readers[v]) {
      plan.entry_query.push_back(row);
      plan.entry_kv_limit.push_back(limit);
    }
    plan.segment_entry_indptr.push_back(static_cast<int32_t>(plan.entry_query.size()));
  }
  out.num_pages = page_count + options.extra_pages;
  if (!options.shuffle_pages && options.interleave_leaves) {
    // New ids: inner nodes' pages first, in order; then leaf pages by (page index in the leaf, leaf).
    std::vector<int32_t> renumber(static_cast<size_t>(page_count), -1);
    int32_t next = 0;
    int32_t deepest = 0;
    for (int32_t v = 0; v < n; ++v) {
      const int32_t pages = plan.segment_page_indptr[v + 1] - plan.segment_page_indptr[v];
      if (has_child[v]) {
        for (int32_t i = plan.segment_page_indptr[v]; i < plan.segment_page_indptr[v + 1]; ++i) renumber[i] = next++;
      } else {
        deepest = std::max(deepest, pages);
      }
    }
    for (int32_t j = 0; j < deepest; ++j) {
      for (int32_t v = 0; v < n; ++v) {
        if (!has_child[v] && plan.segment_page_indptr[v] + j < plan.segment_page_indptr[v + 1]) {
          renumber[plan.segment_page_indptr[v] + j] = next++;
        }
      }
    }
    for (int32_t& p : plan.page_indices) p = renumber[p];
  }
  if (options.shuffle_pages) {
    // Runs of shuffle_run ids in a random order, each run's ids consecutive.
    const int32_t run = std::max(1, options.shuffle_run);
    out.num_pages = (out.num_pages + run - 1) / run * run;  // whole runs: every mapped id stays in the pool
    std::vector<int32_t> perm(static_cast<size_t>(out.num_pages / run));
    std::iota(perm.begin(), perm.end(), 0);
    for (size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[rng.UniformInt(i)]);
    for (int32_t& p : plan.page_indices) p = perm[p / run] * run + p % run;
  }
  FillQueryEntries(plan);
  // Segment ids on row paths equal node ids (segments follow node order).
  return out;
}

TreePlan MakeRandomTreePlan(const RandomTreeOptions& options, Rng& rng) {
  const int32_t levels = std::max(1, options.levels);
  std::vector<int32_t> level_size(static_cast<size_t>(levels));
  level_size[levels - 1] = std::max(1, options.leaves);
  for (int32_t k = levels - 2; k >= 0; --k) {
    const int32_t below = level_size[k + 1];
    level_size[k] = std::max<int32_t>(1, below / static_cast<int32_t>(1 + rng.UniformInt(8)));
  }
  std::vector<TreeNode> nodes;
  int32_t level_start = 0;
  for (int32_t k = 0; k < levels; ++k) {
    const int32_t start = static_cast<int32_t>(nodes.size());
    std::vector<int32_t> parents;
    if (k > 0) {
      const int32_t parent_count = level_size[k - 1];
      // Every parent gets at least one child; the rest go to random parents.
      for (int32_t i = 0; i < level_size[k]; ++i) {
        parents.push_back(level_start + (i < parent_count ? i : static_cast<int32_t>(rng.UniformInt(parent_count))));
      }
      for (size_t i = parents.size(); i > 1; --i) std::swap(parents[i - 1], parents[rng.UniformInt(i)]);
    }
    for (int32_t i = 0; i < level_size[k]; ++i) {
      TreeNode node;
      node.parent = k > 0 ? parents[i] : -1;
      node.length = 1 + static_cast<int32_t>(rng.UniformInt(std::max(1, options.max_length)));
      nodes.push_back(node);
    }
    level_start = start;
  }
  return BuildTreePlan(nodes, options.plan, rng);
}

std::vector<TreeNode> UniformTree(const std::vector<int32_t>& fanout, const std::vector<int32_t>& length) {
  std::vector<TreeNode> nodes;
  std::vector<int32_t> previous{-1};
  for (size_t level = 0; level < fanout.size(); ++level) {
    std::vector<int32_t> current;
    for (int32_t parent : previous) {
      for (int32_t c = 0; c < fanout[level]; ++c) {
        current.push_back(static_cast<int32_t>(nodes.size()));
        nodes.push_back({parent, length[level]});
      }
    }
    previous = std::move(current);
  }
  return nodes;
}

std::vector<uint8_t> GatherPages(const AttentionProblem& p, const std::vector<int32_t>& pages, KvLayout* layout) {
  *layout = p.layout;
  layout->num_pages = static_cast<int64_t>(pages.size());
  std::vector<uint8_t> pool(layout->TotalBytes());
  const size_t page_bytes = static_cast<size_t>(p.layout.PageElements()) * p.layout.dtype_bytes;
  for (int32_t layer = 0; layer < p.layout.num_layers; ++layer) {
    for (int32_t kv = 0; kv < 2; ++kv) {
      for (size_t j = 0; j < pages.size(); ++j) {
        std::memcpy(pool.data() + layout->Offset(layer, kv, static_cast<int64_t>(j), 0, 0) * layout->dtype_bytes,
                    p.kv.data() + p.layout.Offset(layer, kv, pages[j], 0, 0) * p.layout.dtype_bytes, page_bytes);
      }
    }
  }
  return pool;
}

void FillNormal(void* data, DType dtype, int64_t n, Rng& rng) {
  for (int64_t i = 0; i < n; ++i) StoreFromDouble(data, dtype, i, rng.Normal());
}

std::vector<double> ToDoubles(const void* data, DType dtype, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[i] = LoadAsDouble(data, dtype, i);
  return out;
}

double RelativeError(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  if (a.size() != b.size()) return INFINITY;
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-300);
}

// NaN in every (layer, K|V, page, head, slot) of `kv` that no segment of
// `plan` holds.
void PoisonUnusedSlots(const AttentionPlan& plan, const KvLayout& layout, DType dtype, void* kv) {
  std::vector<char> used(static_cast<size_t>(layout.num_pages) * layout.page_size, 0);
  for (size_t s = 0; s + 1 < plan.segment_page_indptr.size(); ++s) {
    const int32_t* pages = plan.page_indices.data() + plan.segment_page_indptr[s];
    for (int32_t t = 0; t < plan.segment_length[s]; ++t) {
      const int32_t pos = plan.segment_first_slot[s] + t;
      used[static_cast<size_t>(pages[pos / layout.page_size]) * layout.page_size + pos % layout.page_size] = 1;
    }
  }
  for (int32_t layer = 0; layer < layout.num_layers; ++layer) {
    for (int32_t plane = 0; plane < 2; ++plane) {
      for (int64_t page = 0; page < layout.num_pages; ++page) {
        for (int32_t head = 0; head < layout.num_kv_heads; ++head) {
          for (int32_t slot = 0; slot < layout.page_size; ++slot) {
            if (used[static_cast<size_t>(page) * layout.page_size + slot]) continue;
            const int64_t base = layout.Offset(layer, plane, page, head, slot);
            for (int32_t d = 0; d < layout.head_dim; ++d) StoreFromDouble(kv, dtype, base + d, std::nan(""));
          }
        }
      }
    }
  }
}

// Multiplies every page's K plane (all layers and heads) by its own 2^u, u uniform in [-3, 3).
void ScaleKeysPerPage(const KvLayout& layout, DType dtype, void* kv, Rng& rng) {
  for (int64_t page = 0; page < layout.num_pages; ++page) {
    const double factor = std::exp2(rng.Uniform(-3.0f, 3.0f));
    for (int32_t layer = 0; layer < layout.num_layers; ++layer) {
      for (int32_t head = 0; head < layout.num_kv_heads; ++head) {
        const int64_t base = layout.Offset(layer, 0, page, head, 0);
        for (int64_t i = 0; i < int64_t{layout.page_size} * layout.head_dim; ++i) {
          StoreFromDouble(kv, dtype, base + i, LoadAsDouble(kv, dtype, base + i) * factor);
        }
      }
    }
  }
}

AttentionProblem MakeProblem(const TreePlan& tree, const ProblemOptions& options, Rng& rng) {
  AttentionProblem p;
  p.options = options;
  p.layout.num_layers = options.num_layers;
  p.layout.num_kv_heads = options.num_kv_heads;
  p.layout.head_dim = options.head_dim;
  p.layout.page_size = tree.plan.page_size;
  p.layout.num_pages = tree.num_pages;
  p.layout.dtype_bytes = static_cast<int32_t>(DTypeSize(options.kv_dtype));
  p.kv.resize(p.layout.TotalBytes());
  FillNormal(p.kv.data(), options.kv_dtype, static_cast<int64_t>(p.kv.size() / DTypeSize(options.kv_dtype)), rng);
  if (options.page_key_scales) ScaleKeysPerPage(p.layout, options.kv_dtype, p.kv.data(), rng);
  if (options.poison_unused_slots) PoisonUnusedSlots(tree.plan, p.layout, options.kv_dtype, p.kv.data());
  const int64_t q_elems = int64_t{tree.plan.num_queries} * options.num_q_heads * options.head_dim;
  p.q.resize(static_cast<size_t>(q_elems) * DTypeSize(options.q_dtype));
  FillNormal(p.q.data(), options.q_dtype, q_elems, rng);
  return p;
}

AttentionArgs AttentionProblem::Args(const AttentionPlan& plan, void* out, DType out_dtype, float* lse) const {
  AttentionArgs args;
  args.plan = &plan;
  args.layout = layout;
  args.kv_dtype = options.kv_dtype;
  args.kv_pool = kv.data();
  args.layer = options.layer;
  args.q = q.data();
  args.q_dtype = options.q_dtype;
  args.num_q_heads = options.num_q_heads;
  args.scale = 1.0f / std::sqrt(static_cast<float>(options.head_dim));
  args.out = out;
  args.out_dtype = out_dtype;
  args.lse = lse;
  return args;
}

}  // namespace banyan::attention::testing
