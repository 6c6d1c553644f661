#include "tdf/serialize.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tdf/builder.h"
#include "tdf/reference_programs.h"

namespace tdf {
namespace {

using ::testing::HasSubstr;

std::vector<std::pair<std::string, Graph>> ReferencePrograms() {
  return {{"Fib", reference::Fib()},
          {"Ack", reference::Ack()},
          {"Tak", reference::Tak()},
          {"Fact", reference::Fact()},
          {"EvenOdd", reference::EvenOdd()},
          {"Exp", reference::Exp()},
          {"Primes", reference::Primes()},
          {"McCarthy91", reference::McCarthy91()},
          {"Sum", reference::Sum()},
          {"Yaghi", reference::Yaghi()},
          {"WhileLoop", reference::WhileLoop()},
          {"OpChain", reference::OpChain(5)},
          {"CallInWhile", reference::CallInWhile()},
          {"WhileInFunction", reference::WhileInFunction()}};
}

TEST(Serialize, BinaryRoundTripOfEveryReferenceProgram) {
  for (const auto& [name, graph] : ReferencePrograms()) {
    SCOPED_TRACE(name);
    ASSERT_FALSE(graph.node.empty());
    absl::StatusOr<std::string> bytes = SerializeGraph(graph);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    absl::StatusOr<Graph> back = ParseGraph(*bytes);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(*back == graph);
  }
}

TEST(Serialize, TextRoundTripOfEveryReferenceProgram) {
  for (const auto& [name, graph] : ReferencePrograms()) {
    SCOPED_TRACE(name);
    const std::string text = GraphToText(graph);
    EXPECT_THAT(text, Not(HasSubstr("# error")));
    absl::StatusOr<Graph> back = GraphFromText(text);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(*back == graph);
  }
}

TEST(Serialize, OutputIsDeterministic) {
  // Attr maps serialize in key order: the same graph gives the same bytes.
  Graph g = reference::Ack();
  EXPECT_EQ(*SerializeGraph(g), *SerializeGraph(reference::Ack()));
  EXPECT_EQ(GraphToText(g), GraphToText(reference::Ack()));
}

TEST(Serialize, TextUsesTensorFlowFieldNames) {
  const std::string text = GraphToText(reference::Fib());
  EXPECT_THAT(text, HasSubstr("node {"));
  EXPECT_THAT(text, HasSubstr("library {"));
  EXPECT_THAT(text, HasSubstr("function {"));
  EXPECT_THAT(text, HasSubstr("signature {"));
  EXPECT_THAT(text, HasSubstr("node_def {"));
  EXPECT_THAT(text, HasSubstr("type: DT_INT64"));
}

NodeDef NodeWithEveryAttrKind() {
  NodeDef n;
  n.name = "every_attr";
  n.op = "NoOp";
  n.device = "cuda:1";
  n.input = {"a", "b:2", "^c"};
  n.attr["none"] = AttrValue();
  n.attr["int"] = int64_t{-1234567890123};
  n.attr["float_exact"] = 0.5;
  n.attr["float_double"] = 0.1;  // not a float: needs the f64 field
  n.attr["float_big"] = 1e300;
  n.attr["float_neg_zero"] = -0.0;
  n.attr["float_inf"] = std::numeric_limits<double>::infinity();
  n.attr["bool"] = true;
  n.attr["bool_false"] = false;
  n.attr["string"] = std::string("with \"quotes\", \\ and \0 nul\xff bytes", 31);
  n.attr["type"] = DType::kFloat32;
  n.attr["shape"] = Shape({2, -1, 0});
  n.attr["scalar_shape"] = Shape();
  n.attr["list_int"] = std::vector<int64_t>{1, -2, std::numeric_limits<int64_t>::max()};
  n.attr["list_float_exact"] = std::vector<double>{1.5, -2.25};
  n.attr["list_float_double"] = std::vector<double>{1.5, 0.1};
  n.attr["list_string"] = std::vector<std::string>{"x", "", "y"};
  n.attr["list_type"] = std::vector<DType>{DType::kBool, DType::kInt32, DType::kInt64, DType::kFloat32,
                                           DType::kFloat64};
  n.attr["empty_list_int"] = std::vector<int64_t>{};
  n.attr["empty_list_float"] = std::vector<double>{};
  n.attr["empty_list_string"] = std::vector<std::string>{};
  n.attr["empty_list_type"] = std::vector<DType>{};
  n.attr["t_bool"] = *Tensor::FromVector<bool>({true, false, true}, {3});
  n.attr["t_bool_scalar"] = Tensor::Scalar<bool>(true);
  n.attr["t_int32"] = *Tensor::FromVector<int32_t>({1, -2, 3, std::numeric_limits<int32_t>::min()}, {2, 2});
  n.attr["t_int64"] = Tensor::Scalar<int64_t>(std::numeric_limits<int64_t>::min());
  n.attr["t_float"] = *Tensor::FromVector<float>({0.1f, -1e-30f, 3e38f}, {3, 1});
  n.attr["t_double"] = *Tensor::FromVector<double>({0.1, 1e-300, -2.5}, {1, 3});
  n.attr["t_empty"] = *Tensor::FromVector<double>({}, {0, 5});
  n.attr["t_invalid"] = Tensor();
  return n;
}

Graph GraphWithEveryAttrKind() {
  Graph g;
  g.node.push_back(NodeWithEveryAttrKind());
  NodeDef plain;
  plain.name = "plain";
  plain.op = "Const";
  plain.attr["value"] = Tensor::Scalar<int64_t>(3);
  g.node.push_back(plain);
  return g;
}

TEST(Serialize, EveryAttrKindRoundTrips) {
  const Graph g = GraphWithEveryAttrKind();
  absl::StatusOr<Graph> binary = ParseGraph(*SerializeGraph(g));
  ASSERT_TRUE(binary.ok()) << binary.status();
  absl::StatusOr<Graph> text = GraphFromText(GraphToText(g));
  ASSERT_TRUE(text.ok()) << text.status();
  for (const Graph* back : {&*binary, &*text}) {
    ASSERT_EQ(back->node.size(), 2u);
    const NodeDef& n = back->node[0];
    const NodeDef& want = g.node[0];
    for (const auto& [key, value] : want.attr) {
      SCOPED_TRACE(key);
      const AttrValue* got = n.FindAttr(key);
      ASSERT_NE(got, nullptr);
      EXPECT_EQ(got->TypeName(), value.TypeName());
      EXPECT_TRUE(*got == value) << got->DebugString() << " vs " << value.DebugString();
    }
    EXPECT_TRUE(*back == g);
  }
  // -0.0 == 0.0 as doubles: check the sign survived separately.
  EXPECT_TRUE(std::signbit(*binary->node[0].attr.at("float_neg_zero").get_if<double>()));
  EXPECT_TRUE(std::signbit(*text->node[0].attr.at("float_neg_zero").get_if<double>()));
}

TEST(Serialize, FloatAttrUsesTensorFlowFieldWhenExact) {
  Graph g;
  NodeDef n;
  n.name = "n";
  n.op = "NoOp";
  n.attr["exact"] = 0.5;
  n.attr["inexact"] = 0.1;
  g.node.push_back(n);
  const std::string text = GraphToText(g);
  EXPECT_THAT(text, HasSubstr("f: 0.5"));
  EXPECT_THAT(text, HasSubstr("f64: 0.1"));
}

TEST(Serialize, FunctionLibraryWithDeclaredOnlyFunctionRoundTrips) {
  Graph g = reference::EvenOdd();
  ASSERT_TRUE(g.library.Declare({"later", {{"x", DType::kInt64}}, {{"y", DType::kBool}}}).ok());
  // A defined function whose body is empty is not the same as declared-only.
  FunctionDef empty;
  empty.signature.name = "empty_body";
  empty.defined = true;
  g.library.Put(empty);
  for (bool text : {false, true}) {
    SCOPED_TRACE(text ? "text" : "binary");
    absl::StatusOr<Graph> back = text ? GraphFromText(GraphToText(g)) : ParseGraph(*SerializeGraph(g));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(*back == g);
    const FunctionDef* later = back->library.Find("later");
    ASSERT_NE(later, nullptr);
    EXPECT_FALSE(later->defined);
    EXPECT_EQ(later->signature.inputs[0].type, DType::kInt64);
    ASSERT_NE(back->library.Find("empty_body"), nullptr);
    EXPECT_TRUE(back->library.Find("empty_body")->defined);
    ASSERT_NE(back->library.Find("even"), nullptr);
    EXPECT_TRUE(back->library.Find("even")->defined);
  }
}

TEST(Serialize, SaveAndLoadByExtensionAndBySniffing) {
  const Graph g = reference::Fib();
  const std::string dir = ::testing::TempDir();
  for (const std::string name : {"fib.pbtxt", "fib.pb", "fib.graph_text", "fib.graph_bin"}) {
    SCOPED_TRACE(name);
    const std::string path = dir + "/" + name;
    ASSERT_TRUE(SaveGraph(g, path).ok());
    absl::StatusOr<Graph> back = LoadGraph(path);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(*back == g);
    std::remove(path.c_str());
  }
  // Sniffing: a text file under an unknown extension.
  const std::string sniff = dir + "/fib_as_text.data";
  {
    FILE* f = std::fopen(sniff.c_str(), "w");
    const std::string text = GraphToText(g);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  absl::StatusOr<Graph> back = LoadGraph(sniff);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == g);
  std::remove(sniff.c_str());
}

TEST(Serialize, LoadErrorsNameThePath) {
  absl::StatusOr<Graph> missing = LoadGraph("/nonexistent/dir/g.pbtxt");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/dir/g.pbtxt"));

  const std::string path = ::testing::TempDir() + "/garbage.pbtxt";
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("node { name: \"a\" op: }", f);
  std::fclose(f);
  absl::StatusOr<Graph> bad = LoadGraph(path);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr(path));
  EXPECT_THAT(bad.status().message(), HasSubstr("1:"));  // line:column of the text error
  std::remove(path.c_str());
}

// A malformed text file's error points at the line and column where the
// text goes wrong (1-based, as editors count), through every loader.
TEST(Serialize, MalformedTextNamesTheLineAndColumn) {
  const std::string path = std::string(TDF_SOURCE_DIR) + "/tests/data/malformed.pbtxt";
  absl::StatusOr<Graph> loaded = LoadGraph(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loaded.status().message(),
              HasSubstr(path + ": malformed graph text: 8:18: Expected \":\", found \"DT_INT64\""));

  // The same text under an extension that is sniffed: the text error, not
  // the binary parser's.
  const std::string sniffed = ::testing::TempDir() + "/malformed_graph.data";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::ofstream(sniffed) << text.str();
  absl::StatusOr<Graph> loaded_sniffed = LoadGraph(sniffed);
  EXPECT_THAT(loaded_sniffed.status().message(), HasSubstr("malformed graph text: 8:18:"));
  std::remove(sniffed.c_str());

  // A later line, after many good ones, and a second error in the same text.
  std::string many;
  for (int i = 0; i < 40; ++i) many += "node {\n  name: \"c" + std::to_string(i) + "\"\n  op: \"NoOp\"\n}\n";
  many += "node {\n  name: \"bad\"\n  op \"NoOp\"\n}\n";  // line 163
  absl::StatusOr<Graph> late = GraphFromText(many);
  EXPECT_THAT(late.status().message(), HasSubstr("malformed graph text: 163:6:"));
}

// A file that will not open says why, in its code: a missing directory is
// NOT_FOUND (it was PERMISSION_DENIED for a write), and the path is named.
TEST(Serialize, SaveErrorsSayWhyAndNameThePath) {
  GraphBuilder b;
  b.Identity(b.Const<int64_t>(1), "one");
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  absl::Status missing_dir = SaveGraph(*g, "/nonexistent/dir/g.pbtxt");
  EXPECT_EQ(missing_dir.code(), absl::StatusCode::kNotFound) << missing_dir;
  EXPECT_THAT(missing_dir.message(), HasSubstr("/nonexistent/dir/g.pbtxt"));
  absl::Status is_dir = SaveGraph(*g, ::testing::TempDir());  // a directory, not a file
  EXPECT_FALSE(is_dir.ok());
  EXPECT_THAT(is_dir.message(), HasSubstr("cannot write"));
}

TEST(Serialize, RefusesToWriteWhatCannotBeRead) {
  Graph g;
  NodeDef n;
  n.name = std::string("bad\xff", 4);
  n.op = "NoOp";
  g.node.push_back(n);
  absl::StatusOr<std::string> bytes = SerializeGraph(g);
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bytes.status().message(), HasSubstr("UTF-8"));
  EXPECT_THAT(GraphToText(g), HasSubstr("# error"));
  EXPECT_FALSE(SaveGraph(g, ::testing::TempDir() + "/never.pbtxt").ok());
}

