// base/status_macros.h: RETURN_IF_ERROR and ASSIGN_OR_RETURN for absl::Status.
//
// Abseil 20220623 (Debian) ships no status macros; these are the usual ones.
//   MXMACA_RETURN_IF_ERROR(expr);            // returns the Status if !ok()
//   MXMACA_ASSIGN_OR_RETURN(auto x, expr);   // x = *StatusOr, or returns status
#ifndef MXMACA_BASE_STATUS_MACROS_H_
#define MXMACA_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define MXMACA_STATUS_CONCAT_INNER_(a, b) a##b
#define MXMACA_STATUS_CONCAT_(a, b) MXMACA_STATUS_CONCAT_INNER_(a, b)

#define MXMACA_RETURN_IF_ERROR(expr)                  \
  do {                                                \
    ::absl::Status mxmaca_status_ = (expr);           \
    if (!mxmaca_status_.ok()) return mxmaca_status_;  \
  } while (0)

#define MXMACA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(*tmp)

#define MXMACA_ASSIGN_OR_RETURN(lhs, expr) \
  MXMACA_ASSIGN_OR_RETURN_IMPL_(MXMACA_STATUS_CONCAT_(mxmaca_statusor_, __LINE__), lhs, expr)

#endif  // MXMACA_BASE_STATUS_MACROS_H_
