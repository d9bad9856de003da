// Registers the five activations under this build's op namespace
// (TORCH_EXTENSION_NAME): the only unit that names it.
#include <torch/library.h>

#include "registration.h"
#include "torch_binding.h"

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("relu(Tensor! out, Tensor input) -> ()");
  ops.impl("relu", torch::kCPU, &relu);
  ops.def("silu(Tensor! out, Tensor input) -> ()");
  ops.impl("silu", torch::kCPU, &silu);
  ops.def("gelu(Tensor! out, Tensor input) -> ()");
  ops.impl("gelu", torch::kCPU, &gelu);
  ops.def("sigmoid(Tensor! out, Tensor input) -> ()");
  ops.impl("sigmoid", torch::kCPU, &sigmoid);
  ops.def("softplus(Tensor! out, Tensor input) -> ()");
  ops.impl("softplus", torch::kCPU, &softplus);
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
