// The GPU half of the binding: checks the tensors and calls the launcher on
// torch's current stream (CUDA, or HIP masquerading as CUDA in ROCm torch).
#include <torch/torch.h>

#if defined(ROCM_KERNEL) && __has_include(<c10/hip/HIPStream.h>)
#include <ATen/hip/impl/HIPStreamMasqueradingAsCUDA.h>
static void *current_stream() { return at::hip::getCurrentHIPStreamMasqueradingAsCUDA().stream(); }
#elif defined(ROCM_KERNEL)
// Compiled by hipcc against a torch that is not a ROCm build (a worker's
// rocm_from_hipcc toolchain): torch's HIP stream API is absent, so the
// kernel runs on the device's null stream, torch's default stream. It
// ignores a stream the caller made current.
static void *current_stream() { return nullptr; }
#else
#include <c10/cuda/CUDAStream.h>
static void *current_stream() { return c10::cuda::getCurrentCUDAStream().stream(); }
#endif

#include "relu_kernel.h"

void relu_gpu(torch::Tensor &out, const torch::Tensor &input) {
  TORCH_CHECK(out.sizes() == input.sizes(), "relu: out and input differ in shape");
  TORCH_CHECK(input.scalar_type() == torch::kFloat && out.scalar_type() == torch::kFloat,
              "relu_gpu: float32 only");
  TORCH_CHECK(input.is_cuda() && out.is_cuda(), "relu_gpu: tensors must be on the GPU");
  torch::Tensor src = input.contiguous();
  torch::Tensor dst = out.is_contiguous() ? out : torch::empty_like(src);
  int err = relu_launch_f32(dst.data_ptr<float>(), src.data_ptr<float>(), src.numel(), current_stream());
  TORCH_CHECK(err == 0, "relu_gpu: kernel launch failed (", err, ")");
  if (!dst.is_same(out))
    out.copy_(dst);
}
