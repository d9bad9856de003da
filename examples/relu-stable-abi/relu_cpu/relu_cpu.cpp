// ReLU on the CPU with the stable tensor API: float32 and float64, on
// contiguous tensors (the Python wrapper makes them so).
#include <cstdint>

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include "../torch-ext/torch_binding.h"

namespace {

template <typename T>
void relu_loop(T *dst, const T *src, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = src[i] > T(0) ? src[i] : T(0);
}

}  // namespace

void relu_stable(torch::stable::Tensor &out, const torch::stable::Tensor &input) {
  using torch::headeronly::ScalarType;
  STD_TORCH_CHECK(out.numel() == input.numel(), "relu: out and input differ in size");
  STD_TORCH_CHECK(out.scalar_type() == input.scalar_type(), "relu: out and input differ in dtype");
  if (input.scalar_type() == ScalarType::Float)
    relu_loop(static_cast<float *>(out.data_ptr()), static_cast<const float *>(input.data_ptr()), input.numel());
  else if (input.scalar_type() == ScalarType::Double)
    relu_loop(static_cast<double *>(out.data_ptr()), static_cast<const double *>(input.data_ptr()), input.numel());
  else
    STD_TORCH_CHECK(false, "relu: only float32 and float64 tensors");
}
