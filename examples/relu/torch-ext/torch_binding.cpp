// Registers relu(Tensor! out, Tensor input) -> () under this build's op
// namespace (TORCH_EXTENSION_NAME), with the implementation of the backend
// being compiled.
#include <torch/library.h>

#include "registration.h"
#include "torch_binding.h"

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("relu(Tensor! out, Tensor input) -> ()");
#if defined(CPU_KERNEL)
  ops.impl("relu", at::kCPU, &relu_cpu);
#elif defined(CUDA_KERNEL) || defined(ROCM_KERNEL)
  // ROCm torch also dispatches HIP tensors under the CUDA key.
  ops.impl("relu", at::kCUDA, &relu_gpu);
#endif
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
