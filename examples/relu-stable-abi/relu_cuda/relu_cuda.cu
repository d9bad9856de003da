// ReLU on the GPU through the stable tensor API: float32, contiguous, on
// the default stream.
#include <torch/csrc/stable/tensor.h>

#include "torch_binding.h"

__global__ void relu_kernel(float *__restrict__ out, const float *__restrict__ in, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

void relu(torch::stable::Tensor &out, torch::stable::Tensor const &input) {
  STD_TORCH_CHECK(input.scalar_type() == torch::headeronly::ScalarType::Float &&
                      out.scalar_type() == torch::headeronly::ScalarType::Float,
                  "relu: float32 tensors only");
  STD_TORCH_CHECK(input.numel() == out.numel(), "relu: out and input differ in size");
  int64_t n = input.numel();
  if (n)
    relu_kernel<<<(n + 255) / 256, 256>>>(static_cast<float *>(out.mutable_data_ptr()),
                                          static_cast<const float *>(input.data_ptr()), n);
}
