// How fast integer and floating-point work runs beside back-to-back wgmmas on
// one SM, and what it costs the tensor cores.
//
// Warpgroup 0 of each block (one block per SM) issues m64n256k16 bf16 wgmmas
// from shared memory, four per group with one group in flight, for a fixed
// count; one or two more warpgroups run a workload in a loop until it is done.
// Then the same workload runs as long again with warpgroup 0 asleep. Printed
// per workload: its loop iterations per warp per million cycles in both runs,
// their ratio, and the tensor rate beside it (flops per cycle per SM; the
// H200's peak is 4,096). docs/performance.md ("Why the epilogue does not
// overlap the main loop") has its numbers on an H200.
//
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a bench/side_work.cu -o sw
//   ./sw
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <vector>

#define ACC8(i)                                                                \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]),  \
      "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define ACC32(i) ACC8(i), ACC8(i + 8), ACC8(i + 16), ACC8(i + 24)
#define ACCUMULATORS                                                           \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "     \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "     \
  "%30, %31, "                                                                 \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "     \
  "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, "     \
  "%60, %61, %62, %63, "                                                       \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, "     \
  "%78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, "     \
  "%92, %93, %94, %95, "                                                       \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, " \
  "%109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, "   \
  "%121, %122, %123, %124, %125, %126, %127"
#define MMA                                                                    \
  "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" ACCUMULATORS       \
  "}, %129, %130, 1, 1, 1, 0, 0;\n"

// `count` groups of four wgmmas on the accumulators `d`. The loop is in one
// asm statement so that nothing touches the accumulators between wgmmas, and
// its trip count is the same for the four warps (a warpgroup must issue its
// wgmmas together).
__device__ void mmaLoop(float *d, unsigned long long &n, uint64_t descA,
                        uint64_t descB, unsigned long long count) {
  asm volatile("{\n.reg .pred more;\n"
               "mma_loop:\n"
               "wgmma.fence.sync.aligned;\n" MMA MMA MMA MMA
               "wgmma.commit_group.sync.aligned;\n"
               "wgmma.wait_group.sync.aligned 1;\n"
               "add.u64 %128, %128, 4;\n"
               "setp.lt.u64 more, %128, %131;\n"
               "@more bra mma_loop;\n"
               "wgmma.wait_group.sync.aligned 0;\n}\n"
               : ACC32(0), ACC32(32), ACC32(64), ACC32(96), "+l"(n)
               : "l"(descA), "l"(descB), "l"(count)
               : "memory");
}

struct Keys {
  uint32_t k[20]; // Philox's ten round keys, two words each
};

__device__ __forceinline__ void philoxRounds(uint32_t (&c)[4],
                                             const uint32_t *k) {
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = uint64_t(0xD2511F53u) * c[0];
    uint64_t p1 = uint64_t(0xCD9E8D57u) * c[2];
    uint32_t n0 = uint32_t(p1 >> 32) ^ c[1] ^ k[2 * r];
    uint32_t n2 = uint32_t(p0 >> 32) ^ c[3] ^ k[2 * r + 1];
    c[1] = uint32_t(p1);
    c[3] = uint32_t(p0);
    c[0] = n0;
    c[2] = n2;
  }
}

__device__ __forceinline__ uint32_t rotl(uint32_t x, int r) {
  return __funnelshift_l(x, x, r);
}

// Threefry-4x32 with `R` rounds (Salmon et al., SC'11): adds, rotations and
// xors, no multiplies.
template <int R>
__device__ __forceinline__ void threefryRounds(uint32_t (&x)[4], uint32_t k0,
                                               uint32_t k1) {
  const int rot[8][2] = {{10, 26}, {11, 21}, {13, 27}, {23, 5},
                         {6, 20},  {17, 11}, {25, 10}, {18, 20}};
  const uint32_t ks[5] = {k0, k1, 0, 0, 0x1BD11BDAu ^ k0 ^ k1};
  x[0] += ks[0];
  x[1] += ks[1];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    int a = r % 2 ? 3 : 1, c = r % 2 ? 1 : 3;
    x[0] += x[a];
    x[a] = rotl(x[a], rot[r % 8][0]) ^ x[0];
    x[2] += x[c];
    x[c] = rotl(x[c], rot[r % 8][1]) ^ x[2];
    if (r % 4 == 3) {
      int s = r / 4 + 1;
      for (int i = 0; i < 4; ++i)
        x[i] += ks[(s + i) % 5];
      x[3] += s;
    }
  }
}

