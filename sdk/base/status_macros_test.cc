#include "banyan/status_macros.h"

#include <memory>

#include "gtest/gtest.h"

namespace banyan {
namespace {

int evaluations = 0;

absl::StatusOr<std::unique_ptr<int>> MakeValue(bool ok, int value) {
  ++evaluations;
  if (!ok) return absl::NotFoundError("no value");
  return std::make_unique<int>(value);
}

absl::Status Check(bool ok) {
  ++evaluations;
  return ok ? absl::OkStatus() : absl::ResourceExhaustedError("full");
}

absl::StatusOr<int> Sum(bool first_ok, bool second_ok) {
  BANYAN_ASSIGN_OR_RETURN(std::unique_ptr<int> a, MakeValue(first_ok, 2));
  BANYAN_ASSIGN_OR_RETURN(auto b, MakeValue(second_ok, 3));  // two on one scope
  BANYAN_RETURN_IF_ERROR(Check(true));
  return *a + *b;
}

absl::Status Propagate(bool ok) {
  BANYAN_RETURN_IF_ERROR(Check(ok));
  return absl::OkStatus();
}

TEST(StatusMacrosTest, AssignOrReturnMovesValues) {
  evaluations = 0;
  auto sum = Sum(true, true);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(*sum, 5);
  EXPECT_EQ(evaluations, 3);  // each expression evaluated once
}

TEST(StatusMacrosTest, AssignOrReturnPropagatesTheError) {
  auto sum = Sum(true, false);
  EXPECT_EQ(sum.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(sum.status().message(), "no value");
}

TEST(StatusMacrosTest, ReturnIfErrorPropagates) {
  EXPECT_TRUE(Propagate(true).ok());
  EXPECT_EQ(Propagate(false).code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace banyan
