#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sampling/stop_checker.h"

using namespace deepinfer;
using namespace deepinfer::sampling;

namespace {

// Feeds deltas (one per token) and returns the concatenated released text.
struct Feed {
  std::string released;
  std::optional<std::string> stop_string;
  int stopped_at = -1;  // index of the delta that completed the stop string
};

Feed feed(StopStringTracker& t, const std::vector<std::string>& deltas) {
  Feed f;
  for (size_t i = 0; i < deltas.size(); ++i) {
    auto up = t.append(deltas[i], static_cast<int64_t>(i + 1));
    f.released += up.released;
    if (up.stop_string) {
      f.stop_string = up.stop_string;
      f.stopped_at = static_cast<int>(i);
      break;
    }
  }
  return f;
}

SamplingParams with_stop(std::vector<std::string> stop, bool include = false) {
  SamplingParams p;
  p.stop = std::move(stop);
  p.include_stop_str_in_output = include;
  return p;
}

}  // namespace

TEST(TokenStop, EosStopTokensAndLength) {
  SamplingParams p;
  p.stop_token_ids = {7};
  p.max_tokens = 3;
  const std::vector<int32_t> eos = {2};
  EXPECT_FALSE(check_token_stop(p, eos, 5, 1, 11, 0));

  auto f = check_token_stop(p, eos, 2, 1, 11, 0);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->reason, FinishReason::kStop);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(f->stop_reason));
  EXPECT_STREQ(finish_reason_name(f->reason), "stop");

  f = check_token_stop(p, eos, 7, 2, 12, 0);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->reason, FinishReason::kStop);
  EXPECT_EQ(std::get<int32_t>(f->stop_reason), 7);

  f = check_token_stop(p, eos, 5, 3, 13, 0);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->reason, FinishReason::kLength);
  EXPECT_STREQ(finish_reason_name(f->reason), "length");

  // EOS on the last allowed token is a natural stop.
  f = check_token_stop(p, eos, 2, 3, 13, 0);
  EXPECT_EQ(f->reason, FinishReason::kStop);

  p.ignore_eos = true;
  EXPECT_FALSE(check_token_stop(p, eos, 2, 1, 11, 0));
  EXPECT_TRUE(check_token_stop(p, eos, 7, 1, 11, 0));  // stop ids still apply

  // max_tokens unset: only the context ends it.
  p.max_tokens.reset();
  EXPECT_FALSE(check_token_stop(p, eos, 5, 100000, 100010, 0));
  f = check_token_stop(p, eos, 5, 90, 100, 100);
  EXPECT_EQ(f->reason, FinishReason::kLength);
}

TEST(TokenStop, MinTokensDefersStopsButNotTheContextLimit) {
  SamplingParams p;
  p.min_tokens = 3;
  p.stop_token_ids = {7};
  const std::vector<int32_t> eos = {2};
  EXPECT_FALSE(check_token_stop(p, eos, 2, 2, 12, 0));
  EXPECT_FALSE(check_token_stop(p, eos, 7, 2, 12, 0));
  EXPECT_TRUE(check_token_stop(p, eos, 2, 3, 13, 0));
  auto f = check_token_stop(p, eos, 2, 2, 12, 12);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->reason, FinishReason::kLength);
}

TEST(StopStrings, FindAcrossBoundary) {
  const std::vector<std::string> stop = {"world"};
  // "Hello wor" was checked; "ld!" is new.
  auto m = find_stop_string("Hello world!", 3, stop, false);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->stop_index, 0u);
  EXPECT_EQ(m->position, 6u);
  EXPECT_EQ(m->truncate_to, 6u);
  m = find_stop_string("Hello world!", 3, stop, true);
  EXPECT_EQ(m->truncate_to, 11u);
  // A match that ended in already-checked text is not reported again.
  EXPECT_FALSE(find_stop_string("Hello world!", 1, stop, false));
  EXPECT_FALSE(find_stop_string("Hello world!", 0, stop, false));
}

TEST(StopStrings, EarliestMatchWins) {
  const std::vector<std::string> stop = {"cd", "bcx", "b"};
  auto m = find_stop_string("abcdef", 6, stop, false);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->stop_index, 2u);  // "b" starts at 1, before "cd" at 2
  EXPECT_EQ(m->truncate_to, 1u);
  const std::vector<std::string> same_start = {"bcd", "bc"};
  m = find_stop_string("abcdef", 6, same_start, true);
  EXPECT_EQ(m->stop_index, 0u);  // same start: earlier entry
  EXPECT_EQ(m->truncate_to, 4u);
}

