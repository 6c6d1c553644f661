// proto/tf_graph.proto against TensorFlow's own layout: GraphDefs built here
// byte by byte from TensorFlow's field numbers (graph.proto, node_def.proto,
// attr_value.proto, tensor.proto, tensor_shape.proto, versions.proto,
// types.proto), not through tdf's descriptor, so a wrong number or type in
// tdf's copy shows up as a wrong import instead of agreeing with itself.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tf_test_util.h"

namespace tdf {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_tf::Values;

// Protobuf wire format: a tag is (field number << 3) | wire type.
constexpr int kVarint = 0, kFixed32 = 5, kLengthDelimited = 2;

std::string Varint(uint64_t v) {
  std::string s;
  do {
    uint8_t byte = v & 0x7f;
    v >>= 7;
    if (v != 0) byte |= 0x80;
    s.push_back(static_cast<char>(byte));
  } while (v != 0);
  return s;
}
std::string Tag(int field, int wire_type) { return Varint(static_cast<uint64_t>(field) << 3 | wire_type); }
std::string VarintField(int field, uint64_t v) { return Tag(field, kVarint) + Varint(v); }
std::string BytesField(int field, const std::string& bytes) {
  return Tag(field, kLengthDelimited) + Varint(bytes.size()) + bytes;
}
std::string Fixed32(float f) {
  char b[4];
  std::memcpy(b, &f, 4);  // little-endian hosts, as the importer assumes
  return std::string(b, 4);
}

// NodeDef: name 1, op 2, input 3, attr 5 (map entry: key 1, value 2).
std::string AttrEntry(const std::string& key, const std::string& attr_value) {
  return BytesField(5, BytesField(1, key) + BytesField(2, attr_value));
}
std::string NodeDefBytes(const std::string& name, const std::string& op, const std::string& rest) {
  return BytesField(1, name) + BytesField(2, op) + rest;
}
// GraphDef: node 1, versions 4 (VersionDef.producer 1).
std::string GraphDefBytes(const std::vector<std::string>& nodes) {
  std::string g;
  for (const std::string& n : nodes) g += BytesField(1, n);
  return g + BytesField(4, VarintField(1, 27));
}
// AttrValue.type is field 6; DataType values are types.proto's.
std::string TypeAttr(uint64_t data_type) { return VarintField(6, data_type); }

absl::Status BinaryImportError(const std::string& bytes) {
  absl::StatusOr<Graph> g = ImportTensorFlowGraph(bytes, TensorFlowGraphEncoding::kBinary);
  return g.ok() ? absl::OkStatus() : g.status();
}

TEST(TfWireFormat, ConstWithPackedAndUnpackedFloatVal) {
  // TensorShapeProto.dim 2 -> Dim.size 1. TensorProto: dtype 1, tensor_shape 2,
  // float_val 5 (packed as TensorFlow writes it, or one fixed32 per value,
  // which parsers must accept too).
  const std::string shape = BytesField(2, BytesField(2, VarintField(1, 2)));
  const std::string packed = BytesField(5, Fixed32(1.5f) + Fixed32(-2.0f));
  const std::string unpacked = Tag(5, kFixed32) + Fixed32(0.25f) + Tag(5, kFixed32) + Fixed32(4.0f);
  auto const_node = [&](const std::string& name, const std::string& values) {
    const std::string tensor = VarintField(1, /*DT_FLOAT*/ 1) + shape + values;
    return NodeDefBytes(name, "Const", AttrEntry("dtype", TypeAttr(1)) + AttrEntry("value", BytesField(8, tensor)));
  };
  absl::StatusOr<Graph> g = ImportTensorFlowGraph(GraphDefBytes({const_node("a", packed), const_node("b", unpacked)}),
                                                  TensorFlowGraphEncoding::kBinary);
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<std::vector<Tensor>> out = testing_tf::Run(*g, {}, {"a", "b"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(1.5f, -2.0f));
  EXPECT_THAT(Values<float>((*out)[1]), ElementsAre(0.25f, 4.0f));
}

// TensorFlow's DataType values past DT_UINT64 (types.proto): a graph that
// uses one is refused by node and dtype name, in binary and in text (where a
// value the enum lacks would fail the whole parse with no node named).
TEST(TfWireFormat, NewerDataTypesAreRefusedByName) {
  const struct {
    int value;
    const char* name;
  } kTypes[] = {{26, "DT_FLOAT8_E4M3FNUZ"}, {27, "DT_FLOAT8_E4M3B11FNUZ"}, {28, "DT_FLOAT8_E5M2FNUZ"},
                {31, "DT_INT2"},            {32, "DT_UINT2"},             {33, "DT_FLOAT4_E2M1FN"},
                {124, "DT_FLOAT8_E5M2_REF"}, {129, "DT_INT4_REF"},         {133, "DT_FLOAT4_E2M1FN_REF"}};
  for (const auto& t : kTypes) {
    SCOPED_TRACE(t.name);
    absl::Status s =
        BinaryImportError(GraphDefBytes({NodeDefBytes("p", "Placeholder", AttrEntry("dtype", TypeAttr(t.value)))}));
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
    EXPECT_THAT(s.message(), HasSubstr("node 'p' (Placeholder)"));
    EXPECT_THAT(s.message(), HasSubstr(t.name));

    absl::StatusOr<Graph> g = ImportTensorFlowGraph(
        std::string("node { name: \"p\" op: \"Placeholder\" attr { key: \"dtype\" value { type: ") + t.name +
            " } } }\nversions { producer: 27 }\n",
        TensorFlowGraphEncoding::kText);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented) << g.status();
    EXPECT_THAT(g.status().message(), HasSubstr("node 'p' (Placeholder)"));
    EXPECT_THAT(g.status().message(), HasSubstr(t.name));
  }
}

}  // namespace
}  // namespace tdf
