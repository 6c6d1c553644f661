// TensorFlow 1.x GraphDefs in the forms TensorFlow writes, imported and run:
// arithmetic, reductions with their axes as inputs, shape ops, NN ops, every
// Const encoding, devices, versions, and the refusals. Expected values are
// computed here from the math, not taken from TensorFlow.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tdf/reference_programs.h"
#include "tdf/serialize.h"
#include "tf_test_util.h"

namespace tdf {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using testing_tf::ImportAndRun;
using testing_tf::Values;

absl::Status ImportError(const std::string& graph);

constexpr char kVersions[] = "versions { producer: 27 min_consumer: 12 }\n";

std::string Attr(const std::string& key, const std::string& value) {
  return "attr { key: \"" + key + "\" value { " + value + " } } ";
}
std::string T(const std::string& dtype) { return Attr("T", "type: " + dtype); }
std::string ConstNode(const std::string& name, const std::string& dtype, const std::string& tensor_body,
                      const std::string& extra = "") {
  return "node { name: \"" + name + "\" op: \"Const\" " + extra + Attr("dtype", "type: " + dtype) +
         Attr("value", "tensor { dtype: " + dtype + " " + tensor_body + " }") + "}\n";
}
std::string Node(const std::string& name, const std::string& op, const std::vector<std::string>& inputs,
                 const std::string& attrs = "") {
  std::string s = "node { name: \"" + name + "\" op: \"" + op + "\" ";
  for (const std::string& in : inputs) s += "input: \"" + in + "\" ";
  return s + attrs + "}\n";
}

// x: float [-1, 3] with TensorFlow's device string and _output_shapes.
const std::string kPlaceholderX =
    "node { name: \"x\" op: \"Placeholder\" device: \"/job:localhost/replica:0/task:0/device:CPU:0\" " +
    Attr("dtype", "type: DT_FLOAT") + Attr("shape", "shape { dim { size: -1 } dim { size: 3 } }") +
    Attr("_output_shapes", "list { shape { dim { size: -1 } dim { size: 3 } } }") + "}\n";

Tensor X23() { return *Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3}); }

TEST(TfImport, ArithmeticAndReductionsWithAxesAsInputs) {
  // c = [1, 2, 3] as tensor_content (little-endian float32).
  const std::string graph =
      kPlaceholderX +
      ConstNode("c", "DT_FLOAT",
                "tensor_shape { dim { size: 3 } } tensor_content: \"\\000\\000\\200?\\000\\000\\000@\\000\\000@@\"") +
      Node("add", "AddV2", {"x", "c"},
           T("DT_FLOAT") + Attr("_class", "list { s: \"loc:@x\" }")) +
      ConstNode("two", "DT_FLOAT", "tensor_shape { } float_val: 2") +
      Node("div", "RealDiv", {"add", "two"}, T("DT_FLOAT")) +
      ConstNode("axis1", "DT_INT32", "tensor_shape { dim { size: 1 } } int_val: 1") +
      ConstNode("axis0", "DT_INT64", "tensor_shape { } int64_val: 0") +
      Node("sum", "Sum", {"div", "axis1"}, T("DT_FLOAT") + Attr("Tidx", "type: DT_INT32") + Attr("keep_dims", "b: false")) +
      Node("mean", "Mean", {"div", "axis1"}, T("DT_FLOAT") + Attr("keep_dims", "b: true")) +
      Node("max", "Max", {"div", "axis0"}, T("DT_FLOAT") + Attr("Tidx", "type: DT_INT64")) +
      Node("sub", "Sub", {"x", "c"}, T("DT_FLOAT")) + Node("mul", "Mul", {"x", "c"}, T("DT_FLOAT")) +
      Node("neg", "Neg", {"x"}, T("DT_FLOAT")) + Node("sq", "Square", {"x"}, T("DT_FLOAT")) +
      Node("sqd", "SquaredDifference", {"x", "c"}, T("DT_FLOAT")) +
      Node("addn", "AddN", {"x", "x", "x"}, T("DT_FLOAT") + Attr("N", "i: 3")) + kVersions;
  absl::StatusOr<std::vector<Tensor>> out =
      ImportAndRun(graph, {{"x", X23()}}, {"add", "div", "sum", "mean", "max", "sub", "mul", "neg", "sq", "sqd", "addn"});
  ASSERT_TRUE(out.ok()) << out.status();
  const float x[2][3] = {{1, 2, 3}, {4, 5, 6}};
  const float c[3] = {1, 2, 3};
  std::vector<float> add, div, sum, mean, max(3, -1e30f), sub, mul, neg, sq, sqd, addn;
  for (int i = 0; i < 2; ++i) {
    float row = 0;
    for (int j = 0; j < 3; ++j) {
      add.push_back(x[i][j] + c[j]);
      div.push_back((x[i][j] + c[j]) / 2);
      row += (x[i][j] + c[j]) / 2;
      max[j] = std::max(max[j], (x[i][j] + c[j]) / 2);
      sub.push_back(x[i][j] - c[j]);
      mul.push_back(x[i][j] * c[j]);
      neg.push_back(-x[i][j]);
      sq.push_back(x[i][j] * x[i][j]);
      sqd.push_back((x[i][j] - c[j]) * (x[i][j] - c[j]));
      addn.push_back(3 * x[i][j]);
    }
    sum.push_back(row);
    mean.push_back(row / 3);
  }
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAreArray(add));
  EXPECT_THAT(Values<float>((*out)[1]), ElementsAreArray(div));
  EXPECT_THAT(Values<float>((*out)[2]), ElementsAreArray(sum));
  EXPECT_EQ((*out)[3].shape(), Shape({2, 1}));
  EXPECT_THAT(Values<float>((*out)[3]), ElementsAreArray(mean));
  EXPECT_THAT(Values<float>((*out)[4]), ElementsAreArray(max));
  EXPECT_THAT(Values<float>((*out)[5]), ElementsAreArray(sub));
  EXPECT_THAT(Values<float>((*out)[6]), ElementsAreArray(mul));
  EXPECT_THAT(Values<float>((*out)[7]), ElementsAreArray(neg));
  EXPECT_THAT(Values<float>((*out)[8]), ElementsAreArray(sq));
  EXPECT_THAT(Values<float>((*out)[9]), ElementsAreArray(sqd));
  EXPECT_THAT(Values<float>((*out)[10]), ElementsAreArray(addn));
}