TEST(StopStrings, HoldBack) {
  const std::vector<std::string> stop = {"\n\n", "cde"};
  EXPECT_EQ(stop_hold_back("abc\n", stop, false), 1u);
  EXPECT_EQ(stop_hold_back("abc", stop, false), 1u);
  EXPECT_EQ(stop_hold_back("abcd", stop, false), 2u);
  EXPECT_EQ(stop_hold_back("abcdx", stop, false), 0u);
  EXPECT_EQ(stop_hold_back("c", stop, false), 1u);
  EXPECT_EQ(stop_hold_back("", stop, false), 0u);
  EXPECT_EQ(stop_hold_back("abcd", stop, true), 0u);
  // A complete stop string is not a proper prefix; its tail may still be one.
  const std::vector<std::string> aa = {"aa"};
  EXPECT_EQ(stop_hold_back("xaa", aa, false), 1u);
}

TEST(StopStringTracker, StopsAcrossTokensAndExcludesStop) {
  StopStringTracker t(with_stop({"world"}));
  const auto f = feed(t, {"He", "llo", " wo", "rl", "d and more"});
  EXPECT_EQ(f.stop_string, "world");
  EXPECT_EQ(f.stopped_at, 4);
  EXPECT_EQ(f.released, "Hello ");
  EXPECT_EQ(t.text(), "Hello ");
  EXPECT_TRUE(t.stopped());
}

TEST(StopStringTracker, IncludeStopStringInOutput) {
  StopStringTracker t(with_stop({"world"}, true));
  const auto f = feed(t, {"He", "llo", " wo", "rl", "d and more"});
  EXPECT_EQ(f.stop_string, "world");
  EXPECT_EQ(f.released, "Hello world");
  EXPECT_EQ(t.text(), "Hello world");
}

TEST(StopStringTracker, HeldBackTextIsReleasedOnFalseStart) {
  StopStringTracker t(with_stop({"abc"}));
  auto up = t.append("xa", 1);
  EXPECT_EQ(up.released, "x");  // "a" could start "abc"
  up = t.append("b", 2);
  EXPECT_EQ(up.released, "");  // "ab" still could
  up = t.append("x", 3);
  EXPECT_EQ(up.released, "abx");
  EXPECT_FALSE(up.stop_string);
  up = t.append("ab", 4);
  EXPECT_EQ(up.released, "");
  EXPECT_EQ(t.flush(), "ab");  // finished by EOS / length: the tail goes out
  EXPECT_EQ(t.text(), "xabxab");
  EXPECT_EQ(t.released(), t.text().size());
}

TEST(StopStringTracker, MatchInsideOneDelta) {
  StopStringTracker t(with_stop({"\n\n", "END"}));
  const auto f = feed(t, {"one\n", "two END three\n\nfour"});
  EXPECT_EQ(f.stop_string, "END");
  EXPECT_EQ(t.text(), "one\ntwo ");
  EXPECT_EQ(f.released, "one\ntwo ");
}

TEST(StopStringTracker, MinTokensGatesMatching) {
  SamplingParams p = with_stop({"ab"});
  p.min_tokens = 2;
  StopStringTracker t(p);
  EXPECT_FALSE(t.append("ab", 1).stop_string);  // too early: ignored for good
  EXPECT_FALSE(t.append("c", 2).stop_string);   // needs > min_tokens outputs
  const auto up = t.append("xab", 3);
  EXPECT_EQ(up.stop_string, "ab");
  EXPECT_EQ(t.text(), "abcx");

  // A match may start in text produced before min_tokens was reached.
  p.min_tokens = 1;
  StopStringTracker s(p);
  auto a = s.append("a", 1);
  EXPECT_EQ(a.released, "");
  a = s.append("b", 2);
  EXPECT_EQ(a.stop_string, "ab");
  EXPECT_EQ(s.text(), "");
}

TEST(StopStringTracker, Utf8StopStrings) {
  StopStringTracker t(with_stop({"世界"}));
  auto up = t.append("你好世", 1);
  EXPECT_EQ(up.released, "你好");  // the 3 bytes of 世 are held back whole
  up = t.append("界!", 2);
  EXPECT_EQ(up.stop_string, "世界");
  EXPECT_EQ(t.text(), "你好");
}

TEST(StopStringTracker, NoStopStringsStreamsEverything) {
  StopStringTracker t(SamplingParams{});
  EXPECT_EQ(t.append("abc", 1).released, "abc");
  EXPECT_EQ(t.append("\n\n", 2).released, "\n\n");
  EXPECT_EQ(t.flush(), "");
}
