// DeepInfer's prefill voting across data-parallel ranks. Every rank calls the same vote at the
// same step, so all ranks agree on the step kind and stay in lockstep (a rank with nothing to do
// runs a placeholder step). The parallel issue implements this over a communicator; one rank
// votes alone.
#pragma once

namespace deepinfer {

class PrefillVote {
 public:
  virtual ~PrefillVote() = default;
  virtual bool all(bool local) = 0;  // true iff every rank votes true
  virtual bool any(bool local) = 0;  // true iff some rank votes true
  // Asked when this rank has nothing to run: true if another rank runs a step, in which case
  // this rank takes a placeholder step to stay in lockstep.
  virtual bool others_busy() = 0;
};

class SingleRankVote final : public PrefillVote {
 public:
  bool all(bool local) override { return local; }
  bool any(bool local) override { return local; }
  bool others_busy() override { return false; }
};

}  // namespace deepinfer