// ---------------------------------------------------------------------------
// Hostile inputs: each must be a Status, never a crash or a huge allocation.

// A graph with one Const whose value tensor has the given text-format fields.
// (Tests speak text format: the generated protobuf classes are private to the
// library. Binary and text loading share the conversion being tested.)
absl::StatusOr<Graph> GraphWithTensor(const std::string& fields) {
  return GraphFromText("node { name: \"c\" op: \"Const\" attr { key: \"value\" value { tensor { " + fields +
                       " } } } }");
}

std::string Dims(std::initializer_list<int64_t> dims) {
  std::string out = "tensor_shape { ";
  for (int64_t d : dims) out += "dim { size: " + std::to_string(d) + " } ";
  return out + "} ";
}

void ExpectInvalid(const absl::StatusOr<Graph>& g, absl::string_view fragment) {
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << g.status();
  EXPECT_THAT(g.status().message(), HasSubstr(std::string(fragment)));
}

TEST(SerializeHostile, TruncatedBinary) {
  const std::string bytes = *SerializeGraph(reference::Ack());
  int failures = 0;
  for (size_t len = 0; len < bytes.size(); len += 7) {
    absl::StatusOr<Graph> g = ParseGraph(absl::string_view(bytes.data(), len));
    failures += !g.ok();  // a cut on a message boundary can still parse
  }
  EXPECT_GT(failures, 0);
  ExpectInvalid(ParseGraph(bytes.substr(0, bytes.size() - 1)), "malformed graph");
}

