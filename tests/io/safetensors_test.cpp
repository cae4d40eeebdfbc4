#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>

#include "test_util.h"

namespace deepinfer {
namespace {

using testing::bf16_tensor;
using testing::expect_error;
using testing::f32_tensor;
using testing::i64_tensor;
using testing::raw_file;
using testing::raw_tensor;
using testing::safetensors_bytes;
using testing::TempDir;
using testing::write_file;

TEST(Safetensors, ReadsTensorsAndMetadata) {
  TempDir dir;
  const auto path = dir / "a.safetensors";
  write_file(path, safetensors_bytes({f32_tensor("x", {2, 2}, {1, 2, 3, 4}),
                                      bf16_tensor("y", {3}, {0.5f, -1.0f, 2.0f}),
                                      i64_tensor("ids", {2}, {7, -3})}));
  auto f = SafetensorsFile::open(path.string());
  ASSERT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  const auto& x = f->get("x");
  EXPECT_EQ(x.dtype, DType::kF32);
  EXPECT_EQ(x.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(x.numel(), 4);
  EXPECT_EQ(x.nbytes(), 16u);
  float v[4];
  std::memcpy(v, x.data, 16);
  EXPECT_EQ(v[3], 4.0f);
  const auto& y = f->get("y");
  EXPECT_EQ(y.dtype, DType::kBF16);
  uint16_t b;
  std::memcpy(&b, y.data + 2, 2);
  EXPECT_EQ(bf16_to_f32(b), -1.0f);
  const auto& ids = f->get("ids");
  int64_t id;
  std::memcpy(&id, ids.data + 8, 8);
  EXPECT_EQ(id, -3);
  EXPECT_EQ(f->find("nope"), nullptr);
}

TEST(Safetensors, AcceptsPackedFp4EmptyTensorsAndGaps) {
  TempDir dir;
  const auto path = dir / "a.safetensors";
  // F4 [4, 8] packs two per byte: 16 bytes. Empty tensors share an offset harmlessly; a gap
  // between tensors is tolerated (only overlap is corrupt).
  const std::string header = R"({"w":{"dtype":"F4","shape":[4,8],"data_offsets":[0,16]},)"
                             R"("e1":{"dtype":"F32","shape":[0],"data_offsets":[16,16]},)"
                             R"("e2":{"dtype":"BF16","shape":[2,0],"data_offsets":[16,16]},)"
                             R"("s":{"dtype":"F8_E8M0","shape":[4],"data_offsets":[20,24]}})";
  write_file(path, raw_file(header, std::string(24, '\x01')));
  auto f = SafetensorsFile::open(path.string());
  EXPECT_EQ(f->get("w").dtype, DType::kFP4E2M1);
  EXPECT_EQ(f->get("e2").numel(), 0);
  EXPECT_EQ(f->get("s").dtype, DType::kE8M0);
}

// Writes `header` + `data` and expects open() to fail naming the file and `parts`.
void expect_bad_file(const std::string& header, const std::string& data, ErrorCode code,
                     std::initializer_list<std::string> parts) {
  TempDir dir;
  const auto path = dir / "bad.safetensors";
  write_file(path, raw_file(header, data));
  expect_error([&] { SafetensorsFile::open(path.string()); }, code, parts);
  expect_error([&] { SafetensorsFile::open(path.string()); }, code, {path.string()});
}

TEST(Safetensors, RejectsTruncatedFiles) {
  TempDir dir;
  const auto tiny = dir / "tiny.safetensors";
  write_file(tiny, std::string("\x05\x00\x00", 3));
  expect_error([&] { SafetensorsFile::open(tiny.string()); }, ErrorCode::kCorrupt,
               {tiny.string(), "truncated"});
  const auto empty = dir / "empty.safetensors";
  write_file(empty, "");
  expect_error([&] { SafetensorsFile::open(empty.string()); }, ErrorCode::kCorrupt,
               {empty.string(), "truncated"});
  // A whole file cut short in its data section.
  const auto cut = dir / "cut.safetensors";
  std::string bytes =
      safetensors_bytes({f32_tensor("a", {4}, {1, 2, 3, 4}), f32_tensor("b", {4}, {5, 6, 7, 8})});
  write_file(cut, bytes.substr(0, bytes.size() - 6));
  expect_error([&] { SafetensorsFile::open(cut.string()); }, ErrorCode::kCorrupt,
               {cut.string(), "'b'", "truncated"});
}

TEST(Safetensors, RejectsHeaderLengthPastEof) {
  TempDir dir;
  const auto path = dir / "bad.safetensors";
  std::string bytes = raw_file("{}", "");
  bytes[0] = '\xE8';  // claims 1000 header bytes in a 10-byte file
  bytes[1] = '\x03';
  write_file(path, bytes);
  expect_error([&] { SafetensorsFile::open(path.string()); }, ErrorCode::kCorrupt,
               {path.string(), "header length 1000", "past the end"});
}

TEST(Safetensors, RejectsInvalidJson) {
  expect_bad_file("{\"a\": {\"dtype\": ", "", ErrorCode::kCorrupt, {"invalid JSON"});
  expect_bad_file("[1, 2]", "", ErrorCode::kCorrupt, {"expected an object"});
  expect_bad_file(R"({"a": 3})", "", ErrorCode::kCorrupt, {"'a'", "not an object"});
}

TEST(Safetensors, RejectsMissingOrMistypedFields) {
  expect_bad_file(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", "abcd", ErrorCode::kCorrupt,
                  {"'w'", "lacks 'shape'"});
  expect_bad_file(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", "abcd", ErrorCode::kCorrupt,
                  {"'w'", "lacks 'dtype'"});
  expect_bad_file(R"({"w":{"dtype":"F32","shape":[1]}})", "abcd", ErrorCode::kCorrupt,
                  {"'w'", "lacks 'data_offsets'"});
  expect_bad_file(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "abcd",
                  ErrorCode::kCorrupt, {"'w'", "shape entry -1"});
  expect_bad_file(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", "abcd",
                  ErrorCode::kCorrupt, {"'w'", "shape entry 1.5"});
  expect_bad_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", "abcd",
                  ErrorCode::kCorrupt, {"'w'", "data_offsets"});
  expect_bad_file(R"({"__metadata__":{"k":3}})", "", ErrorCode::kCorrupt, {"__metadata__", "'k'"});
}

TEST(Safetensors, RejectsUnknownDtype) {
  expect_bad_file(R"({"w":{"dtype":"Q7","shape":[1],"data_offsets":[0,1]}})", "a",
                  ErrorCode::kUnsupported, {"'w'", "unknown dtype 'Q7'"});
}

TEST(Safetensors, RejectsOffsetsOutOfBounds) {
  expect_bad_file(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", "abcd",
                  ErrorCode::kCorrupt, {"'w'", "[0, 16]", "past the end"});
  expect_bad_file(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", "abcd",
                  ErrorCode::kCorrupt, {"'w'", "begin > end"});
}

TEST(Safetensors, RejectsSizeMismatch) {
  expect_bad_file(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})",
                  std::string(16, 'x'), ErrorCode::kCorrupt,
                  {"'w'", "occupies 12 bytes, expected 16"});
  // Packed fp4 [3, 4]: 12 values, 6 bytes.
  expect_bad_file(R"({"w":{"dtype":"F4","shape":[3,4],"data_offsets":[0,12]}})",
                  std::string(12, 'x'), ErrorCode::kCorrupt, {"'w'", "expected 6"});
}

