/// \file
/// Status helpers. Debian 12 ships Abseil 20220623, which has absl::Status and
/// absl::StatusOr but not status_macros.h, so tdf supplies its own macros.
#ifndef TDF_STATUS_H_
#define TDF_STATUS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TDF_CONCAT_INNER_(a, b) a##b
#define TDF_CONCAT_(a, b) TDF_CONCAT_INNER_(a, b)

/// Returns from the enclosing function if `expr` is a non-OK absl::Status.
#define TDF_RETURN_IF_ERROR(expr)                        \
  do {                                                   \
    ::absl::Status tdf_status_ = (expr);                 \
    if (!tdf_status_.ok()) return tdf_status_;           \
  } while (0)

#define TDF_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                               \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(*tmp)

/// `TDF_ASSIGN_OR_RETURN(auto x, MakeX());` assigns or returns the error.
#define TDF_ASSIGN_OR_RETURN(lhs, rexpr) \
  TDF_ASSIGN_OR_RETURN_IMPL_(TDF_CONCAT_(tdf_statusor_, __LINE__), lhs, rexpr)

#endif  // TDF_STATUS_H_