TEST(TfImport, ShapeOpsWithShapesAsInputs) {
  const std::string graph =
      kPlaceholderX + ConstNode("shape", "DT_INT32", "tensor_shape { dim { size: 2 } } int_val: 3 int_val: -1") +
      Node("reshape", "Reshape", {"x", "shape"}, T("DT_FLOAT") + Attr("Tshape", "type: DT_INT32")) +
      ConstNode("perm", "DT_INT32", "tensor_shape { dim { size: 2 } } int_val: 1 int_val: 0") +
      Node("transpose", "Transpose", {"x", "perm"}, T("DT_FLOAT") + Attr("Tperm", "type: DT_INT32")) +
      ConstNode("axis", "DT_INT32", "tensor_shape { } int_val: 1") +
      Node("concat", "ConcatV2", {"x", "x", "axis"}, T("DT_FLOAT") + Attr("N", "i: 2") + Attr("Tidx", "type: DT_INT32")) +
      ConstNode("dim0", "DT_INT32", "tensor_shape { } int_val: 0") +
      Node("concat_v1", "Concat", {"dim0", "x", "x"}, T("DT_FLOAT") + Attr("N", "i: 2")) +
      ConstNode("begin", "DT_INT32", "tensor_shape { dim { size: 2 } } int_val: 0 int_val: 1") +
      ConstNode("size", "DT_INT32", "tensor_shape { dim { size: 2 } } int_val: -1 int_val: 2") +
      Node("slice", "Slice", {"x", "begin", "size"}, T("DT_FLOAT") + Attr("Index", "type: DT_INT32")) +
      ConstNode("idx", "DT_INT64", "tensor_shape { dim { size: 3 } } int64_val: 1 int64_val: 0 int64_val: 1") +
      Node("gather", "GatherV2", {"x", "idx", "dim0"},
           Attr("Tparams", "type: DT_FLOAT") + Attr("Tindices", "type: DT_INT64") + Attr("Taxis", "type: DT_INT32") +
               Attr("batch_dims", "i: 0")) +
      ConstNode("dims", "DT_INT32", "tensor_shape { dim { size: 2 } } int_val: 2 int_val: 2") +
      ConstNode("seven", "DT_FLOAT", "tensor_shape { } float_val: 7") +
      Node("fill", "Fill", {"dims", "seven"}, T("DT_FLOAT") + Attr("index_type", "type: DT_INT32")) +
      ConstNode("row", "DT_FLOAT", "tensor_shape { dim { size: 3 } } float_val: 1 float_val: 2 float_val: 3") +
      ConstNode("to", "DT_INT32", "tensor_shape { dim { size: 2 } } int_val: 2 int_val: 3") +
      Node("bcast", "BroadcastTo", {"row", "to"}, T("DT_FLOAT") + Attr("Tidx", "type: DT_INT32")) + kVersions;
  absl::StatusOr<std::vector<Tensor>> out =
      ImportAndRun(graph, {{"x", X23()}}, {"reshape", "transpose", "concat", "concat_v1", "slice", "gather", "fill", "bcast"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), Shape({3, 2}));
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_EQ((*out)[1].shape(), Shape({3, 2}));
  EXPECT_THAT(Values<float>((*out)[1]), ElementsAre(1, 4, 2, 5, 3, 6));
  EXPECT_EQ((*out)[2].shape(), Shape({2, 6}));
  EXPECT_THAT(Values<float>((*out)[2]), ElementsAre(1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6));
  EXPECT_EQ((*out)[3].shape(), Shape({4, 3}));
  EXPECT_THAT(Values<float>((*out)[3]), ElementsAre(1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6));
  EXPECT_THAT(Values<float>((*out)[4]), ElementsAre(2, 3, 5, 6));
  EXPECT_THAT(Values<float>((*out)[5]), ElementsAre(4, 5, 6, 1, 2, 3, 4, 5, 6));
  EXPECT_EQ((*out)[6].shape(), Shape({2, 2}));
  EXPECT_THAT(Values<float>((*out)[6]), ElementsAre(7, 7, 7, 7));
  EXPECT_EQ((*out)[7].shape(), Shape({2, 3}));
  EXPECT_THAT(Values<float>((*out)[7]), ElementsAre(1, 2, 3, 1, 2, 3));
}

