#include "attention/work_plan_stream_k.h"

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"
#include "sdk/base/rng.h"

namespace banyan::attention {
namespace {

// Random runs (some empty, costs differing by run) over random CTA counts:
// every tile of every run in exactly one piece, pieces in run order with
// non-decreasing CTAs, each run's chunks 0, 1, ... in token order, and every
// CTA's cost within one tile of the even share (quota) of the whole.
TEST(CutStreamKTest, PiecesCoverEveryTileOnceWithEvenLoads) {
  Rng rng(17);
  for (int trial = 0; trial < 300; ++trial) {
    SCOPED_TRACE(::testing::Message() << "trial " << trial);
    const int32_t ctas = 1 + static_cast<int32_t>(rng.UniformInt(140));
    std::vector<StreamKRun> runs(1 + rng.UniformInt(trial % 2 == 0 ? 8 : 300));
    double total = 0.0, max_tile = 0.0;
    for (StreamKRun& r : runs) {
      r.tiles = rng.UniformInt(10) == 0 ? 0 : static_cast<int32_t>(rng.UniformInt(trial % 3 == 0 ? 5000 : 40));
      r.tile_cost = 0.05 + rng.Uniform() * (trial % 4 == 0 ? 2.0 : 0.0);
      total += r.tiles * r.tile_cost;
      max_tile = std::max(max_tile, r.tile_cost);
    }
    std::vector<StreamKPiece> pieces;
    std::vector<int32_t> run_pieces;
    CutStreamK(runs, ctas, &pieces, &run_pieces);
    ASSERT_EQ(run_pieces.size(), runs.size());
    std::vector<int32_t> next_tile(runs.size(), 0), next_chunk(runs.size(), 0);
    std::vector<double> load(ctas, 0.0);
    int32_t last_run = 0, last_cta = 0;
    for (const StreamKPiece& p : pieces) {
      ASSERT_GE(p.run, last_run);
      ASSERT_GE(p.cta, last_cta);
      ASSERT_LT(p.cta, ctas);
      last_run = p.run;
      last_cta = p.cta;
      EXPECT_EQ(p.tile_begin, next_tile[p.run]);
      EXPECT_EQ(p.chunk, next_chunk[p.run]++);
      EXPECT_TRUE(p.tile_end > p.tile_begin || runs[p.run].tiles == 0);
      next_tile[p.run] = p.tile_end;
      load[p.cta] += (p.tile_end - p.tile_begin) * runs[p.run].tile_cost;
    }
    for (size_t r = 0; r < runs.size(); ++r) {
      EXPECT_EQ(next_tile[r], runs[r].tiles) << "run " << r;
      EXPECT_EQ(next_chunk[r], run_pieces[r]) << "run " << r;
      EXPECT_GE(run_pieces[r], 1) << "run " << r;
    }
    const double quota = total / ctas;
    for (int32_t c = 0; c < ctas; ++c) EXPECT_LE(load[c], quota + max_tile + 1e-9) << "cta " << c;
    EXPECT_NEAR(StreamKMakespan(runs, pieces, ctas, 0.0), *std::max_element(load.begin(), load.end()), 1e-9);
  }
}

// A run that CTA boundaries fall inside is cut there: 3 runs of 10 equal
// tiles on 4 CTAs (7.5 tiles each): run 0 is tiles [0, 7) on CTA 0 and
// [7, 10) on CTA 1 (tile 7's middle, 7.5, is CTA 1's), and so on.
TEST(CutStreamKTest, CutsAtTheTileWhoseMiddleCrossesTheShare) {
  std::vector<StreamKPiece> pieces;
  std::vector<int32_t> run_pieces;
  CutStreamK({{10, 1.0}, {10, 1.0}, {10, 1.0}}, 4, &pieces, &run_pieces);
  const std::vector<std::vector<int32_t>> want = {{0, 0, 0, 7, 0},  {0, 1, 7, 10, 1}, {1, 1, 0, 5, 0},
                                                  {1, 2, 5, 10, 1}, {2, 2, 0, 2, 0},  {2, 3, 2, 10, 1}};
  ASSERT_EQ(pieces.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const StreamKPiece& p = pieces[i];
    EXPECT_EQ((std::vector<int32_t>{p.run, p.cta, p.tile_begin, p.tile_end, p.chunk}), want[i]) << "piece " << i;
  }
  EXPECT_EQ(run_pieces, (std::vector<int32_t>{2, 2, 2}));
  EXPECT_DOUBLE_EQ(StreamKMakespan({{10, 1.0}, {10, 1.0}, {10, 1.0}}, pieces, 4, 0.5), 8.0 + 2 * 0.5);
}

// One wave: each run in per_run pieces of whole tiles (sizes within one), a
// run of fewer tiles one per tile, an empty run one empty piece; piece c of
// run r on CTA r * per_run + c.
TEST(CutOneWaveTest, EqualPiecesOnePerCta) {
  std::vector<StreamKPiece> pieces;
  std::vector<int32_t> run_pieces;
  CutOneWave({{10, 1.0}, {3, 2.0}, {0, 1.0}}, 4, &pieces, &run_pieces);
  const std::vector<std::vector<int32_t>> want = {{0, 0, 0, 2, 0}, {0, 1, 2, 5, 1}, {0, 2, 5, 7, 2}, {0, 3, 7, 10, 3},
                                                  {1, 4, 0, 1, 0}, {1, 5, 1, 2, 1}, {1, 6, 2, 3, 2}, {2, 8, 0, 0, 0}};
  ASSERT_EQ(pieces.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const StreamKPiece& p = pieces[i];
    EXPECT_EQ((std::vector<int32_t>{p.run, p.cta, p.tile_begin, p.tile_end, p.chunk}), want[i]) << "piece " << i;
  }
  EXPECT_EQ(run_pieces, (std::vector<int32_t>{4, 3, 1}));
}

}  // namespace
}  // namespace banyan::attention