TEST(Safetensors, RejectsOverlappingTensors) {
  expect_bad_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                  R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
                  std::string(24, 'x'), ErrorCode::kCorrupt, {"'a'", "'b'", "overlap"});
}

TEST(Safetensors, RejectsDuplicateNames) {
  expect_bad_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                  R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                  std::string(8, 'x'), ErrorCode::kCorrupt, {"'a'", "twice"});
}

TEST(Safetensors, MissingFileAndTensor) {
  TempDir dir;
  const std::string missing = (dir / "none.safetensors").string();
  expect_error([&] { SafetensorsFile::open(missing); }, ErrorCode::kNotFound, {missing});
  const auto path = dir / "a.safetensors";
  write_file(path, safetensors_bytes({f32_tensor("x", {1}, {1})}));
  auto f = SafetensorsFile::open(path.string());
  expect_error([&] { f->get("y"); }, ErrorCode::kNotFound, {"'y'", path.string()});
}

// ---- checkpoint directories ----

TEST(SafetensorsCheckpoint, SingleFile) {
  TempDir dir;
  write_file(dir / "model.safetensors",
             safetensors_bytes({f32_tensor("a", {2}, {1, 2}), f32_tensor("b", {1}, {3})}));
  auto ckpt = SafetensorsCheckpoint::open(dir.str());
  EXPECT_EQ(ckpt->tensors().size(), 2u);
  EXPECT_EQ(ckpt->files().size(), 1u);
  ASSERT_NE(ckpt->find("b"), nullptr);
  EXPECT_EQ(ckpt->find("b")->file->path(), (dir / "model.safetensors").string());
  EXPECT_EQ(ckpt->find("c"), nullptr);
  // The file itself may be named instead of its directory.
  auto direct = SafetensorsCheckpoint::open((dir / "model.safetensors").string());
  EXPECT_EQ(direct->tensors().size(), 2u);
  EXPECT_EQ(direct->dir(), dir.str());
}

void write_index(const TempDir& dir, const std::string& weight_map) {
  write_file(dir / "model.safetensors.index.json",
             R"({"metadata":{"total_size":12},"weight_map":)" + weight_map + "}");
}

