// Counter-based RNG for sampling: Philox4x32-10 (Salmon et al., SC'11, as in Random123).
//
// Every random number is a pure function of (key, counter), so a token's draw depends only on its
// sequence's seed and its position: never on batch companions, step order or preemption. Only
// 32-bit multiply / xor / add are used, so a CUDA kernel can reproduce it bit for bit.
//
// Mapping used by the sampler (keep any device port identical):
//   key     = { lo32(seq_seed), hi32(seq_seed) }
//   counter = { lo32(position), hi32(position), stream, 0 }   position as uint64 two's complement
//   u       = float(out[0] >> 8) * 2^-24                       exact, in [0, 1)
// `position` is the absolute index of the token being sampled in its sequence (prompt length +
// tokens generated so far); `stream` separates independent uses at one position.
#pragma once

#include <array>
#include <cstdint>

namespace deepinfer::sampling {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// Streams at one position. kSampleStream draws the token; others are reserved for later users
// (e.g. speculative-decoding acceptance) so they never reuse the sampler's number.
enum RngStream : uint32_t {
  kSampleStream = 0,
  kSpecAcceptStream = 1,
};

namespace philox_detail {
constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments

constexpr PhiloxCounter round(PhiloxCounter c, PhiloxKey k) {
  const uint64_t p0 = uint64_t{kM0} * c[0];
  const uint64_t p1 = uint64_t{kM1} * c[2];
  const auto hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
  const auto hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
  return {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
}
}  // namespace philox_detail

// One Philox4x32 block with 10 rounds; the key is bumped between rounds.
constexpr PhiloxCounter philox4x32_10(PhiloxCounter ctr, PhiloxKey key) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      key[0] += philox_detail::kW0;
      key[1] += philox_detail::kW1;
    }
    ctr = philox_detail::round(ctr, key);
  }
  return ctr;
}

constexpr PhiloxKey philox_key(uint64_t seed) {
  return {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
}

constexpr PhiloxCounter philox_counter(int64_t position, uint32_t stream) {
  const auto pos = static_cast<uint64_t>(position);
  return {static_cast<uint32_t>(pos), static_cast<uint32_t>(pos >> 32), stream, 0u};
}

// Top 24 bits -> a float in [0, 1): every value is exactly representable, and 1.0 is impossible.
constexpr float u32_to_unit_float(uint32_t x) {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}

// All four 32-bit words at (seed, position, stream).
constexpr PhiloxCounter random_bits(uint64_t seed, int64_t position, uint32_t stream) {
  return philox4x32_10(philox_counter(position, stream), philox_key(seed));
}

// The top 24 bits of word 0: the sampler's uniform as an integer, u = bits24 * 2^-24.
constexpr uint32_t uniform_bits24(uint64_t seed, int64_t position,
                                  uint32_t stream = kSampleStream) {
  return random_bits(seed, position, stream)[0] >> 8;
}

// The uniform the sampler uses for the token at `position` (word 0 of the block).
constexpr float uniform(uint64_t seed, int64_t position, uint32_t stream = kSampleStream) {
  return u32_to_unit_float(random_bits(seed, position, stream)[0]);
}

}  // namespace deepinfer::sampling
