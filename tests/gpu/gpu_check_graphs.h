// tests/gpu/gpu_check_graphs.h: the GPU check's section on per-actor streams, the device
// arena and the CUDA-graph cache (kernels/cuda/stream_set.h, device_arena.h,
// graph_cache.h).
#ifndef MXMACA_TESTS_GPU_GPU_CHECK_GRAPHS_H_
#define MXMACA_TESTS_GPU_GPU_CHECK_GRAPHS_H_

#include "tests/gpu/check_util.h"

namespace mxmaca::gpu_check {

// RunGraphChecks: rows (1) CudaGraphCache replay of a 50-kernel segment (Scale/Add on
// DeviceArena buffers) bit-identical to eager, stats as expected; (2) a sync inside the
// capture falls back to eager with the same bits; (3) a new shape gets a new capture;
// then prints launch cost per 50-kernel segment in µs, eager vs graph (host issue time
// and wall time per segment, tiny kernels so launches dominate).
void RunGraphChecks(Table* table);

}  // namespace mxmaca::gpu_check

#endif  // MXMACA_TESTS_GPU_GPU_CHECK_GRAPHS_H_