TEST(SafetensorsCheckpoint, ShardedIndex) {
  TempDir dir;
  write_file(dir / "model-00001-of-00002.safetensors",
             safetensors_bytes({f32_tensor("a", {2}, {1, 2})}));
  write_file(dir / "model-00002-of-00002.safetensors",
             safetensors_bytes({f32_tensor("b", {1}, {3}), f32_tensor("c", {1}, {4})}));
  // The index wins over a stale single file next to it.
  write_file(dir / "model.safetensors", safetensors_bytes({f32_tensor("stale", {1}, {0})}));
  write_index(dir, R"({"a":"model-00001-of-00002.safetensors",)"
                   R"("b":"model-00002-of-00002.safetensors",)"
                   R"("c":"model-00002-of-00002.safetensors"})");
  auto ckpt = SafetensorsCheckpoint::open(dir.str());
  EXPECT_EQ(ckpt->tensors().size(), 3u);
  EXPECT_EQ(ckpt->files().size(), 2u);  // each shard mapped once
  EXPECT_EQ(ckpt->find("stale"), nullptr);
  EXPECT_EQ(ckpt->find("a")->file->path(), (dir / "model-00001-of-00002.safetensors").string());
  EXPECT_EQ(ckpt->find("c")->file->path(), (dir / "model-00002-of-00002.safetensors").string());
  float v;
  std::memcpy(&v, ckpt->find("c")->tensor->data, 4);
  EXPECT_EQ(v, 4.0f);
}

TEST(SafetensorsCheckpoint, MissingFiles) {
  TempDir dir;
  expect_error([&] { SafetensorsCheckpoint::open(dir.str()); }, ErrorCode::kNotFound,
               {dir.str(), "model.safetensors"});
  expect_error([&] { SafetensorsCheckpoint::open((dir / "nowhere").string()); },
               ErrorCode::kNotFound, {"nowhere"});
}

TEST(SafetensorsCheckpoint, ShardMissingFromDisk) {
  TempDir dir;
  write_file(dir / "s1.safetensors", safetensors_bytes({f32_tensor("a", {1}, {1})}));
  write_index(dir, R"({"a":"s1.safetensors","b":"s2.safetensors"})");
  expect_error([&] { SafetensorsCheckpoint::open(dir.str()); }, ErrorCode::kNotFound,
               {"s2.safetensors", "'b'", "model.safetensors.index.json"});
}

TEST(SafetensorsCheckpoint, TensorMissingFromShard) {
  TempDir dir;
  write_file(dir / "s1.safetensors", safetensors_bytes({f32_tensor("a", {1}, {1})}));
  write_index(dir, R"({"a":"s1.safetensors","b":"s1.safetensors"})");
  expect_error([&] { SafetensorsCheckpoint::open(dir.str()); }, ErrorCode::kCorrupt,
               {"'b'", "s1.safetensors", "lacks it"});
}

TEST(SafetensorsCheckpoint, BadIndex) {
  TempDir dir;
  write_file(dir / "model.safetensors.index.json", "{\"weight_map\": [");
  expect_error([&] { SafetensorsCheckpoint::open(dir.str()); }, ErrorCode::kCorrupt,
               {"model.safetensors.index.json", "not valid JSON"});
  write_file(dir / "model.safetensors.index.json", R"({"metadata":{}})");
  expect_error([&] { SafetensorsCheckpoint::open(dir.str()); }, ErrorCode::kCorrupt,
               {"weight_map"});
  write_index(dir, R"({"a":7})");
  expect_error([&] { SafetensorsCheckpoint::open(dir.str()); }, ErrorCode::kCorrupt,
               {"'a'", "not a file name"});
  write_index(dir, R"({"a":"../outside.safetensors"})");
  expect_error([&] { SafetensorsCheckpoint::open(dir.str()); }, ErrorCode::kCorrupt,
               {"'a'", "outside the checkpoint directory"});
}

TEST(SafetensorsCheckpoint, ShardErrorsNameTheShard) {
  TempDir dir;
  write_file(dir / "s1.safetensors", raw_file("{broken", ""));
  write_index(dir, R"({"a":"s1.safetensors"})");
  expect_error([&] { SafetensorsCheckpoint::open(dir.str()); }, ErrorCode::kCorrupt,
               {(dir / "s1.safetensors").string(), "invalid JSON"});
}

TEST(SafetensorsCheckpoint, ReadsGoldenFixture) {
  auto ckpt = SafetensorsCheckpoint::open(testing::golden_dir("tiny-a"));
  EXPECT_EQ(ckpt->tensors().size(), 210u);
  const auto* r = ckpt->find("model.layers.0.ffn.gate.tid2eid");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->tensor->dtype, DType::kI64);
  EXPECT_EQ(r->tensor->shape, (std::vector<int64_t>{512, 2}));
}

}  // namespace
}  // namespace deepinfer
