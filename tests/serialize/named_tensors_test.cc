// Named tensors (tdf/serialize.h): the checkpoint format. Lossless for every
// dtype and shape; untrusted input ends in a status.
#include <cstdio>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tdf/serialize.h"

namespace tdf {
namespace {

using ::testing::HasSubstr;

NamedTensors EveryKind() {
  return {{"f32", *Tensor::FromVector<float>({1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, -7.0f}, Shape({2, 3}))},
          {"f64", *Tensor::FromVector<double>({3.141592653589793, -1e300}, Shape({2}))},
          {"i32", Tensor::Scalar<int32_t>(-7)},
          {"i64", *Tensor::FromVector<int64_t>({int64_t{1} << 60, -1, 0}, Shape({3, 1}))},
          {"b", *Tensor::FromVector<bool>({true, false, true}, Shape({3}))},
          {"empty", *Tensor::Zeros(DType::kFloat32, Shape({0, 4}))},
          {"layer/w:0 with spaces", Tensor::Scalar<double>(2.0)}};
}

void ExpectSame(const NamedTensors& a, const NamedTensors& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    const Tensor& x = a[i].second;
    const Tensor& y = b[i].second;
    EXPECT_EQ(x.dtype(), y.dtype()) << a[i].first;
    EXPECT_EQ(x.shape(), y.shape()) << a[i].first;
    EXPECT_EQ(x.DebugString(), y.DebugString()) << a[i].first;
  }
}

TEST(NamedTensors, RoundTripInBothForms) {
  const NamedTensors tensors = EveryKind();
  absl::StatusOr<std::string> bytes = SerializeTensors(tensors);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<NamedTensors> back = ParseTensors(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSame(tensors, *back);
  // Deterministic: the same tensors give the same bytes.
  EXPECT_EQ(*SerializeTensors(*back), *bytes);
  for (const std::string name : {"t.pbtxt", "t.ckpt", "t.pb"}) {
    const std::string path = ::testing::TempDir() + "/" + name;
    ASSERT_TRUE(SaveTensors(tensors, path).ok()) << name;
    absl::StatusOr<NamedTensors> loaded = LoadTensors(path);
    ASSERT_TRUE(loaded.ok()) << name << ": " << loaded.status();
    ExpectSame(tensors, *loaded);
    std::remove(path.c_str());
  }
}

TEST(NamedTensors, RefusesToWriteWhatCannotBeRead) {
  const Tensor one = Tensor::Scalar<double>(1.0);
  EXPECT_THAT(std::string(SerializeTensors({{"a", one}, {"a", one}}).status().message()), HasSubstr("two tensors"));
  EXPECT_THAT(std::string(SerializeTensors({{"", one}}).status().message()), HasSubstr("empty name"));
  EXPECT_THAT(std::string(SerializeTensors({{"x", Tensor()}}).status().message()), HasSubstr("no value"));
  EXPECT_THAT(std::string(SerializeTensors({{std::string("bad\xff", 4), one}}).status().message()),
              HasSubstr("UTF-8"));
}

TEST(NamedTensors, MalformedInputIsAnInvalidArgument) {
  absl::StatusOr<std::string> bytes = SerializeTensors(EveryKind());
  ASSERT_TRUE(bytes.ok());
  // Every truncation either fails cleanly or parses (a cut between entries).
  for (size_t n = 0; n < bytes->size(); ++n) {
    absl::StatusOr<NamedTensors> t = ParseTensors(absl::string_view(*bytes).substr(0, n));
    if (!t.ok()) EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << n;
  }
  const std::string dir = ::testing::TempDir();
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"entry { name: \"a\" tensor { dtype: DT_DOUBLE double_val: 1 } }\n"
       "entry { name: \"a\" tensor { dtype: DT_DOUBLE double_val: 2 } }",
       "the name appears twice"},
      {"entry { tensor { dtype: DT_DOUBLE double_val: 1 } }", "without a name"},
      {"entry { name: \"a\" }", "no value"},
      {"entry { name: \"a\" tensor { dtype: DT_FLOAT tensor_shape { dim { size: 3 } } float_val: [1, 2] } }",
       "malformed tensors: tensor 'a'"},
      {"versions { producer: 9 min_consumer: 9 }", "format version 9"},
      {"entry { name: ", "malformed tensors text"},
  };
  for (const Case& c : cases) {
    const std::string path = dir + "/bad_tensors.pbtxt";
    FILE* f = std::fopen(path.c_str(), "w");
    std::fputs(c.text, f);
    std::fclose(f);
    absl::StatusOr<NamedTensors> t = LoadTensors(path);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(std::string(t.status().message()), HasSubstr(c.message)) << c.text;
    EXPECT_THAT(std::string(t.status().message()), HasSubstr(path));
    std::remove(path.c_str());
  }
  EXPECT_EQ(LoadTensors(dir + "/no_such_tensors.ckpt").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tdf