TEST(SerializeHostile, GarbageText) {
  ExpectInvalid(GraphFromText("node { name: "), "malformed graph text");
  ExpectInvalid(GraphFromText("no_such_field: 3"), "no_such_field");
  ExpectInvalid(GraphFromText("node { attr { key: \"x\" value { i: \"str\" } } }"), "malformed graph text");
}

TEST(SerializeHostile, WrongWireTypes) {
  // Wire type 7 does not exist; an end-group tag with no group open.
  ExpectInvalid(ParseGraph(std::string("\x0f\x00", 2)), "malformed graph");
  ExpectInvalid(ParseGraph(std::string("\x0c", 1)), "malformed graph");
  // A node (field 1) whose name (field 1) is a nested garbage message.
  ExpectInvalid(ParseGraph(std::string("\x0a\x03\x0a\x01\xff", 5)), "malformed graph");
}

TEST(SerializeHostile, UnknownDtype) {
  ExpectInvalid(GraphWithTensor("dtype: 77"), "unsupported DataType 77");
  ExpectInvalid(GraphFromText("node { name: \"n\" attr { key: \"T\" value { type: 42 } } }"),
                "unsupported DataType 42");
  ExpectInvalid(GraphFromText("library { function { signature { name: \"f\" input_arg { name: \"x\" type: 5 } } } }"),
                "unsupported DataType 5");
  ExpectInvalid(GraphFromText("node { attr { key: \"l\" value { list { type: [DT_INT32, 99] } } } }"),
                "unsupported DataType 99");
}

