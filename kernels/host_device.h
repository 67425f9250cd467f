// kernels/host_device.h: MXMACA_HOST_DEVICE marks a function that both the CPU kernels and
// the CUDA kernels call (__host__ __device__ under nvcc, plain inline elsewhere), so one
// definition of a piece of arithmetic serves both backends (kernels/element_math.h,
// kernels/philox.h).
#ifndef MXMACA_KERNELS_HOST_DEVICE_H_
#define MXMACA_KERNELS_HOST_DEVICE_H_

#if defined(__CUDACC__)
#define MXMACA_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define MXMACA_HOST_DEVICE inline
#endif

#endif  // MXMACA_KERNELS_HOST_DEVICE_H_
