-- Self-consistency (Wang et al. 2023): sample complete answers from the prompt, extract each
-- sample's final answer, vote, and stop as soon as the leader cannot be overtaken by the samples
-- still to come.
--
-- answer(node) extracts the answer; score(node) records the node's vote once and returns the
-- votes its answer has; should_stop(stats) compares the leader with the runner-up plus the
-- samples left. With weighted = 1 each vote weighs node.score clamped to [0, 1] (e.g. a verifier
-- or the model's own probability), so the samples left can add at most one vote each.
--
-- Params: samples (total samples, 16), batch (samples per expansion, 4), weighted (0).

local SAMPLES = math.floor(banyan.param("samples", 16))
local BATCH = math.floor(banyan.param("batch", 4))
local WEIGHTED = banyan.param("weighted", 0) ~= 0

votes = {}      -- answer -> total weight
counted = {}    -- node id -> true once its vote is in

local function normalize(text)
  text = text:gsub(",", ""):gsub("%s+", "")
  local number = tonumber(text)
  if number then
    if number == math.floor(number) and math.abs(number) < 2^53 then
      return string.format("%d", number)
    end
    return tostring(number)
  end
  return text:lower()
end

function answer(node)
  local text = node.text
  local found = text:match("####%s*([^\n]+)")
      or text:match("[Tt]he answer is%s*:?%s*([%-%d%.,]+%d)")
      or text:match("\\boxed{([^}]*)}")
  if not found then
    for number in text:gmatch("%-?%d[%d,]*%.?%d*") do found = number end  -- the last number
  end
  if found then return normalize(found) end
  return nil
end

function score(node)
  local a = answer(node)
  if a == nil then return 0 end
  if not counted[node.id] then
    counted[node.id] = true
    local weight = 1
    if WEIGHTED then weight = math.min(math.max(node.score, 0), 1) end
    votes[a] = (votes[a] or 0) + weight
  end
  return votes[a]
end

local function budget(stats)
  if stats.max_branches > 0 then return math.min(SAMPLES, stats.max_branches) end
  return SAMPLES
end

function expand(node, stats)
  if node.depth > 0 then return nil end  -- samples are complete answers: leaves
  local left = budget(stats) - stats.branches
  if left <= 0 then return nil end
  return math.min(BATCH, left)
end

-- The leading answer (the smallest on a tie), its votes and the runner-up's votes.
local function leaders()
  local winner, first, second = nil, 0, 0
  for a, v in pairs(votes) do
    if v > first then
      second, first, winner = first, v, a
    elseif v == first then
      second = v
      if winner == nil or a < winner then winner = a end
    elseif v > second then
      second = v
    end
  end
  return winner, first, second
end

function should_stop(stats)
  local left = budget(stats) - stats.branches
  if left <= 0 then return true end
  local _, first, second = leaders()
  return first > second + left
end
