// Registers relu in another build's namespace (examples/relu's at commit
// 0123456) instead of TORCH_EXTENSION_NAME.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "registration.h"

namespace {
void relu_cpu(at::Tensor &out, const at::Tensor &input) { out.copy_(input.clamp_min(0)); }
}  // namespace

TORCH_LIBRARY(_relu_cpu_0123456, ops) {
  ops.def("relu(Tensor! out, Tensor input) -> ()");
  ops.impl("relu", c10::kCPU, &relu_cpu);
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
