// Micro-benchmark of a few CUDA backend ops at decode / prefill shapes, each printed next to its
// memory roofline (bytes moved / 4.3 TB/s, the copy rate measured on an H200 here). Ops are
// timed one at a time from the host (launch gaps included), so small ops read high.
//   cuda_op_bench [section...]   (needs a GPU; exits 0 with a note when there is none)
// Sections: matmul, split, fp32x, invariance, attention, indexer, experts, topk (default: all).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device_info.h"
#include "backend/cuda/kernels.h"
#include "core/dtype.h"

using namespace deepinfer;

namespace {

constexpr double kBandwidth = 4.3e12;

Tensor random_dev(Backend& g, std::initializer_list<int64_t> shape, DType dtype, uint64_t seed) {
  Tensor t = g.empty(shape, dtype);
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  if (dtype == DType::kBF16) {
    std::vector<uint16_t> h(t.numel());
    for (auto& v : h) v = f32_to_bf16(d(gen) * 0.05f);
    g.upload(h.data(), t);
  } else {
    std::vector<float> h(t.numel());
    for (auto& v : h) v = d(gen);
    g.upload(h.data(), t);
  }
  return t;
}

// Median of `reps` timed runs (each `inner` calls, synchronised), in seconds per call.
double time_op(const std::function<void()>& op, int inner = 20, int reps = 7) {
  op();
  cudaDeviceSynchronize();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < inner; ++i) op();
    cudaDeviceSynchronize();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                inner);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Device time per call of `op` replayed as a CUDA graph of `inner` calls (kernels back to back
// as in a decode step's graph, no host launch gaps), median of `reps` replays, in seconds.
double time_graph(Backend& g, const std::function<void()>& op, int inner = 20, int reps = 5) {
  cudaStream_t stream = cuda_stream(g);
  op();  // warms the allocator's cache, so the capture allocates nothing new
  cudaStreamSynchronize(stream);
  cudaGraph_t graph;
  cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed);
  for (int i = 0; i < inner; ++i) op();
  cudaStreamEndCapture(stream, &graph);
  cudaGraphExec_t exec;
  cudaGraphInstantiate(&exec, graph, 0);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaGraphLaunch(exec, stream);
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(e0, stream);
    cudaGraphLaunch(exec, stream);
    cudaEventRecord(e1, stream);
    cudaEventSynchronize(e1);
    float ms = 0.f;
    cudaEventElapsedTime(&ms, e0, e1);
    t.push_back(ms * 1e-3 / inner);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void row(const char* what, double sec, double bytes) {
  const double floor = bytes / kBandwidth;
  std::printf("%-44s %10.1f us %9.1f GB/s  roofline %8.1f us  (%.2fx)\n", what, sec * 1e6,
              bytes / sec / 1e9, floor * 1e6, sec / floor);
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> only(argv + 1, argv + argc);
  const auto want = [&](const char* section) {
    return only.empty() || std::find(only.begin(), only.end(), section) != only.end();
  };
  if (cuda::list_devices().empty()) {
    std::printf("cuda_op_bench: no CUDA device (%s)\n", cuda::unavailable_reason().c_str());
    return 0;
  }
  auto g = make_cuda_backend();
  std::printf("%-44s %13s %14s %20s\n", "op", "time", "achieved", "memory floor");
  // bf16 GEMM: the weight read dominates at decode sizes. V4-Flash's products: wo_b (4096 x
  // 8192), wq_b (32768 x 1024), a CSA layer's fused input projections (2560 x 4096), the MoE
  // block's router + shared gate / up (4352 x 4096).
  if (want("matmul"))
    for (auto [N, K] : std::vector<std::pair<int64_t, int64_t>>{{4096, 4096},
                                                                {16384, 4096},
                                                                {4096, 8192},
                                                                {32768, 1024},
                                                                {2560, 4096},
                                                                {4352, 4096}}) {
      Tensor w = random_dev(*g, {N, K}, DType::kBF16, 1);
      for (int64_t M : {1, 8, 64, 256}) {
        Tensor x = random_dev(*g, {M, K}, DType::kF32, 2);
        Tensor out = g->empty({M, N});
        const double s = time_op([&] { g->matmul(x, w, out); });
        if (M == 256) std::printf("%-44s %10.1f TFLOP/s\n", "", 2.0 * M * N * K / s / 1e12);
        char name[96];
        std::snprintf(name, sizeof name, "matmul bf16 M=%lld N=%lld K=%lld", (long long)M,
                      (long long)N, (long long)K);
        row(name, s, N * K * 2.0 + M * K * 4.0 + M * N * 4.0);
      }
    }
  // The same products with K split for different one-row block targets (kernels.h), device
  // time in a graph (the cast of x to bf16 included), microseconds. Consecutive calls read
  // different copies of the weights, >= 200 MB apart, so they come from HBM as in a model step
  // (one matrix called back to back would be served by the 50 MB L2).
  if (want("split")) {
    const std::vector<int64_t> targets{0, 264, 528, 792, 1584, 3168};
    std::printf("dense split sweep (us per matmul in a graph); target one-row blocks:");
    for (int64_t t : targets) std::printf(" %7lld", (long long)t);
    std::printf("   roofline\n");
    for (auto [N, K] : std::vector<std::pair<int64_t, int64_t>>{
             {4096, 4096}, {4096, 8192}, {2560, 4096}, {4352, 4096}, {1024, 4096}, {512, 4096}}) {
      const int64_t copies = (200 * (int64_t{1} << 20) + N * K * 2 - 1) / (N * K * 2);
      std::vector<Tensor> ws;
      for (int64_t c = 0; c < std::min<int64_t>(copies, 20); ++c)
        ws.push_back(random_dev(*g, {N, K}, DType::kBF16, 1 + c));
      for (int64_t M : {1, 8, 64, 256}) {
        Tensor x = random_dev(*g, {M, K}, DType::kF32, 2);
        Tensor out = g->empty({M, N});
        std::printf("  N=%5lld K=%5lld M=%3lld splits:", (long long)N, (long long)K, (long long)M);
        std::vector<double> us;
        for (int64_t t : targets) {
          cuda::set_dense_split_target(t);
          std::printf(" %2d", cuda::dense_gemm_split(N, K, 1).splits);
          size_t call = 0;
          us.push_back(time_graph(*g, [&] { g->matmul(x, ws[call++ % ws.size()], out); }) * 1e6);
        }
        std::printf("  us:");
        for (double u : us) std::printf(" %7.2f", u);
        std::printf("   %7.2f\n", (N * K * 2.0 + M * K * 4.0 + M * N * 4.0) / kBandwidth * 1e6);
      }
    }
    cuda::set_dense_split_target(cuda::kDenseSplitTargetBlocks);
  }
  // Decode-sized products reading fp32 x themselves (launch_dense_gemm_f32) against the cast
  // and the bf16-x product, device time in a graph, weight copies as above.
  if (want("fp32x")) {
    std::printf("fp32 x read by the product vs cast + product (us per matmul in a graph):\n");
    for (auto [N, K] : std::vector<std::pair<int64_t, int64_t>>{
             {4096, 8192}, {32768, 1024}, {2560, 4096}, {4352, 4096}, {4096, 2048}}) {
      const int64_t copies = (200 * (int64_t{1} << 20) + N * K * 2 - 1) / (N * K * 2);
      std::vector<Tensor> ws;
      for (int64_t c = 0; c < std::min<int64_t>(copies, 20); ++c)
        ws.push_back(random_dev(*g, {N, K}, DType::kBF16, 1 + c));
      for (int64_t M : {1, 2, 8}) {
        Tensor x = random_dev(*g, {M, K}, DType::kF32, 2);
        Tensor out = g->empty({M, N});
        double us[2];
        for (int f32 = 0; f32 < 2; ++f32) {
          cuda::set_dense_gemm_f32(f32 == 1);
          size_t call = 0;
          us[f32] = time_graph(*g, [&] { g->matmul(x, ws[call++ % ws.size()], out); }) * 1e6;
        }
        cuda::set_dense_gemm_f32(true);
        std::printf(
            "  N=%5lld K=%5lld M=%lld: cast + product %7.2f us, from fp32 %7.2f us%s, "
            "roofline %6.2f\n",
            (long long)N, (long long)K, (long long)M, us[0], us[1],
            cuda::dense_gemm_f32_supported(M, N, K, 1, K, K, x.view().data_as<float>(),
                                           ws[0].view().data())
                ? ""
                : " (not taken)",
            (N * K * 2.0 + M * K * 4.0 + M * N * 4.0) / kBandwidth * 1e6);
      }
    }
  }
  // Does a row's product depend on how many rows share the matmul? (the engine's determinism
  // per seq_seed needs it not to): row 0 alone vs inside batches, bitwise, at model shapes.
  if (want("invariance"))
    for (auto [N, K] : std::vector<std::pair<int64_t, int64_t>>{
             {4096, 8192}, {32768, 1024}, {2560, 4096}, {4352, 4096}, {129280, 4096}}) {
      Tensor w = random_dev(*g, {N, K}, DType::kBF16, 21);
      Tensor x = random_dev(*g, {256, K}, DType::kF32, 22);
      std::vector<float> alone(N), batched(N);
      Tensor out1 = g->empty({1, N});
      g->matmul(x.view().slice_rows(0, 1), w, out1);
      g->download(out1, alone.data());
      std::printf("matmul N=%lld K=%lld row 0 alone vs batched:", (long long)N, (long long)K);
      for (int64_t M : {2, 8, 64, 256}) {
        Tensor outM = g->empty({M, N});
        g->matmul(x.view().slice_rows(0, M), w, outM);
        g->download(outM.view().slice_rows(0, 1), batched.data());
        int64_t differ = 0;
        for (int64_t i = 0; i < N; ++i) differ += alone[i] != batched[i];
        std::printf("  M=%lld: %lld differ", (long long)M, (long long)differ);
      }
      std::printf("\n");
    }
  // Attention, 64 heads of 512: window 128 + 512 selected compressed entries per query.
  if (want("attention"))
    for (int64_t M : {1, 8, 64, 256, 4096}) {
      const int64_t H = 64, hd = 512, W = 128, E = 16384, K = 512;
      Tensor q = random_dev(*g, {M, H, hd}, DType::kF32, 3);
      Tensor win = random_dev(*g, {W - 1 + M, hd}, DType::kF32, 4);
      Tensor comp = random_dev(*g, {E, hd}, DType::kF32, 5);
      Tensor sinks = random_dev(*g, {H}, DType::kF32, 6);
      std::vector<int32_t> idx(M * K);
      for (int64_t j = 0; j < M * K; ++j) idx[j] = static_cast<int32_t>((j * 7919) % E);
      Tensor didx = g->empty({M, K}, DType::kI32);
      g->upload(idx.data(), didx);
      Tensor out = g->empty({M, H, hd});
      const double s =
          time_op([&] { g->attention(q, win, W, comp, didx, TensorView(), sinks, 0.04f, out); });
      char name[96];
      std::snprintf(name, sizeof name, "attention H=64 hd=512 keys=128+512 M=%lld", (long long)M);
      const double flops = 4.0 * M * H * (W + K) * hd;
      row(name, s, M * (W + K) * hd * 4.0 + 2 * M * H * hd * 4.0);
      std::printf("%-44s %10.1f TFLOP/s\n", "", flops / s / 1e12);
    }
  // One decode query (M = 1), 64 heads of 512: how the time grows with the keys it sees (the
  // window's 128, then a prefix of compressed entries as HCA sees them, then CSA's 512 picks).
  if (want("attention")) {
    const int64_t H = 64, hd = 512, W = 128, E = 2048;
    Tensor q = random_dev(*g, {1, H, hd}, DType::kF32, 3);
    Tensor win = random_dev(*g, {W, hd}, DType::kF32, 4);
    Tensor comp = random_dev(*g, {E, hd}, DType::kF32, 5);
    Tensor sinks = random_dev(*g, {H}, DType::kF32, 6);
    Tensor out = g->empty({1, H, hd});
    for (int32_t n : {0, 32, 128, 512, 2048}) {
      Tensor vis = g->empty({1}, DType::kI32);
      g->upload(&n, vis);
      const double s = time_op([&] {
        g->attention(q, win, W, n > 0 ? comp.view() : TensorView(), TensorView(),
                     n > 0 ? vis.view() : TensorView(), sinks, 0.04f, out);
      });
      char name[96];
      std::snprintf(name, sizeof name, "attention M=1 keys=128+%d (prefix)", n);
      row(name, s, (W + n) * hd * 4.0 + 2 * H * hd * 4.0);
    }
    std::vector<int32_t> idx(512);
    for (int64_t j = 0; j < 512; ++j) idx[j] = static_cast<int32_t>((j * 7919) % 1024);
    Tensor didx = g->empty({1, 512}, DType::kI32);
    g->upload(idx.data(), didx);
    const TensorView comp1k = comp.view().slice_rows(0, 1024);
    const double s =
        time_op([&] { g->attention(q, win, W, comp1k, didx, TensorView(), sinks, 0.04f, out); });
    row("attention M=1 keys=128+512 of 1024 (comp_idx)", s, 640 * hd * 4.0 + 2 * H * hd * 4.0);
  }
  // Indexer scores at 64k context (16k compressed entries), 64 heads of 128, every entry
  // visible: the fused wgmma kernel and the fp32 GEMM + reduction it replaces.
  if (want("indexer"))
    for (int64_t M : {1, 64, 256, 4096}) {
      const int64_t E = 16384, nh = 64, d = 128;
      Tensor q = random_dev(*g, {M, nh, d}, DType::kF32, 8);
      Tensor k = random_dev(*g, {E, d}, DType::kF32, 9);
      Tensor w = random_dev(*g, {M, nh}, DType::kF32, 10);
      std::vector<int32_t> vis(M, static_cast<int32_t>(E));
      Tensor dvis = g->empty({M}, DType::kI32);
      g->upload(vis.data(), dvis);
      Tensor scores = g->empty({M, E});
      for (bool wgmma : {true, false}) {
        if (!set_cuda_wgmma(*g, wgmma) && wgmma) continue;
        const double t = time_op([&] { g->indexer_scores(q, k, w, 0.01f, dvis, scores); },
                                 M >= 256 ? 3 : 20, M >= 256 ? 3 : 7);
        char name[96];
        std::snprintf(name, sizeof name, "indexer_scores E=16384 nh=64 d=128 M=%lld %s",
                      (long long)M, wgmma ? "wgmma" : "gemm");
        row(name, t, E * d * 4.0 + M * E * 4.0);
        std::printf("%-44s %10.1f TFLOP/s (fp32-equivalent)\n", "",
                    2.0 * M * nh * E * d / t / 1e12);
      }
      set_cuda_wgmma(*g, true);
    }
  // Routed experts, V4-Flash shapes: 256 experts, top-6, D 4096, I 2048.
  if (want("experts")) {
    const int64_t E = 256, D = 4096, I = 2048, k = 6;
    Tensor w1 = random_dev(*g, {E, I, D}, DType::kBF16, 11);
    Tensor w3 = random_dev(*g, {E, I, D}, DType::kBF16, 12);
    Tensor w2 = random_dev(*g, {E, D, I}, DType::kBF16, 13);
    for (int64_t M : {1, 8, 64, 256, 4096, 16384}) {
      Tensor x = random_dev(*g, {M, D}, DType::kF32, 14);
      std::mt19937_64 gen(15);
      std::vector<int32_t> ids(M * k);
      std::vector<char> used(E, 0);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t j = 0; j < k; ++j) {
          ids[m * k + j] = static_cast<int32_t>((gen() % (E / k)) * k + j);  // distinct per token
          used[ids[m * k + j]] = 1;
        }
      Tensor idx = g->empty({M, k}, DType::kI32);
      g->upload(ids.data(), idx);
      Tensor wts = random_dev(*g, {M, k}, DType::kF32, 16);
      Tensor out = g->empty({M, D});
      // Prefill-sized batches: the wgmma kernels and the mma.sync tiles they replace.
      for (bool wgmma : {true, false}) {
        if (!set_cuda_wgmma(*g, wgmma) && wgmma) continue;
        const double t = time_op(
            [&] {
              g->moe_experts(x, idx, wts, {w1, w3, w2}, 10.f, TensorView(), out);
            },
            M >= 4096 ? 3 : 20, M >= 4096 ? 3 : 7);
        const double active = static_cast<double>(std::count(used.begin(), used.end(), 1));
        char name[96];
        std::snprintf(name, sizeof name, "moe_experts E=256 k=6 D=4096 I=2048 M=%lld%s",
                      (long long)M,
                      M * k <= 8 * E ? ""
                      : wgmma        ? " wgmma"
                                     : " mma.sync");
        row(name, t, active * 3 * D * I * 2.0);
        std::printf("%-44s %10.1f TFLOP/s\n", "", 6.0 * M * k * D * I / t / 1e12);
        if (M * k <= 8 * E) break;  // decode tiles either way
      }
      set_cuda_wgmma(*g, true);
    }
  }
  // Indexer top-k at 4k and 64k context (1k / 16k compressed entries), k = 512.
  if (want("topk"))
    for (int64_t N : {1024, 16384})
      for (int64_t M : {1, 64}) {
        Tensor s = random_dev(*g, {M, N}, DType::kF32, 7);
        Tensor idx = g->empty({M, 512}, DType::kI32);
        const double t = time_op([&] { g->topk(s, 512, idx); });
        char name[96];
        std::snprintf(name, sizeof name, "topk k=512 of N=%lld, M=%lld", (long long)N,
                      (long long)M);
        row(name, t, M * N * 4.0);
      }
  return 0;
}
