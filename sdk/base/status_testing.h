// Test helpers for absl::Status: assert success with the full message on
// failure, and match a specific error code (never just "not ok").
//
//   BANYAN_ASSERT_OK(tree.Release(branch));
//   BANYAN_ASSERT_OK_AND_ASSIGN(auto plan, tree.BuildPlan(leaves));
//   EXPECT_THAT(tree.Release(branch), StatusIs(absl::StatusCode::kNotFound));
//   EXPECT_THAT(result, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("token")));
#ifndef BANYAN_SDK_BASE_STATUS_TESTING_H_
#define BANYAN_SDK_BASE_STATUS_TESTING_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "banyan/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace banyan::testing {

inline const absl::Status& GetStatus(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) { return status_or.status(); }

MATCHER_P(StatusIs, code, "has status code " + ::testing::PrintToString(code)) {
  const absl::Status& status = ::banyan::testing::GetStatus(arg);
  *result_listener << "status is " << status;
  return status.code() == code;
}

MATCHER_P2(StatusIs, code, message_matcher,
           "has status code " + ::testing::PrintToString(code)) {
  const absl::Status& status = ::banyan::testing::GetStatus(arg);
  *result_listener << "status is " << status;
  return status.code() == code &&
         ::testing::Matches(message_matcher)(std::string(status.message()));
}

}  // namespace banyan::testing

#define BANYAN_ASSERT_OK(expr)                                                  \
  do {                                                                          \
    const ::absl::Status banyan_test_status_ = ::banyan::testing::GetStatus(expr); \
    ASSERT_TRUE(banyan_test_status_.ok()) << banyan_test_status_;               \
  } while (false)

#define BANYAN_EXPECT_OK(expr)                                                  \
  do {                                                                          \
    const ::absl::Status banyan_test_status_ = ::banyan::testing::GetStatus(expr); \
    EXPECT_TRUE(banyan_test_status_.ok()) << banyan_test_status_;               \
  } while (false)

#define BANYAN_ASSERT_OK_AND_ASSIGN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                      \
  ASSERT_TRUE(statusor.ok()) << statusor.status();              \
  lhs = std::move(statusor).value()

#define BANYAN_ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  BANYAN_ASSERT_OK_AND_ASSIGN_IMPL_(            \
      BANYAN_STATUS_MACROS_CONCAT_(banyan_test_statusor_, __LINE__), lhs, rexpr)

#endif  // BANYAN_SDK_BASE_STATUS_TESTING_H_
