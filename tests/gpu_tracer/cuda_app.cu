// cuda_app.cu — a small CUDA program for the GPU check of `stepscope record`:
// copies, a memset, kernels on two streams with an event dependency, NVTX
// ranges, then synchronizes. Exits 77 (SKIP) when no CUDA device is present.
#include <cstdio>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

__global__ void scale_add(float *y, const float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: SKIP\n");
    return 77;
  }
  const int n = 1 << 20;
  float *x, *y, *h = new float[n];
  for (int i = 0; i < n; i++)
    h[i] = 1.0f;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&y, n * sizeof(float));
  cudaStream_t s1, s2;
  cudaEvent_t done;
  cudaStreamCreate(&s1);
  cudaStreamCreate(&s2);
  cudaEventCreate(&done);
  for (int step = 0; step < 5; step++) {
    nvtxRangePushA("step");
    cudaMemcpyAsync(x, h, n * sizeof(float), cudaMemcpyHostToDevice, s1);
    cudaMemsetAsync(y, 0, n * sizeof(float), s1);
    for (int k = 0; k < 10; k++)
      scale_add<<<(n + 255) / 256, 256, 0, s1>>>(y, x, 2.0f, n);
    cudaEventRecord(done, s1);
    cudaStreamWaitEvent(s2, done, 0);
    scale_add<<<(n + 255) / 256, 256, 0, s2>>>(x, y, 0.5f, n);
    cudaMemcpyAsync(h, y, n * sizeof(float), cudaMemcpyDeviceToHost, s2);
    cudaStreamSynchronize(s2);
    nvtxRangePop();
  }
  std::printf("y[0] = %g (expect 20)\n", h[0]);
  int ok = h[0] == 20.0f;
  cudaFree(x);
  cudaFree(y);
  delete[] h;
  return ok ? 0 : 1;
}
