// kernels/cpu/elementwise.cc: placeholder bodies (implementation in progress).
#include "kernels/cpu/elementwise.h"

namespace mxmaca::kernels::cpu {

void AddBias(const ExecContext& ctx, float* y, const float* bias, int64_t rows,
             int64_t cols) {}

void BiasGrad(const ExecContext& ctx, const float* dy, int64_t rows, int64_t cols,
              float* dbias) {}

void Add(const ExecContext& ctx, const float* a, const float* b, float* out, int64_t n) {}

void Scale(const ExecContext& ctx, float* x, int64_t n, float s) {}

double SumSquares(const ExecContext& ctx, const float* x, int64_t n) {return 0.0;}

void GeluForward(const ExecContext& ctx, const float* x, float* y, int64_t n) {}

void GeluBackward(const ExecContext& ctx, const float* x, const float* dy, float* dx,
                  int64_t n) {}

void SwigluForward(const ExecContext& ctx, const float* x, float* y, int64_t rows,
                   int64_t f) {}

void SwigluBackward(const ExecContext& ctx, const float* x, const float* dy, float* dx,
                    int64_t rows, int64_t f) {}

void DropoutForward(const ExecContext& ctx, const float* x, float* y, int64_t n, float p,
                    RngKey key, int64_t index_offset) {}

void DropoutBackward(const ExecContext& ctx, const float* dy, float* dx, int64_t n,
                     float p, RngKey key, int64_t index_offset) {}


}  // namespace mxmaca::kernels::cpu