TEST(SerializeHostile, TensorContentSizeMismatch) {
  ExpectInvalid(GraphWithTensor("dtype: DT_INT64 " + Dims({3}) + "tensor_content: \"" + std::string(23, 'a') + "\""),
                "tensor_content has 23 bytes");
}

TEST(SerializeHostile, TensorContentIsAccepted) {
  // The other half of the contract: correctly sized raw content loads
  // (little-endian int32 7 and -8), and bool bytes other than 0 read as true.
  absl::StatusOr<Graph> g = GraphWithTensor(
      "dtype: DT_INT32 " + Dims({2}) + "tensor_content: \"\\007\\000\\000\\000\\370\\377\\377\\377\"");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->node[0].GetTensor("value")->Equals(*Tensor::FromVector<int32_t>({7, -8}, {2})));
  absl::StatusOr<Graph> b = GraphWithTensor("dtype: DT_BOOL " + Dims({3}) + "tensor_content: \"\\000\\001\\007\"");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(b->node[0].GetTensor("value")->Equals(*Tensor::FromVector<bool>({false, true, true}, {3})));
}

TEST(SerializeHostile, NegativeDims) {
  ExpectInvalid(GraphWithTensor("dtype: DT_FLOAT " + Dims({-4})), "negative");
  ExpectInvalid(GraphFromText("node { attr { key: \"s\" value { shape { dim { size: -2 } } } } }"), "negative");
}

