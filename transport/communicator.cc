// transport/communicator.cc: names and report strings for the Communicator interface.
#include "transport/communicator.h"

#include "absl/strings/str_cat.h"

namespace mxmaca::transport {

const char* CollectiveOpName(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce: return "all_reduce";
    case CollectiveOp::kAllGather: return "all_gather";
    case CollectiveOp::kReduceScatter: return "reduce_scatter";
    case CollectiveOp::kBroadcast: return "broadcast";
    case CollectiveOp::kSend: return "send";
    case CollectiveOp::kRecv: return "recv";
    case CollectiveOp::kAllToAllV: return "all_to_all_v";
  }
  return "unknown_op";
}

const char* DataTypeName(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return "fp32";
    case DataType::kBFloat16: return "bf16";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kUInt8: return "uint8";
  }
  return "unknown_dtype";
}

int64_t DataTypeSize(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return 4;
    case DataType::kBFloat16: return 2;
    case DataType::kInt32: return 4;
    case DataType::kInt64: return 8;
    case DataType::kUInt8: return 1;
  }
  return 1;
}

std::string CollectiveInfo::ToString() const {
  std::string s = absl::StrCat(CollectiveOpName(op), " on ", group_name, " (group ", group_id,
                               ") seq ", sequence, " ", DataTypeName(dtype), " x ", count, " (",
                               bytes, " bytes) from rank ", rank);
  if (op == CollectiveOp::kSend) absl::StrAppend(&s, " to rank ", peer);
  if (op == CollectiveOp::kRecv) absl::StrAppend(&s, " expecting rank ", peer);
  if (op == CollectiveOp::kBroadcast) absl::StrAppend(&s, " root rank ", peer);
  return s;
}

}  // namespace mxmaca::transport
