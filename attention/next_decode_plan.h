// The plan of the next decode step, guessed from this one, so that a runner
// can plan it while the GPU still runs this step (TreeAttention::PrepareAhead)
// and keep that work when the guess comes true.
//
// A decode step's plan (kv_tree's BuildPrefillPlan with one new token per
// branch) gives every query row its path: the shared nodes' segments, then
// the row's own leaf, whose last token is the row's own. At the next step
// every branch that goes on has one more token in its leaf and nothing else
// changes, unless a leaf's new token needs a fresh page (whose id only the
// tree knows), a branch stops or forks, or the tree reorganizes.
// Host only; pure functions; thread-compatible.
#ifndef BANYAN_ATTENTION_NEXT_DECODE_PLAN_H_
#define BANYAN_ATTENTION_NEXT_DECODE_PLAN_H_

#include "attention/attention_plan.h"

namespace banyan::attention {

// Writes into `next` (cleared first, capacity reused) the plan of the step
// after `plan` in which every query row's leaf grows by one token, and
// returns true; returns false (and leaves `next` unspecified) when that step
// cannot be told from `plan` alone: a row whose last entry's segment is read
// by other rows too or only partly (not a leaf ending at the row's token), or
// a leaf whose next token starts a new page. REQUIRES: plan.Validate() is
// empty. O(size of the plan).
bool PredictNextDecodePlan(const AttentionPlan& plan, AttentionPlan* next);

// Whether `a` and `b` are the same plan: every field and array equal.
// O(size of the plans).
bool SamePlan(const AttentionPlan& a, const AttentionPlan& b);

}  // namespace banyan::attention

#endif  // BANYAN_ATTENTION_NEXT_DECODE_PLAN_H_