TEST(TfImport, ShapeComputationsFoldedFromStaticShapes) {
  // y: [1, 3, 1]. tf.reshape(x, tf.stack([tf.shape(y)[1], -1])), tf.size(y),
  // tf.rank(y), tf.expand_dims, tf.squeeze (with and without dims).
  const std::string graph =
      kPlaceholderX + "node { name: \"y\" op: \"Placeholder\" " + Attr("dtype", "type: DT_FLOAT") +
      Attr("shape", "shape { dim { size: 1 } dim { size: 3 } dim { size: 1 } }") + "}\n" +
      Node("shape_y", "Shape", {"y"}, T("DT_FLOAT") + Attr("out_type", "type: DT_INT32")) +
      ConstNode("b", "DT_INT32", "tensor_shape { dim { size: 1 } } int_val: 1") +
      ConstNode("e", "DT_INT32", "tensor_shape { dim { size: 1 } } int_val: 2") +
      ConstNode("s", "DT_INT32", "tensor_shape { dim { size: 1 } } int_val: 1") +
      Node("dim1", "StridedSlice", {"shape_y", "b", "e", "s"},
           T("DT_INT32") + Attr("Index", "type: DT_INT32") + Attr("shrink_axis_mask", "i: 1") +
               Attr("begin_mask", "i: 0") + Attr("end_mask", "i: 0") + Attr("ellipsis_mask", "i: 0") +
               Attr("new_axis_mask", "i: 0")) +
      Node("tail", "StridedSlice", {"shape_y", "b", "e", "s"}, T("DT_INT32") + Attr("end_mask", "i: 1")) +
      ConstNode("minus_one", "DT_INT32", "tensor_shape { } int_val: -1") +
      Node("stack", "Pack", {"dim1", "minus_one"}, T("DT_INT32") + Attr("N", "i: 2") + Attr("axis", "i: 0")) +
      Node("reshaped", "Reshape", {"x", "stack"}, T("DT_FLOAT")) +
      Node("size", "Size", {"y"}, T("DT_FLOAT") + Attr("out_type", "type: DT_INT64")) +
      Node("rank", "Rank", {"y"}, T("DT_FLOAT")) +
      ConstNode("last", "DT_INT32", "tensor_shape { } int_val: -1") +
      ConstNode("first", "DT_INT32", "tensor_shape { } int_val: 0") +
      ConstNode("c", "DT_FLOAT", "tensor_shape { dim { size: 3 } } float_val: 1") +
      Node("sum", "AddV2", {"x", "c"}, T("DT_FLOAT")) +
      Node("ed", "ExpandDims", {"sum", "last"}, T("DT_FLOAT") + Attr("Tdim", "type: DT_INT32")) +
      Node("ed0", "ExpandDims", {"x", "first"}, T("DT_FLOAT")) +
      Node("sq", "Squeeze", {"ed"}, T("DT_FLOAT") + Attr("squeeze_dims", "list { i: 2 }")) +
      Node("sq_all", "Squeeze", {"y"}, T("DT_FLOAT") + Attr("squeeze_dims", "list { }")) + kVersions;
  const Tensor y = *Tensor::FromVector<float>({7, 8, 9}, {1, 3, 1});
  absl::StatusOr<std::vector<Tensor>> out = ImportAndRun(
      graph, {{"x", X23()}, {"y", y}}, {"dim1", "tail", "reshaped", "size", "rank", "ed", "ed0", "sq", "sq_all"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<int32_t>(), 3);
  EXPECT_THAT(Values<int32_t>((*out)[1]), ElementsAre(3, 1));
  EXPECT_EQ((*out)[2].shape(), Shape({3, 2}));
  EXPECT_THAT(Values<float>((*out)[2]), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_EQ((*out)[3].scalar<int64_t>(), 3);
  EXPECT_EQ((*out)[4].scalar<int32_t>(), 3);
  EXPECT_EQ((*out)[5].shape(), Shape({2, 3, 1}));
  EXPECT_THAT(Values<float>((*out)[5]), ElementsAre(2, 3, 4, 5, 6, 7));
  EXPECT_EQ((*out)[6].shape(), Shape({1, 2, 3}));
  EXPECT_EQ((*out)[7].shape(), Shape({2, 3}));
  EXPECT_EQ((*out)[8].shape(), Shape({3}));
  EXPECT_THAT(Values<float>((*out)[8]), ElementsAre(7, 8, 9));
}

TEST(TfImport, ComparisonLogicalSelectCast) {
  const std::string graph =
      kPlaceholderX + ConstNode("three", "DT_FLOAT", "tensor_shape { } float_val: 3") +
      Node("less", "Less", {"x", "three"}, T("DT_FLOAT")) + Node("ge", "GreaterEqual", {"x", "three"}, T("DT_FLOAT")) +
      Node("eq", "Equal", {"x", "three"}, T("DT_FLOAT") + Attr("incompatible_shape_error", "b: true")) +
      Node("ne", "NotEqual", {"x", "three"}, T("DT_FLOAT")) +
      Node("and", "LogicalAnd", {"less", "ne"}) + Node("or", "LogicalOr", {"eq", "and"}) +
      Node("not", "LogicalNot", {"or"}) +
      Node("select", "SelectV2", {"less", "x", "three"}, T("DT_FLOAT")) +
      Node("cast", "Cast", {"ge"}, Attr("SrcT", "type: DT_BOOL") + Attr("DstT", "type: DT_INT32") +
                                       Attr("Truncate", "b: false")) +
      Node("maximum", "Maximum", {"x", "three"}, T("DT_FLOAT")) + kVersions;
  absl::StatusOr<std::vector<Tensor>> out =
      ImportAndRun(graph, {{"x", X23()}}, {"less", "and", "or", "not", "select", "cast", "maximum"});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<bool> less, and_, or_, not_;
  std::vector<float> select, maximum;
  std::vector<int32_t> cast;
  for (float v : {1, 2, 3, 4, 5, 6}) {
    less.push_back(v < 3);
    and_.push_back(v < 3 && v != 3);
    or_.push_back(v == 3 || (v < 3 && v != 3));
    not_.push_back(!(v == 3 || (v < 3 && v != 3)));
    select.push_back(v < 3 ? v : 3);
    cast.push_back(v >= 3 ? 1 : 0);
    maximum.push_back(std::max(v, 3.0f));
  }
  EXPECT_THAT(Values<bool>((*out)[0]), ElementsAreArray(less));
  EXPECT_THAT(Values<bool>((*out)[1]), ElementsAreArray(and_));
  EXPECT_THAT(Values<bool>((*out)[2]), ElementsAreArray(or_));
  EXPECT_THAT(Values<bool>((*out)[3]), ElementsAreArray(not_));
  EXPECT_THAT(Values<float>((*out)[4]), ElementsAreArray(select));
  EXPECT_THAT(Values<int32_t>((*out)[5]), ElementsAreArray(cast));
  EXPECT_THAT(Values<float>((*out)[6]), ElementsAreArray(maximum));
}

TEST(TfImport, SelectV1PicksRowsWithAVectorCondition) {
  const std::string graph =
      kPlaceholderX + "node { name: \"rows\" op: \"Placeholder\" " + Attr("dtype", "type: DT_BOOL") +
      Attr("shape", "shape { dim { size: 2 } }") + "}\n" + Node("neg", "Neg", {"x"}, T("DT_FLOAT")) +
      Node("pick", "Select", {"rows", "x", "neg"}, T("DT_FLOAT")) +
      Node("same", "Select", {"pick_cond", "x", "neg"}, T("DT_FLOAT")) +
      Node("pick_cond", "Greater", {"x", "neg"}, T("DT_FLOAT")) + kVersions;
  const Tensor rows = *Tensor::FromVector<bool>({false, true}, {2});
  absl::StatusOr<std::vector<Tensor>> out = ImportAndRun(graph, {{"x", X23()}, {"rows", rows}}, {"pick", "same"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(-1, -2, -3, 4, 5, 6));
  EXPECT_THAT(Values<float>((*out)[1]), ElementsAre(1, 2, 3, 4, 5, 6));
  // Ranks not known: refused rather than guessed.
  absl::Status s = ImportError(
      "node { name: \"c\" op: \"Placeholder\" " + Attr("dtype", "type: DT_BOOL") + "}\n" +
      "node { name: \"v\" op: \"Placeholder\" " + Attr("dtype", "type: DT_FLOAT") + "}\n" +
      Node("sel", "Select", {"c", "v", "v"}, T("DT_FLOAT")));
  EXPECT_THAT(s.message(), HasSubstr("node 'sel' (Select)"));
  // A scalar condition is never the row form, whatever the values' shape.
  EXPECT_TRUE(ImportError("node { name: \"c\" op: \"Placeholder\" " + Attr("dtype", "type: DT_BOOL") +
                          Attr("shape", "shape { }") + "}\n" + "node { name: \"v\" op: \"Placeholder\" " +
                          Attr("dtype", "type: DT_FLOAT") + "}\n" + Node("sel", "Select", {"c", "v", "v"}, T("DT_FLOAT")))
                  .ok());
}

TEST(TfImport, IntegerDivisionForms) {
  // Python's // and % (FloorDiv, FloorMod) and C's (TruncateDiv, Mod).
  const std::string graph =
      "node { name: \"a\" op: \"Placeholder\" " + Attr("dtype", "type: DT_INT32") + "}\n" +
      "node { name: \"b\" op: \"Placeholder\" " + Attr("dtype", "type: DT_INT32") + "}\n" +
      Node("floordiv", "FloorDiv", {"a", "b"}, T("DT_INT32")) + Node("floormod", "FloorMod", {"a", "b"}, T("DT_INT32")) +
      Node("truncdiv", "TruncateDiv", {"a", "b"}, T("DT_INT32")) + Node("mod", "Mod", {"a", "b"}, T("DT_INT32")) +
      kVersions;
  absl::StatusOr<Graph> g = ImportTensorFlowGraph(graph);
  ASSERT_TRUE(g.ok()) << g.status();
  for (int a : {7, -7, 6, -6, 0}) {
    for (int b : {3, -3, 1, -1}) {
      SCOPED_TRACE(std::to_string(a) + ", " + std::to_string(b));
      absl::StatusOr<std::vector<Tensor>> out = testing_tf::Run(
          *g, {{"a", Tensor::Scalar<int32_t>(a)}, {"b", Tensor::Scalar<int32_t>(b)}},
          {"floordiv", "floormod", "truncdiv", "mod"});
      ASSERT_TRUE(out.ok()) << out.status();
      const int floor_q = static_cast<int>(std::floor(static_cast<double>(a) / b));
      EXPECT_EQ((*out)[0].scalar<int32_t>(), floor_q);
      EXPECT_EQ((*out)[1].scalar<int32_t>(), a - floor_q * b);
      EXPECT_EQ((*out)[2].scalar<int32_t>(), a / b);
      EXPECT_EQ((*out)[3].scalar<int32_t>(), a % b);
    }
  }
}

TEST(TfImport, NeuralNetworkOps) {
  const std::string graph =
      kPlaceholderX +
      ConstNode("w", "DT_FLOAT",
                "tensor_shape { dim { size: 3 } dim { size: 2 } } float_val: 1 float_val: -1 float_val: 0.5 "
                "float_val: 0 float_val: -2 float_val: 1") +
      ConstNode("bias", "DT_FLOAT", "tensor_shape { dim { size: 2 } } float_val: 0.25 float_val: -0.5") +
      Node("mm", "MatMul", {"x", "w"}, T("DT_FLOAT") + Attr("transpose_a", "b: false") + Attr("transpose_b", "b: false")) +
      Node("logits", "BiasAdd", {"mm", "bias"}, T("DT_FLOAT") + Attr("data_format", "s: \"NHWC\"")) +
      Node("relu", "Relu", {"logits"}, T("DT_FLOAT")) + Node("sigmoid", "Sigmoid", {"logits"}, T("DT_FLOAT")) +
      Node("tanh", "Tanh", {"logits"}, T("DT_FLOAT")) + Node("softmax", "Softmax", {"logits"}, T("DT_FLOAT")) +
      ConstNode("labels", "DT_FLOAT",
                "tensor_shape { dim { size: 2 } dim { size: 2 } } float_val: 1 float_val: 0 float_val: 0 float_val: 1") +
      Node("xent", "SoftmaxCrossEntropyWithLogits", {"logits", "labels"}, T("DT_FLOAT")) +
      Node("loss", "Identity", {"xent"}, T("DT_FLOAT")) + Node("backprop", "Identity", {"xent:1"}, T("DT_FLOAT")) +
      kVersions;
  absl::StatusOr<std::vector<Tensor>> out =
      ImportAndRun(graph, {{"x", X23()}}, {"logits", "relu", "sigmoid", "tanh", "softmax", "loss", "backprop"});
  ASSERT_TRUE(out.ok()) << out.status();
  const float x[2][3] = {{1, 2, 3}, {4, 5, 6}};
  const float w[3][2] = {{1, -1}, {0.5f, 0}, {-2, 1}};
  const float b[2] = {0.25f, -0.5f};
  const float labels[2][2] = {{1, 0}, {0, 1}};
  std::vector<float> logits, relu, sigmoid, tanh_, softmax, loss, backprop;
  for (int i = 0; i < 2; ++i) {
    float l[2];
    for (int j = 0; j < 2; ++j) {
      l[j] = b[j];
      for (int k = 0; k < 3; ++k) l[j] += x[i][k] * w[k][j];
      logits.push_back(l[j]);
      relu.push_back(std::max(l[j], 0.0f));
      sigmoid.push_back(1 / (1 + std::exp(-l[j])));
      tanh_.push_back(std::tanh(l[j]));
    }
    const float z = std::exp(l[0]) + std::exp(l[1]);
    float row_loss = 0;
    for (int j = 0; j < 2; ++j) {
      softmax.push_back(std::exp(l[j]) / z);
      row_loss -= labels[i][j] * std::log(std::exp(l[j]) / z);
      backprop.push_back(std::exp(l[j]) / z - labels[i][j]);
    }
    loss.push_back(row_loss);
  }
  auto near = [](const std::vector<float>& want) {
    std::vector<::testing::Matcher<float>> m;
    for (float v : want) m.push_back(::testing::FloatNear(v, 1e-5f));
    return ElementsAreArray(m);
  };
  EXPECT_THAT(Values<float>((*out)[0]), near(logits));
  EXPECT_THAT(Values<float>((*out)[1]), near(relu));
  EXPECT_THAT(Values<float>((*out)[2]), near(sigmoid));
  EXPECT_THAT(Values<float>((*out)[3]), near(tanh_));
  EXPECT_THAT(Values<float>((*out)[4]), near(softmax));
  EXPECT_THAT(Values<float>((*out)[5]), near(loss));
  EXPECT_THAT(Values<float>((*out)[6]), near(backprop));
}

TEST(TfImport, EveryConstEncoding) {
  const std::string graph =
      ConstNode("splat", "DT_FLOAT", "tensor_shape { dim { size: 2 } dim { size: 3 } } float_val: 1.5") +
      // Fewer values than elements: the last repeats (TensorFlow's compressed form).
      ConstNode("tail", "DT_INT32", "tensor_shape { dim { size: 4 } } int_val: 1 int_val: 2") +
      ConstNode("zeros", "DT_INT64", "tensor_shape { dim { size: 3 } }") +
      ConstNode("bools", "DT_BOOL", "tensor_shape { dim { size: 3 } } tensor_content: \"\\001\\000\\001\"") +
      ConstNode("doubles", "DT_DOUBLE", "tensor_shape { dim { size: 2 } } double_val: 0.1 double_val: -2.5") +
      // int64 5 and -1, little-endian.
      ConstNode("int64s", "DT_INT64",
                "tensor_shape { dim { size: 2 } } tensor_content: "
                "\"\\005\\000\\000\\000\\000\\000\\000\\000\\377\\377\\377\\377\\377\\377\\377\\377\"") +
      ConstNode("empty", "DT_FLOAT", "tensor_shape { dim { size: 0 } dim { size: 4 } }") +
      ConstNode("scalar_bool", "DT_BOOL", "tensor_shape { } bool_val: true") + kVersions;
  absl::StatusOr<std::vector<Tensor>> out =
      ImportAndRun(graph, {}, {"splat", "tail", "zeros", "bools", "doubles", "int64s", "empty", "scalar_bool"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(1.5, 1.5, 1.5, 1.5, 1.5, 1.5));
  EXPECT_THAT(Values<int32_t>((*out)[1]), ElementsAre(1, 2, 2, 2));
  EXPECT_THAT(Values<int64_t>((*out)[2]), ElementsAre(0, 0, 0));
  EXPECT_THAT(Values<bool>((*out)[3]), ElementsAre(true, false, true));
  EXPECT_THAT(Values<double>((*out)[4]), ElementsAre(0.1, -2.5));
  EXPECT_THAT(Values<int64_t>((*out)[5]), ElementsAre(5, -1));
  EXPECT_EQ((*out)[6].shape(), Shape({0, 4}));
  EXPECT_EQ((*out)[7].scalar<bool>(), true);
}

TEST(TfImport, BinaryGraphDefLoadsLikeText) {
  const std::string text = kPlaceholderX + ConstNode("one", "DT_FLOAT", "tensor_shape { } float_val: 1") +
                           Node("y", "AddV2", {"x", "one"}, T("DT_FLOAT")) + kVersions;
  const std::string binary = testing_tf::TextToBinary(text);
  ASSERT_FALSE(binary.empty());
  absl::StatusOr<Graph> from_text = ImportTensorFlowGraph(text, TensorFlowGraphEncoding::kText);
  ASSERT_TRUE(from_text.ok()) << from_text.status();
  for (TensorFlowGraphEncoding e : {TensorFlowGraphEncoding::kBinary, TensorFlowGraphEncoding::kAuto}) {
    absl::StatusOr<Graph> from_binary = ImportTensorFlowGraph(binary, e);
    ASSERT_TRUE(from_binary.ok()) << from_binary.status();
    EXPECT_TRUE(*from_binary == *from_text);
  }
  EXPECT_TRUE(IsTensorFlowGraph(binary));
  absl::StatusOr<std::vector<Tensor>> out = testing_tf::Run(*from_text, {{"x", X23()}}, {"y"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(2, 3, 4, 5, 6, 7));
}

TEST(TfImport, DevicesAndUnknownRankPlaceholder) {
  const std::string graph =
      "node { name: \"p\" op: \"Placeholder\" device: \"/device:GPU:0\" " + Attr("dtype", "type: DT_INT64") +
      Attr("shape", "shape { unknown_rank: true }") + "}\n" +
      Node("q", "Identity", {"p"}, T("DT_INT64") + "device: \"/job:localhost/replica:0/task:0/device:CPU:0\" ") +
      Node("r", "Identity", {"q"}, T("DT_INT64") + "device: \"/cpu:0\" ") + kVersions;
  absl::StatusOr<Graph> g = ImportTensorFlowGraph(graph);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->FindNode("p")->device, "cuda:0");
  EXPECT_EQ(g->FindNode("p")->FindAttr("shape"), nullptr);  // unknown rank: no shape
  EXPECT_EQ(g->FindNode("q")->device, "cpu");
  EXPECT_EQ(g->FindNode("r")->device, "cpu");
}

TEST(TfImport, TensorFlowVersionsAreNotTdfFormatVersions) {
  // tdf's own loader reads min_consumer 12 as a format version it lacks;
  // the importer does not read TensorFlow's versions at all.
  const std::string graph = ConstNode("c", "DT_INT32", "tensor_shape { } int_val: 4") +
                            "versions { producer: 134 min_consumer: 12 bad_consumers: 3 }\n";
  EXPECT_FALSE(GraphFromText(graph).ok());
  absl::StatusOr<std::vector<Tensor>> out = ImportAndRun(graph, {}, {"c"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<int32_t>(), 4);
}

TEST(TfImport, TellsTensorFlowGraphsFromTdfGraphs) {
  EXPECT_TRUE(IsTensorFlowGraph(std::string("node { name: \"a\" op: \"AddV2\" }")));
  EXPECT_TRUE(IsTensorFlowGraph(std::string("versions { producer: 27 }")));
  EXPECT_TRUE(IsTensorFlowGraph(
      Node("s", "Sum", {"x", "axes"})));  // tdf's op name, TensorFlow's input form
  EXPECT_FALSE(IsTensorFlowGraph(Node("s", "Sum", {"x"}, Attr("axes", "list { i: 0 }")) +
                                 "versions { producer: 1 min_consumer: 1 }"));
  EXPECT_FALSE(IsTensorFlowGraph(std::string("\x01\x02 garbage", 10)));
}

TEST(TfImport, TdfsOwnGraphsAreNotTakenForTensorFlowGraphs) {
  for (const Graph& g : {reference::Fib(), reference::Ack(), reference::EvenOdd(), reference::Primes(),
                         reference::WhileLoop(), reference::CallInWhile(), reference::WhileInFunction(),
                         reference::OpChain(5)}) {
    absl::StatusOr<std::string> binary = SerializeGraph(g);
    ASSERT_TRUE(binary.ok());
    EXPECT_FALSE(IsTensorFlowGraph(*binary));
    EXPECT_FALSE(IsTensorFlowGraph(GraphToText(g)));
  }
}

TEST(TfImport, ReferenceVariablesAssignAndGradientDescent) {
  // w = tf.Variable([1., 2.]); y = w * x; tf.assign_add(w, x);
  // GradientDescentOptimizer's ApplyGradientDescent(w, 0.5, x); init.
  const std::string graph =
      "node { name: \"x\" op: \"Placeholder\" " + Attr("dtype", "type: DT_FLOAT") +
      Attr("shape", "shape { dim { size: 2 } }") + "}\n" +
      Node("w", "VariableV2", {},
           Attr("dtype", "type: DT_FLOAT") + Attr("shape", "shape { dim { size: 2 } }") + Attr("container", "s: \"\"") +
               Attr("shared_name", "s: \"\"")) +
      ConstNode("w/initial_value", "DT_FLOAT", "tensor_shape { dim { size: 2 } } float_val: 1 float_val: 2") +
      Node("w/Assign", "Assign", {"w", "w/initial_value"},
           T("DT_FLOAT") + Attr("validate_shape", "b: true") + Attr("use_locking", "b: true") +
               Attr("_class", "list { s: \"loc:@w\" }")) +
      Node("w/read", "Identity", {"w"}, T("DT_FLOAT")) + Node("y", "Mul", {"w/read", "x"}, T("DT_FLOAT")) +
      Node("y_ref", "Mul", {"w", "x"}, T("DT_FLOAT")) +
      Node("bump", "AssignAdd", {"w", "x"}, T("DT_FLOAT") + Attr("use_locking", "b: false")) +
      ConstNode("lr", "DT_FLOAT", "tensor_shape { } float_val: 0.5") +
      Node("sgd", "ApplyGradientDescent", {"w", "lr", "x"}, T("DT_FLOAT") + Attr("use_locking", "b: false")) +
      Node("init", "NoOp", {"^w/Assign"}) + kVersions;
  absl::StatusOr<Graph> g = ImportTensorFlowGraph(graph);
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(*g);
  ASSERT_TRUE(session.ok()) << session.status();
  const Tensor x = *Tensor::FromVector<float>({3, 4}, {2});
  auto y = [&]() -> std::vector<float> {
    absl::StatusOr<std::vector<Tensor>> out = (*session)->Run({{"x", x}}, {"y", "y_ref"});
    if (!out.ok()) return {};
    EXPECT_THAT(Values<float>((*out)[1]), ElementsAreArray(Values<float>((*out)[0])));
    return Values<float>((*out)[0]);
  };
  EXPECT_THAT(y(), ElementsAre(1 * 3, 2 * 4));  // initialized from w/initial_value
  ASSERT_TRUE((*session)->Run({{"x", x}}, {}, {"bump"}).ok());
  EXPECT_THAT(y(), ElementsAre((1 + 3) * 3, (2 + 4) * 4));
  ASSERT_TRUE((*session)->Run({{"x", x}}, {}, {"sgd"}).ok());
  EXPECT_THAT(y(), ElementsAre((1 + 3 - 0.5f * 3) * 3, (2 + 4 - 0.5f * 4) * 4));
  ASSERT_TRUE((*session)->Run({}, {}, {"init"}).ok());
  EXPECT_THAT(y(), ElementsAre(1 * 3, 2 * 4));
}

// ---- Refusals: at import, naming the node and what is missing ----

absl::Status ImportError(const std::string& graph) {
  absl::StatusOr<Graph> g = ImportTensorFlowGraph(graph);
  return g.ok() ? absl::OkStatus() : g.status();
}

TEST(TfImportErrors, OpTdfLacks) {
  absl::Status s = ImportError(kPlaceholderX + ConstNode("axis", "DT_INT32", "tensor_shape { } int_val: 0") +
                               Node("p", "Prod", {"x", "axis"}, T("DT_FLOAT")) + kVersions);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("node 'p' (Prod)"));
  EXPECT_THAT(s.message(), HasSubstr("no tdf counterpart"));
}

TEST(TfImportErrors, StringConstant) {
  absl::Status s = ImportError(ConstNode("s", "DT_STRING", "tensor_shape { } string_val: \"hi\"") + kVersions);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("node 's' (Const)"));
  EXPECT_THAT(s.message(), HasSubstr("DT_STRING"));
}

TEST(TfImportErrors, UnsupportedDTypeInAnAttribute) {
  absl::Status s = ImportError("node { name: \"h\" op: \"Placeholder\" " + Attr("dtype", "type: DT_HALF") + "}\n" +
                               Node("i", "Identity", {"h"}, T("DT_HALF")));
  EXPECT_THAT(s.message(), HasSubstr("node 'h' (Placeholder)"));
  EXPECT_THAT(s.message(), HasSubstr("DT_HALF"));
}

TEST(TfImportErrors, AxesThatAreNotConstant) {
  absl::Status s = ImportError(kPlaceholderX + "node { name: \"axes\" op: \"Placeholder\" " +
                               Attr("dtype", "type: DT_INT32") + "}\n" +
                               Node("sum", "Sum", {"x", "axes"}, T("DT_FLOAT")) + kVersions);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("node 'sum' (Sum)"));
  EXPECT_THAT(s.message(), HasSubstr("not a constant"));
}

TEST(TfImportErrors, ShapesNotKnownAtImport) {
  const std::string z = "node { name: \"z\" op: \"Placeholder\" " + Attr("dtype", "type: DT_FLOAT") +
                        Attr("shape", "shape { unknown_rank: true }") + "}\n";
  absl::Status s = ImportError(z + ConstNode("axis", "DT_INT32", "tensor_shape { } int_val: 0") +
                               Node("ed", "ExpandDims", {"z", "axis"}, T("DT_FLOAT")));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("node 'ed' (ExpandDims)"));
  EXPECT_THAT(s.message(), HasSubstr("rank"));
  // x is [-1, 3]: its Shape is not a constant, so neither is the Reshape's target.
  s = ImportError(kPlaceholderX + Node("shp", "Shape", {"x"}, T("DT_FLOAT")) +
                  Node("r", "Reshape", {"x", "shp"}, T("DT_FLOAT")));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), AnyOf(HasSubstr("node 'shp' (Shape)"), HasSubstr("node 'r' (Reshape)")));
  s = ImportError(kPlaceholderX + Node("sq", "Squeeze", {"x"}, T("DT_FLOAT")));
  EXPECT_THAT(s.message(), HasSubstr("node 'sq' (Squeeze)"));
}

