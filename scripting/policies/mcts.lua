-- Monte-Carlo tree search with UCT (Kocsis & Szepesvari 2006).
-- The host owns the tree: it keeps each node's visit count and mean value (node.score) and
-- backs values up. The policy decides which child to descend into (select), when and how wide to
-- expand (expand), how to value a new leaf (score: the model's value estimate in place of a
-- rollout) and when to stop.
--
-- Params: c (exploration constant, sqrt 2), breadth (children per expansion, 2),
--         iterations (search iterations, 64), max_depth (6).

local C = banyan.param("c", math.sqrt(2))
local BREADTH = math.floor(banyan.param("breadth", 2))
local ITERATIONS = math.floor(banyan.param("iterations", 64))
local MAX_DEPTH = math.floor(banyan.param("max_depth", 6))

-- UCT: argmax of Q + c * sqrt(ln N / n); unvisited children first (their bound is infinite),
-- ties to the lower node id.
function select(children)
  local total = 0
  for i = 1, #children do total = total + children[i].visits end
  local best, best_value = 1, -math.huge
  for i = 1, #children do
    local child = children[i]
    local value
    if child.visits == 0 then
      value = math.huge
    else
      value = child.score + C * math.sqrt(math.log(total) / child.visits)
    end
    if value > best_value or (value == best_value and child.id < children[best].id) then
      best, best_value = i, value
    end
  end
  return best
end

-- A leaf is valued once before it is expanded; the root expands at once.
function expand(node, stats)
  if node.depth >= MAX_DEPTH then return nil end
  if node.depth > 0 and node.visits == 0 then return nil end
  return BREADTH
end

function score(node)
  return banyan.model_score(node.id)
end

function should_stop(stats)
  if stats.max_branches > 0 and stats.branches >= stats.max_branches then return true end
  return stats.iterations >= ITERATIONS
end
