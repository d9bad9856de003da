// ReLU on the GPU with the stable tensor API: float32, contiguous (the
// Python wrapper makes them so), on the default stream.
#include <cstdint>

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include "../torch-ext/torch_binding.h"

__global__ void relu_kernel(float *__restrict__ out, const float *__restrict__ in, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

void relu_stable(torch::stable::Tensor &out, const torch::stable::Tensor &input) {
  STD_TORCH_CHECK(input.scalar_type() == torch::headeronly::ScalarType::Float &&
                      out.scalar_type() == torch::headeronly::ScalarType::Float,
                  "relu: float32 tensors only on CUDA");
  STD_TORCH_CHECK(input.numel() == out.numel(), "relu: out and input differ in size");
  int64_t n = input.numel();
  if (n)
    relu_kernel<<<(n + 255) / 256, 256>>>(static_cast<float *>(out.data_ptr()),
                                          static_cast<const float *>(input.data_ptr()), n);
}
