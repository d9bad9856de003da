// Registers relu(Tensor! out, Tensor input) -> () in this build's op
// namespace through the stable ABI's registration macros (no c10 or ATen
// symbol is imported, so the library loads on any torch >= its target).
#include <torch/csrc/stable/library.h>

#include "registration.h"
#include "torch_binding.h"

STABLE_TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("relu(Tensor! out, Tensor input) -> ()");
}

#if defined(CPU_KERNEL)
STABLE_TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, ops) {
  ops.impl("relu", TORCH_BOX(&relu_stable));
}
#elif defined(CUDA_KERNEL)
STABLE_TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CUDA, ops) {
  ops.impl("relu", TORCH_BOX(&relu_stable));
}
#endif

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
