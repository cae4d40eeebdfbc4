// Machine peaks for the roofline and the clock that times a step.
//
// Peaks: given by flags, else probed here: memory bandwidth from a multithreaded memcpy on the
// CPU or a device-to-device copy through the backend (bytes read + written per second, best of
// several runs over buffers far larger than the caches) and compute from a GEMM through the
// backend (the same matmul the model uses, in its weight dtype). Probed peaks are what this
// backend reaches, not the datasheet's.
//
// Timing: a StepTimer brackets one forward step. On the CPU the forward has finished when
// forward_batch returns, so a steady clock is exact. On CUDA (builds with the CUDA backend)
// make_step_timer returns a timer of CUDA events recorded on the backend's stream around the
// step. Any other device falls back to the steady clock, which stays correct because the runner
// downloads the logits (a synchronisation) before it stops the timer.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "bench/roofline.h"

namespace deepinfer::bench {

struct ProbedPeaks {
  MachinePeaks peaks;
  double memcpy_gbs = 0;    // achieved, bytes read + written
  double gemm_tflops = 0;   // achieved fp32 GEMM
  std::string description;  // how each number was obtained
};

// Probes what the flags leave unset (a flag value > 0 wins). Takes about a second.
ProbedPeaks machine_peaks(Backend& backend, double peak_gbs_flag, double peak_tflops_flag);

class StepTimer {
 public:
  virtual ~StepTimer() = default;
  virtual void start() = 0;
  // Seconds since start(), once the step's work is complete.
  virtual double stop() = 0;
  virtual const char* name() const = 0;
  // Marks the logged steps for a profiler attached from outside (CUDA: cudaProfilerStart /
  // Stop, so `ncu --profile-from-start off` sees only them); nothing elsewhere.
  virtual void profile(bool on) { (void)on; }
};

class SteadyClockTimer : public StepTimer {
 public:
  void start() override { t0_ = std::chrono::steady_clock::now(); }
  double stop() override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }
  const char* name() const override { return "steady_clock"; }

 private:
  std::chrono::steady_clock::time_point t0_;
};

// The timer for a backend's device (see the note above for device backends).
std::unique_ptr<StepTimer> make_step_timer(Backend& backend);

// The per-element byte sizes a backend moves: its weight dtype for matrices (fp32 CPU, bf16
// CUDA), fp32 parameters and fp32 state.
RooflineDtypes backend_dtypes(const Backend& backend);

}  // namespace deepinfer::bench
