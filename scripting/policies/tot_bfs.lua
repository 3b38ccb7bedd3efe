-- Tree-of-thought, breadth-first with a beam (Yao et al. 2023, "BFS" variant).
-- Every node of the current level is expanded into `breadth` sampled thoughts; each new thought
-- is valued by the model (a value prompt scored by the engine, bound to banyan.model_score);
-- select() keeps the best `k` of the level, ties broken by the lower node id so runs repeat.
--
-- Params: k (beam width, 3), breadth (samples per node, 3), max_depth (levels, 4).

local K = math.floor(banyan.param("k", 3))
local BREADTH = math.floor(banyan.param("breadth", 3))
local MAX_DEPTH = math.floor(banyan.param("max_depth", 4))

function expand(node, stats)
  if node.depth >= MAX_DEPTH then return nil end
  return BREADTH
end

function score(node)
  return banyan.model_score(node.id)
end

function select(frontier)
  local order = {}
  for i = 1, #frontier do order[i] = i end
  table.sort(order, function(a, b)
    local na, nb = frontier[a], frontier[b]
    if na.score ~= nb.score then return na.score > nb.score end
    return na.id < nb.id
  end)
  local keep = {}
  for i = 1, math.min(K, #order) do keep[i] = order[i] end
  return keep
end

function should_stop(stats)
  if stats.max_branches > 0 and stats.branches >= stats.max_branches then return true end
  if stats.max_tokens > 0 and stats.tokens_used >= stats.max_tokens then return true end
  return stats.depth >= MAX_DEPTH
end
