// Registers silu(Tensor! out, Tensor input) -> () for CUDA tensors under
// this build's op namespace.
#include <torch/library.h>

#include "registration.h"
#include "torch_binding.h"

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("silu(Tensor! out, Tensor input) -> ()");
  ops.impl("silu", torch::kCUDA, &silu);
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