TEST(TfImportErrors, AbsurdStaticShapesAreNotFolded) {
  // [2^40, 2^40] overflows int64 as an element count, and 2^40 does not fit
  // an int32 Shape: neither is folded into a wrong constant.
  const std::string big = "node { name: \"b\" op: \"Placeholder\" " + Attr("dtype", "type: DT_FLOAT") +
                          Attr("shape", "shape { dim { size: 1099511627776 } dim { size: 1099511627776 } }") + "}\n";
  absl::Status s = ImportError(big + Node("size", "Size", {"b"}, T("DT_FLOAT") + Attr("out_type", "type: DT_INT64")));
  EXPECT_THAT(s.message(), HasSubstr("node 'size' (Size)"));
  s = ImportError(big + Node("shape", "Shape", {"b"}, T("DT_FLOAT")));
  EXPECT_THAT(s.message(), HasSubstr("node 'shape' (Shape)"));
  s = ImportError(big + ConstNode("to", "DT_INT32", "tensor_shape { dim { size: 3 } } int_val: 2 int_val: -1 int_val: 2") +
                  Node("r", "Reshape", {"b", "to"}, T("DT_FLOAT")) + ConstNode("axis", "DT_INT32", "tensor_shape { } int_val: 0") +
                  Node("ed", "ExpandDims", {"r", "axis"}, T("DT_FLOAT")));
  EXPECT_TRUE(s.ok()) << s;  // [2, -1, 2] stays unknown in the middle: one -1 is fine
}