TEST(SerializeHostile, AbsurdElementCounts) {
  ExpectInvalid(GraphWithTensor("dtype: DT_DOUBLE " + Dims({1000000000, 1000000000}) + "double_val: 1"), "more than");
  // Overflowing int64 on the way.
  const int64_t t = int64_t{1} << 40;
  ExpectInvalid(GraphWithTensor("dtype: DT_BOOL " + Dims({t, t, t, t})), "more than");
  // Under the element cap, but a splat far beyond what its input holds.
  ExpectInvalid(GraphWithTensor("dtype: DT_INT64 " + Dims({int64_t{1} << 27}) + "int64_val: 5"),
                "may be filled from fewer values");
  ExpectInvalid(GraphWithTensor("dtype: DT_INT64 " + Dims({int64_t{1} << 27})), "may be filled from fewer values");
  // A zero dim makes huge other dims harmless.
  absl::StatusOr<Graph> empty = GraphWithTensor("dtype: DT_INT64 " + Dims({int64_t{1} << 62, 0}));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->node[0].GetTensor("value")->num_elements(), 0);
}

TEST(SerializeHostile, SplatAndZeroFillFollowTensorFlow) {
  absl::StatusOr<Graph> g = GraphWithTensor("dtype: DT_FLOAT " + Dims({3}) + "float_val: 2.5");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->node[0].GetTensor("value")->Equals(*Tensor::FromVector<float>({2.5f, 2.5f, 2.5f}, {3})));
  absl::StatusOr<Graph> z = GraphWithTensor("dtype: DT_INT32 " + Dims({2}));
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_TRUE(z->node[0].GetTensor("value")->Equals(*Tensor::FromVector<int32_t>({0, 0}, {2})));
}

TEST(SerializeHostile, ValueCountOrTypeMismatch) {
  ExpectInvalid(GraphWithTensor("dtype: DT_INT32 " + Dims({3}) + "int_val: [1, 2]"),
                "2 values for a tensor of 3 elements");
  ExpectInvalid(GraphWithTensor("dtype: DT_INT32 float_val: 1"), "values of another type");
  ExpectInvalid(GraphWithTensor("dtype: DT_INVALID float_val: 1"), "DT_INVALID");
  ExpectInvalid(GraphWithTensor("dtype: DT_INT32 " + Dims({0}) + "int_val: 1"), "values for an empty tensor");
  ExpectInvalid(GraphWithTensor("dtype: DT_INT32 int_val: 1 tensor_content: \"\\001\\000\\000\\000\""),
                "both tensor_content and typed values");
}