enum Work {
  PhiloxUniformKeys,
  PhiloxThreadKeys,
  Gelu,
  Lop3,
  ImadWide,
  Threefry12,
  Threefry20
};
const char *workNames[] = {"Philox-4x32-10, keys uniform",
                           "Philox-4x32-10, keys per thread",
                           "GELU(tanh) in f32 (ex2, rcp)",
                           "three-input xors (LOP3)",
                           "32 x 32 -> 64-bit products (IMAD.WIDE)",
                           "Threefry-4x32-12",
                           "Threefry-4x32-20"};

// One loop iteration of workload W: four independent chains, as an epilogue
// has several column groups in flight.
template <Work W>
__device__ __forceinline__ uint32_t work(uint32_t it, uint32_t tid,
                                         const Keys &keys, float &f) {
  uint32_t s = 0;
  if constexpr (W == PhiloxUniformKeys || W == PhiloxThreadKeys ||
                W == Threefry12 || W == Threefry20) {
    // Philox's round keys as coda's kernels hold them (uniform, read from the
    // kernel parameters) or made per thread.
    uint32_t roundKeys[20];
    for (int i = 0; i < 20; ++i)
      roundKeys[i] = keys.k[i] + (W == PhiloxThreadKeys ? tid : 0);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t c[4] = {it * 4 + j, tid, it, 0};
      if constexpr (W == Threefry12)
        threefryRounds<12>(c, keys.k[0], keys.k[1]);
      else if constexpr (W == Threefry20)
        threefryRounds<20>(c, keys.k[0], keys.k[1]);
      else
        philoxRounds(c, roundKeys);
      s += c[0] ^ c[1] ^ c[2] ^ c[3];
    }
  } else if constexpr (W == Gelu) {
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      float x = f + j * 0.01f, e, r;
      float u = x * (0.7978845608f + 0.0356774081f * x * x);
      asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(-2.885390082f * u));
      asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(1.0f + e));
      f = fmaf(x, r, f * 0.5f);
    }
  } else if constexpr (W == Lop3) {
    uint32_t a = it ^ tid, b = tid * 3u, c = it + tid, d = tid ^ 0x55u;
#pragma unroll
    for (int j = 0; j < 40; ++j) {
      a = a ^ b ^ c;
      b = b ^ c ^ d;
      c = c ^ d ^ a;
      d = rotl(d ^ a ^ b, 1);
    }
    s = a + b + c + d;
  } else if constexpr (W == ImadWide) {
    uint32_t v[4] = {it ^ tid, tid * 3u, it + tid, tid ^ 0x55u};
#pragma unroll
    for (int j = 0; j < 20; ++j) {
      uint64_t p[4];
      for (int i = 0; i < 4; ++i)
        p[i] = uint64_t(i % 2 ? 0xCD9E8D57u : 0xD2511F53u) * v[i];
      for (int i = 0; i < 4; ++i)
        v[i] = uint32_t(p[i] >> 32) + uint32_t(p[(i + 1) % 4]);
    }
    s = v[0] + v[1] + v[2] + v[3];
  }
  return s;
}

struct Result {
  unsigned long long sideIterations, mmas, cycles;
};

constexpr int kSmemBytes = 40 * 1024;