TEST(TfImportErrors, FloatFloorMod) {
  absl::Status s = ImportError(kPlaceholderX + Node("m", "FloorMod", {"x", "x"}, T("DT_FLOAT")));
  EXPECT_THAT(s.message(), HasSubstr("node 'm' (FloorMod)"));
}

TEST(TfImportErrors, DeviceOfAnotherJob) {
  absl::Status s = ImportError("node { name: \"c\" op: \"NoOp\" device: \"/job:ps/task:0/device:CPU:0\" }");
  EXPECT_THAT(s.message(), HasSubstr("node 'c' (NoOp)"));
  EXPECT_THAT(s.message(), HasSubstr("job 'ps'"));
}

TEST(TfImportErrors, TypeMismatchFoundByValidation) {
  absl::Status s = ImportError(kPlaceholderX + ConstNode("i", "DT_INT32", "tensor_shape { } int_val: 1") +
                               Node("add", "AddV2", {"x", "i"}, T("DT_FLOAT")));
  EXPECT_THAT(s.message(), HasSubstr("node 'add' (Add)"));
  EXPECT_THAT(s.message(), HasSubstr("dtype mismatch"));
}

TEST(TfImportErrors, MalformedInputNeverCrashes) {
  EXPECT_FALSE(ImportTensorFlowGraph(std::string("\x0a\xff\xff\xff\xff\x0f", 6)).ok());
  EXPECT_FALSE(ImportTensorFlowGraph("node { name: ").ok());
  EXPECT_FALSE(ImportError(ConstNode("c", "DT_FLOAT", "tensor_shape { dim { size: 2 } } float_val: 1 float_val: 2 "
                                                      "float_val: 3")).ok());
  EXPECT_FALSE(ImportError(ConstNode("c", "DT_FLOAT", "tensor_shape { dim { size: 2 } } tensor_content: \"abc\"")).ok());
  EXPECT_FALSE(ImportError(ConstNode("c", "DT_FLOAT", "tensor_shape { dim { size: 100000000 } dim { size: 100000000 } }")).ok());
  EXPECT_FALSE(ImportError(ConstNode("c", "DT_FLOAT", "tensor_shape { dim { size: -3 } }")).ok());
  EXPECT_FALSE(ImportError(Node("a", "Identity", {"^b", "c"})).ok());
  EXPECT_FALSE(ImportError(Node("a", "NoOp", {}) + Node("a", "NoOp", {})).ok());
}

