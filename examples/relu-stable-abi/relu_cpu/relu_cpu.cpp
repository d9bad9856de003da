// ReLU on the CPU through the stable tensor API: float32, contiguous.
#include <torch/csrc/stable/tensor.h>

#include "torch_binding.h"

void relu(torch::stable::Tensor &out, torch::stable::Tensor const &input) {
  STD_TORCH_CHECK(input.scalar_type() == torch::headeronly::ScalarType::Float &&
                      out.scalar_type() == torch::headeronly::ScalarType::Float,
                  "relu: float32 tensors only");
  STD_TORCH_CHECK(input.numel() == out.numel(), "relu: out and input differ in size");
  const float *in = static_cast<const float *>(input.data_ptr());
  float *o = static_cast<float *>(out.mutable_data_ptr());
  for (int64_t i = 0; i < input.numel(); i++)
    o[i] = in[i] > 0.0f ? in[i] : 0.0f;
}