template <Work W>
__global__ void __launch_bounds__(384, 1)
    sideWork(unsigned long long mmaCount, long long sleepCycles,
             const __grid_constant__ Keys keys, unsigned *sink,
             Result *results) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ volatile int done;
  if (threadIdx.x == 0)
    done = 0;
  // bf16 operands of moderate size, so the products stay finite.
  for (int i = threadIdx.x; i < kSmemBytes / 4; i += blockDim.x)
    reinterpret_cast<unsigned *>(smem)[i] =
        0x3c003c00u ^ ((i * 2654435761u) & 0x00ff00ffu);
  __syncthreads();
  long long start = clock64();
  Result &result = results[blockIdx.x];
  if (threadIdx.x < 128) {
    unsigned long long n = 0;
    if (mmaCount) {
      float d[128] = {};
      uint32_t base = uint32_t(__cvta_generic_to_shared(smem));
      // Descriptors without swizzling: 128-byte leading, 256-byte stride.
      auto descriptor = [](uint32_t address) {
        return uint64_t((address >> 4) & 0x3FFF) | (8ull << 16) | (16ull << 32);
      };
      mmaLoop(d, n, descriptor(base), descriptor(base + 8192), mmaCount);
      float sum = 0;
      for (float v : d)
        sum += v;
      if (sum == 12345.f)
        sink[threadIdx.x] = 1;
    } else {
      while (clock64() - start < sleepCycles)
        __nanosleep(200);
    }
    __syncwarp();
    if (threadIdx.x == 0) {
      done = 1;
      result.mmas = n;
      result.cycles = clock64() - start;
    }
    return;
  }
  uint32_t tid = threadIdx.x + blockIdx.x * blockDim.x, s = 0, it = 0;
  float f = tid * 1e-3f;
  while (!done) {
    s += work<W>(it, tid, keys, f);
    ++it;
  }
  if (s == 0x12345u || f == 1234.5f)
    sink[tid] = s;
  if (threadIdx.x % 32 == 0)
    atomicAdd(&result.sideIterations, it);
}

static void check(cudaError_t status, const char *what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

template <Work W> void measure(int sideWarpgroups, int sms) {
  unsigned *sink;
  Result *results;
  check(cudaMalloc(&sink, 1 << 20), "cudaMalloc");
  check(cudaMalloc(&results, sizeof(Result) * sms), "cudaMalloc");
  check(cudaFuncSetAttribute(sideWork<W>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             kSmemBytes),
        "cudaFuncSetAttribute");
  Keys keys;
  for (int i = 0; i < 20; ++i)
    keys.k[i] = 0x12345678u + (i / 2) * (i % 2 ? 0xBB67AE85u : 0x9E3779B9u);
  double rate[2], tensor = 0;
  long long cycles = 0;
  for (int busy = 1; busy >= 0; --busy) {
    check(cudaMemset(results, 0, sizeof(Result) * sms), "cudaMemset");
    sideWork<W><<<sms, 128 * (1 + sideWarpgroups), kSmemBytes>>>(
        busy ? 30000 : 0, cycles, keys, sink, results);
    check(cudaDeviceSynchronize(), workNames[W]);
    std::vector<Result> host(sms);
    check(cudaMemcpy(host.data(), results, sizeof(Result) * sms,
                     cudaMemcpyDeviceToHost),
          "cudaMemcpy");
    double iterations = 0, mmas = 0, total = 0;
    for (const Result &r : host) {
      iterations += r.sideIterations;
      mmas += r.mmas;
      total += r.cycles;
    }
    if (busy) {
      cycles = (long long)(total / sms);
      tensor = mmas / total * 64 * 256 * 16 * 2;
    }
    rate[busy] = iterations / (sideWarpgroups * 4) / total * 1e6;
  }
  std::printf("| %s | %d | %.0f | %.0f | %.2f | %.0f |\n", workNames[W],
              4 * sideWarpgroups, rate[0], rate[1], rate[1] / rate[0], tensor);
  cudaFree(sink);
  cudaFree(results);
}

int main() {
  int sms;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0),
        "cudaDeviceGetAttribute");
  std::printf("| workload | warps beside | alone (iterations / Mcycle / warp) "
              "| beside wgmmas | ratio | tensor flops / cycle / SM |\n"
              "|---|---|---|---|---|---|\n");
  for (int side = 1; side <= 2; ++side) {
    measure<PhiloxUniformKeys>(side, sms);
    measure<PhiloxThreadKeys>(side, sms);
    measure<ImadWide>(side, sms);
    measure<Threefry12>(side, sms);
    measure<Threefry20>(side, sms);
    measure<Lop3>(side, sms);
    measure<Gelu>(side, sms);
  }
  return 0;
}
