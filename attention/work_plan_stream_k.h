// Stream-K placement of a work plan (lean-attention 4.3): the plan's runs of
// KV tiles (one per segment, KV head and row block: everything one query tile
// reads of one segment) are laid end to end and cut into one contiguous range
// of equal cost per CTA, at tile boundaries. A run cut by a range boundary
// becomes two or more items (its pieces, split-K chunks 0, 1, ... in token
// order) whose partial states the merge combines, so every CTA ends at about
// the same time whatever the number and lengths of the runs: the fix for the
// partly filled last wave of a fixed split when a few long sequences decode
// (FlashDecoding's split per head: 8 KV heads x 17 chunks = 136 items on 132
// SMs run as two waves).
//
// Host only, used by WorkPlanner (work_plan.cc), which decides when the cut
// pays and turns pieces into WorkItems. Thread-compatible pure functions.
#ifndef BANYAN_ATTENTION_WORK_PLAN_STREAM_K_H_
#define BANYAN_ATTENTION_WORK_PLAN_STREAM_K_H_

#include <cstdint>
#include <vector>

namespace banyan::attention {

// One run: `tiles` KV tiles of `tile_cost` (model microseconds) each.
// tiles may be 0 (a run that reads nothing still gets one empty piece).
struct StreamKRun {
  int32_t tiles = 0;
  double tile_cost = 0.0;
};

// Tiles [tile_begin, tile_end) of run `run` on CTA `cta`, the run's
// piece number `chunk`.
struct StreamKPiece {
  int32_t run;
  int32_t cta;
  int32_t tile_begin;
  int32_t tile_end;
  int32_t chunk;
};

// Cuts `runs` (in order) over `ctas` CTAs: tile i of a run whose tiles start
// at cumulative cost X goes to CTA floor((X + (i + 1/2) tile_cost) / quota),
// quota = total cost / ctas (clamped to the last CTA), so CTA loads differ by
// at most about one tile plus the pieces' item overheads. Writes the pieces
// in run order, which is also CTA order (non-decreasing cta), each run's
// chunks 0, 1, ... in token order, and per run its piece count. An empty run
// gets one empty piece on the CTA where it falls. REQUIRES: ctas >= 1,
// tile_cost > 0 for runs with tiles.
void CutStreamK(const std::vector<StreamKRun>& runs, int32_t ctas, std::vector<StreamKPiece>* pieces,
                std::vector<int32_t>* run_pieces);

// Cuts every run into `per_run` pieces of whole tiles (sizes differing by at
// most one tile; a run of fewer tiles into one per tile, an empty run into
// one empty piece) and gives piece c of run r CTA r * per_run + c: one piece
// per CTA, one wave. Pieces and run_pieces as CutStreamK's.
// REQUIRES: runs.size() * per_run <= the CTA count, per_run >= 1.
void CutOneWave(const std::vector<StreamKRun>& runs, int32_t per_run, std::vector<StreamKPiece>* pieces,
                std::vector<int32_t>* run_pieces);

// The makespan of `pieces` (CutStreamK's, possibly with empty pieces added):
// per CTA its tiles' cost plus item_overhead_us per piece, the largest.
double StreamKMakespan(const std::vector<StreamKRun>& runs, const std::vector<StreamKPiece>& pieces, int32_t ctas,
                       double item_overhead_us);

}  // namespace banyan::attention

#endif  // BANYAN_ATTENTION_WORK_PLAN_STREAM_K_H_