TEST(TfImportErrors, DeepChainsDoNotExhaustTheStack) {
  // Static shapes and constant values are followed through a chain of
  // 100 000 Identity nodes: bounded, never a stack overflow.
  std::string graph = kPlaceholderX + ConstNode("axis", "DT_INT32", "tensor_shape { } int_val: 0");
  constexpr int kChain = 100000;
  std::string prev = "x", prev_axis = "axis";
  for (int i = 0; i < kChain; ++i) {
    const std::string id = "id" + std::to_string(i), ax = "ax" + std::to_string(i);
    graph += Node(id, "Identity", {prev}, T("DT_FLOAT")) + Node(ax, "Identity", {prev_axis}, T("DT_INT32"));
    prev = id;
    prev_axis = ax;
  }
  graph += Node("ed", "ExpandDims", {prev, prev_axis}, T("DT_FLOAT"));
  absl::Status s = ImportError(graph);
  EXPECT_THAT(s.message(), HasSubstr("node 'ed' (ExpandDims)"));
}

TEST(TfImportErrors, HugeFillIsRefusedNotAllocated) {
  absl::Status s = ImportError(
      ConstNode("dims", "DT_INT64", "tensor_shape { dim { size: 2 } } int64_val: 1000000 int64_val: 1000000") +
      ConstNode("v", "DT_FLOAT", "tensor_shape { } float_val: 1") +
      Node("fill", "Fill", {"dims", "v"}, T("DT_FLOAT")));
  EXPECT_THAT(s.message(), HasSubstr("node 'fill' (Fill)"));
}

}  // namespace
}  // namespace tdf
