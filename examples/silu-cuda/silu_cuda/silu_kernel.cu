// SiLU on the GPU: out[i] = x[i] / (1 + exp(-x[i])), float32, one thread
// per element.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/torch.h>

__global__ void silu_kernel(float *__restrict__ out, const float *__restrict__ in, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float x = in[i];
    out[i] = x / (1.0f + __expf(-x));
  }
}

void silu(torch::Tensor &out, torch::Tensor const &input) {
  TORCH_CHECK(input.is_cuda() && out.is_cuda(), "silu: CUDA tensors only");
  TORCH_CHECK(input.scalar_type() == torch::kFloat && out.scalar_type() == torch::kFloat, "silu: float32 only");
  TORCH_CHECK(input.is_contiguous() && out.is_contiguous() && input.numel() == out.numel(),
              "silu: contiguous tensors of the same size");
  const at::cuda::OptionalCUDAGuard guard(device_of(input));
  int64_t n = input.numel();
  int threads = 256;
  int64_t blocks = (n + threads - 1) / threads;
  if (n)
    silu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(out.data_ptr<float>(),
                                                                          input.data_ptr<float>(), n);
}
