// File: banyan/status_macros.h
// -----------------------------------------------------------------------------
// Propagation macros for absl::Status and absl::StatusOr<T>. Debian's Abseil
// (20220623) has no absl/status/status_macros.h, so Banyan defines its own two,
// once, here. Every Banyan target uses these; nothing else defines them.
//
// Example:
//
//   absl::StatusOr<Model> Load(std::string_view path) {
//     BANYAN_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
//     BANYAN_RETURN_IF_ERROR(CheckMagic(file));
//     return Parse(file);
//   }
//
// Both macros evaluate their argument exactly once. BANYAN_ASSIGN_OR_RETURN's
// left-hand side may declare a new variable (`auto x`, `T x`) or name an
// existing one; it must not contain unparenthesized commas.
#ifndef BANYAN_STATUS_MACROS_H_
#define BANYAN_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns the status from the enclosing function if `expr` is not OK.
#define BANYAN_RETURN_IF_ERROR(expr)                          \
  do {                                                        \
    ::absl::Status banyan_status_internal_ = (expr);          \
    if (!banyan_status_internal_.ok()) {                      \
      return banyan_status_internal_;                         \
    }                                                         \
  } while (false)

#define BANYAN_STATUS_MACROS_CONCAT_INNER_(x, y) x##y
#define BANYAN_STATUS_MACROS_CONCAT_(x, y) BANYAN_STATUS_MACROS_CONCAT_INNER_(x, y)

#define BANYAN_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                  \
  if (!statusor.ok()) {                                     \
    return std::move(statusor).status();                    \
  }                                                         \
  lhs = std::move(statusor).value()

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its status from the
// enclosing function, otherwise moves the value into `lhs`.
#define BANYAN_ASSIGN_OR_RETURN(lhs, rexpr) \
  BANYAN_ASSIGN_OR_RETURN_IMPL_(            \
      BANYAN_STATUS_MACROS_CONCAT_(banyan_statusor_, __LINE__), lhs, rexpr)

#endif  // BANYAN_STATUS_MACROS_H_
