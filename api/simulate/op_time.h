// api/simulate/op_time.h: OpTime, the parts of one simulated op (F, B or W of one
// micro-batch on one model chunk) — shared by the step model (step_model.h) and the MoE
// cost model (moe_cost.h).
#ifndef MXMACA_API_SIMULATE_OP_TIME_H_
#define MXMACA_API_SIMULATE_OP_TIME_H_

namespace mxmaca::api {

// OpTime: the parts of one op, seconds. All parts run one after the other on the rank
// (one stream; communication inside an op is not overlapped with its compute).
struct OpTime {
  double gemm = 0;     // tensor-core work: FLOPs / (peak x gemm_efficiency)
  double memory = 0;   // memory-bound kernels: bytes / (HBM x hbm_efficiency)
  double tp_comm = 0;  // TP (and SP) collectives inside the op, not overlapped
  double cp_comm = 0;  // CP K, V all-gather (F) / dK, dV reduce-scatter (B): exposed part
  // MoE token dispatch and combine (all-to-all over EP, or all-gather / reduce-scatter
  // over ETP x EP) and the expert-TP gather / scatter of routed tokens; 0 for dense models.
  double ep_comm = 0;
  double total() const { return gemm + memory + tp_comm + cp_comm + ep_comm; }
};

}  // namespace mxmaca::api

#endif  // MXMACA_API_SIMULATE_OP_TIME_H_