TEST(SerializeHostile, HugeRank) {
  std::string dims = "tensor_shape { ";
  for (int i = 0; i < 1000; ++i) dims += "dim { size: 1 } ";
  ExpectInvalid(GraphWithTensor("dtype: DT_INT32 " + dims + "}"), "rank 1000");
}

TEST(SerializeHostile, HugeLengthPrefix) {
  // Field 1 (node), length-delimited, claiming ~2^62 bytes.
  std::string bytes = "\x0a";
  for (int i = 0; i < 8; ++i) bytes += '\xff';
  bytes += '\x3f';
  ExpectInvalid(ParseGraph(bytes), "malformed graph");
  // A packed int64 list claiming far more data than is there.
  std::string list = *SerializeGraph(GraphWithEveryAttrKind());
  ExpectInvalid(ParseGraph(list + std::string("\x0a\xff\xff\xff\x07", 5)), "malformed graph");
}

TEST(SerializeHostile, OversizedInputIsRefusedBeforeParsing) {
  // A string_view over a small buffer claiming a huge size would be read out
  // of bounds if the size check came after parsing; pass real memory.
  std::string big(static_cast<size_t>(kMaxSerializedGraphBytes) + 1, ' ');
  ExpectInvalid(GraphFromText(big), "exceeds the limit");
  ExpectInvalid(ParseGraph(big), "exceeds the limit");
}

TEST(SerializeHostile, LibraryInconsistencies) {
  ExpectInvalid(GraphFromText("library { function { signature { name: \"f\" } } function { signature { name: \"f\" } } }"),
                "defined twice");
  ExpectInvalid(GraphFromText("library { function { signature { name: \"\" } } }"), "without a name");
  ExpectInvalid(GraphFromText("library { function { signature { name: \"f\" } declared_only: true "
                              "node_def { name: \"x\" op: \"NoOp\" } } }"),
                "declared_only but has a body");
}

TEST(SerializeHostile, ListInconsistencies) {
  ExpectInvalid(GraphFromText("node { attr { key: \"l\" value { list { i: 1 s: \"x\" } } } }"), "several kinds");
  ExpectInvalid(GraphFromText("node { attr { key: \"l\" value { list { b: true } } } }"), "list(bool)");
  ExpectInvalid(GraphFromText("node { attr { key: \"l\" value { list { empty_list_kind: \"shape\" } } } }"),
                "empty_list_kind");
  // A TensorFlow-style empty list (no kind) loads as list(int).
  absl::StatusOr<Graph> g = GraphFromText("node { attr { key: \"l\" value { list { } } } }");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->node[0].attr.at("l").TypeName(), "list(int)");
}

TEST(SerializeHostile, NewerFormatVersionIsRefused) {
  ExpectInvalid(GraphFromText("versions { producer: 9 min_consumer: 9 }"), "format version 9");
}

TEST(SerializeHostile, InvalidUtf8NameIsAnError) {
  Graph g;
  NodeDef n;
  n.name = "n";
  n.op = "QQQQ";
  g.node.push_back(n);
  std::string bytes = *SerializeGraph(g);
  const size_t at = bytes.find("QQQQ");
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 4, "\xff\xfe\xfd\xfc");  // same length: the encoding stays well formed
  // The error is the Status's alone: protobuf's own log line would go to
  // stderr, where a library's user cannot catch or silence it.
  ::testing::internal::CaptureStderr();
  absl::StatusOr<Graph> parsed = ParseGraph(bytes);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ExpectInvalid(parsed, "malformed graph");
  // The text parser takes such bytes in escapes; the loader must not.
  ExpectInvalid(GraphFromText("node { name: \"a\\377b\" op: \"NoOp\" }"), "not valid UTF-8");
  ExpectInvalid(GraphFromText("node { name: \"a\" attr { key: \"\\300\" value { i: 1 } } }"), "not valid UTF-8");
}

}  // namespace
}  // namespace tdf
