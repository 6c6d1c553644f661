#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/kernel_test_util.h"

namespace tdf {
namespace {

using kernel_test::B;
using kernel_test::F64;
using kernel_test::I32;
using kernel_test::I64;
using kernel_test::Run1;
using kernel_test::RunError;
using kernel_test::RunOp;
using kernel_test::TensorEq;
using ::testing::HasSubstr;

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

TEST(ReshapeKernel, SharesBufferAndInfersOneDim) {
  Tensor x = I64(Iota(6), {2, 3});
  Tensor out = Run1("Reshape", {x}, {{"shape", std::vector<int64_t>{3, -1}}});
  EXPECT_TRUE(TensorEq(out, I64(Iota(6), {3, 2})));
  EXPECT_EQ(out.buffer(), x.buffer());
  EXPECT_TRUE(TensorEq(Run1("Reshape", {x}, {{"shape", std::vector<int64_t>{-1}}}), I64(Iota(6), {6})));
  EXPECT_TRUE(TensorEq(Run1("Reshape", {I64({7}, {1, 1})}, {{"shape", std::vector<int64_t>{}}}),
                       Tensor::Scalar<int64_t>(7)));
  EXPECT_TRUE(TensorEq(Run1("Reshape", {Tensor::Scalar<int64_t>(7)}, {{"shape", std::vector<int64_t>{1}}}),
                       I64({7}, {1})));
  EXPECT_EQ(Run1("Reshape", {I64({}, {0, 3})}, {{"shape", std::vector<int64_t>{3, 0}}}).shape(), Shape({3, 0}));
}

TEST(ReshapeKernel, BadShapes) {
  Tensor x = I64(Iota(6), {2, 3});
  absl::Status s = RunError("Reshape", {x}, {{"shape", std::vector<int64_t>{4, -1}}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("[2,3]"));
  EXPECT_EQ(RunError("Reshape", {x}, {{"shape", std::vector<int64_t>{5}}}).code(),
            absl::StatusCode::kInvalidArgument);
  // Two unknown dims: rejected when the kernel is created.
  EXPECT_EQ(RunError("Reshape", {x}, {{"shape", std::vector<int64_t>{-1, -1}}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunError("Reshape", {x}, {{"shape", std::vector<int64_t>{-2, 3}}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunError("Reshape", {I64({}, {0})}, {{"shape", std::vector<int64_t>{0, -1}}}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ReshapeLikeKernel, UsesTheOtherShape) {
  Tensor x = F64({1, 2, 3, 4}, {4});
  EXPECT_TRUE(TensorEq(Run1("ReshapeLike", {x, I32({0, 0, 0, 0}, {2, 2})}), F64({1, 2, 3, 4}, {2, 2})));
  EXPECT_TRUE(TensorEq(Run1("ReshapeLike", {Tensor::Scalar<double>(1), Tensor::Scalar<int64_t>(0)}),
                       Tensor::Scalar<double>(1)));
  EXPECT_EQ(RunError("ReshapeLike", {x, I32({0, 0}, {2})}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TransposeKernel, PermAndDefaultReverse) {
  Tensor x = I64(Iota(6), {2, 3});
  EXPECT_TRUE(TensorEq(Run1("Transpose", {x}), I64({0, 3, 1, 4, 2, 5}, {3, 2})));
  // [2,3,4] with perm {1,2,0} -> [3,4,2]: out[j,k,i] = x[i,j,k]
  Tensor y = I64(Iota(24), {2, 3, 4});
  std::vector<int64_t> want;
  for (int j = 0; j < 3; ++j)
    for (int k = 0; k < 4; ++k)
      for (int i = 0; i < 2; ++i) want.push_back((i * 3 + j) * 4 + k);
  EXPECT_TRUE(TensorEq(Run1("Transpose", {y}, {{"perm", std::vector<int64_t>{1, 2, 0}}}), I64(want, {3, 4, 2})));
  EXPECT_EQ(Run1("Transpose", {y}, {{"perm", std::vector<int64_t>{0, 1, 2}}}).buffer(), y.buffer());
  EXPECT_EQ(Run1("Transpose", {F64({}, {0, 2})}).shape(), Shape({2, 0}));
  EXPECT_TRUE(TensorEq(Run1("Transpose", {B({true, false}, {2, 1})}), B({true, false}, {1, 2})));
  EXPECT_EQ(RunError("Transpose", {y}, {{"perm", std::vector<int64_t>{0, 0, 1}}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunError("Transpose", {y}, {{"perm", std::vector<int64_t>{1, 0}}}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ConcatKernel, AlongAnyAxis) {
  Tensor a = I64({1, 2, 3, 4}, {2, 2});
  Tensor b = I64({5, 6}, {2, 1});
  EXPECT_TRUE(TensorEq(Run1("Concat", {a, b}, {{"axis", 1}}), I64({1, 2, 5, 3, 4, 6}, {2, 3})));
  EXPECT_TRUE(TensorEq(Run1("Concat", {a, b}, {{"axis", -1}}), I64({1, 2, 5, 3, 4, 6}, {2, 3})));
  EXPECT_TRUE(TensorEq(Run1("Concat", {a, I64({7, 8}, {1, 2})}, {{"axis", 0}}), I64({1, 2, 3, 4, 7, 8}, {3, 2})));
  EXPECT_TRUE(TensorEq(Run1("Concat", {I64({}, {0}), I64({1}, {1}), I64({2, 3}, {2})}, {{"axis", 0}}),
                       I64({1, 2, 3}, {3})));
  EXPECT_EQ(Run1("Concat", {a}, {{"axis", 0}}).buffer(), a.buffer());
}

TEST(ConcatKernel, Errors) {
  Tensor a = I64({1, 2, 3, 4}, {2, 2});
  absl::Status s = RunError("Concat", {a, I64({5, 6}, {2, 1})}, {{"axis", 0}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("[2,1]"));
  EXPECT_EQ(RunError("Concat", {a, a}, {{"axis", 2}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunError("Concat", {a, F64({1, 2, 3, 4}, {2, 2})}, {{"axis", 0}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunError("Concat", {Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(2)}, {{"axis", 0}}).code(),
            absl::StatusCode::kInvalidArgument);
}

// Row vectors along axis 1 take a shorter path (ConcatRows): same values,
// an empty part included, and shapes it does not cover still error.
TEST(ConcatKernel, RowVectorsSideBySide) {
  Tensor a = F64({1, 2}, {1, 2});
  Tensor b = F64({3}, {1, 1});
  Tensor e = F64({}, {1, 0});
  EXPECT_TRUE(TensorEq(Run1("Concat", {a, e, b, a}, {{"axis", 1}}), F64({1, 2, 3, 1, 2}, {1, 5})));
  EXPECT_TRUE(TensorEq(Run1("Concat", {b, a}, {{"axis", -1}}), F64({3, 1, 2}, {1, 3})));
  EXPECT_TRUE(TensorEq(Run1("Concat", {I64({4}, {1, 1}), I64({5, 6}, {1, 2})}, {{"axis", 1}}), I64({4, 5, 6}, {1, 3})));
  absl::Status s = RunError("Concat", {a, F64({1, 2, 3, 4}, {2, 2})}, {{"axis", 1}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("[2,2]"));
  EXPECT_EQ(RunError("Concat", {a, I64({1, 2}, {1, 2})}, {{"axis", 1}}).code(), absl::StatusCode::kInvalidArgument);
}

AttrMap SliceAttrs(std::vector<int64_t> begin, std::vector<int64_t> size) {
  return {{"begin", std::move(begin)}, {"size", std::move(size)}};
}

TEST(SliceKernel, BeginSizeAndToEnd) {
  Tensor x = I64(Iota(12), {3, 4});
  EXPECT_TRUE(TensorEq(Run1("Slice", {x}, SliceAttrs({1, 1}, {2, 2})), I64({5, 6, 9, 10}, {2, 2})));
  EXPECT_TRUE(TensorEq(Run1("Slice", {x}, SliceAttrs({2, 1}, {-1, -1})), I64({9, 10, 11}, {1, 3})));
  EXPECT_EQ(Run1("Slice", {x}, SliceAttrs({0, 0}, {-1, -1})).buffer(), x.buffer());
  EXPECT_EQ(Run1("Slice", {x}, SliceAttrs({3, 0}, {0, 4})).shape(), Shape({0, 4}));
  EXPECT_TRUE(TensorEq(Run1("Slice", {F64({1, 2, 3}, {3})}, SliceAttrs({1}, {1})), F64({2}, {1})));
}

TEST(SliceKernel, OutOfBounds) {
  Tensor x = I64(Iota(12), {3, 4});
  absl::Status s = RunError("Slice", {x}, SliceAttrs({2, 0}, {2, 1}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("dim 0"));
  EXPECT_EQ(RunError("Slice", {x}, SliceAttrs({-1, 0}, {1, 1})).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunError("Slice", {x}, SliceAttrs({0}, {1})).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunError("Slice", {x}, SliceAttrs({0, 0}, {1})).code(), absl::StatusCode::kInvalidArgument);
}

TEST(GatherKernel, RowsAndOtherAxes) {
  Tensor params = F64({1, 2, 3, 4, 5, 6}, {3, 2});
  EXPECT_TRUE(TensorEq(Run1("Gather", {params, I64({2, 0, 2}, {3})}), F64({5, 6, 1, 2, 5, 6}, {3, 2})));
  EXPECT_TRUE(TensorEq(Run1("Gather", {params, I32({1}, {1})}), F64({3, 4}, {1, 2})));
  EXPECT_TRUE(TensorEq(Run1("Gather", {params, Tensor::Scalar<int64_t>(1)}), F64({3, 4}, {2})));
  EXPECT_TRUE(TensorEq(Run1("Gather", {params, I64({1, 1, 0, 0}, {2, 2})}, {{"axis", 1}}),
                       F64({2, 2, 1, 1, 4, 4, 3, 3, 6, 6, 5, 5}, {3, 2, 2})));
  EXPECT_TRUE(TensorEq(Run1("Gather", {params, I64({0}, {1})}, {{"axis", -1}}), F64({1, 3, 5}, {3, 1})));
  EXPECT_EQ(Run1("Gather", {params, I64({}, {0})}).shape(), Shape({0, 2}));
}

// One element of a vector by a scalar index is an inline scalar
// (GatherScalar); out of range, the general path names the index.
TEST(GatherKernel, ScalarIndexIntoAVector) {
  Tensor out = Run1("Gather", {I64({7, 8, 9}, {3}), Tensor::Scalar<int64_t>(2)});
  EXPECT_TRUE(TensorEq(out, Tensor::Scalar<int64_t>(9)));
  EXPECT_TRUE(out.is_inline_scalar());
  EXPECT_TRUE(TensorEq(Run1("Gather", {F64({1.5, 2.5}, {2}), Tensor::Scalar<int32_t>(0)}), Tensor::Scalar<double>(1.5)));
  EXPECT_TRUE(TensorEq(Run1("Gather", {I32({3, 4}, {2}), Tensor::Scalar<int64_t>(1)}, {{"axis", -1}}),
                       Tensor::Scalar<int32_t>(4)));
  EXPECT_THAT(RunError("Gather", {I64({7, 8, 9}, {3}), Tensor::Scalar<int64_t>(3)}).message(), HasSubstr("index 3"));
  EXPECT_THAT(RunError("Gather", {I64({7, 8, 9}, {3}), Tensor::Scalar<int64_t>(-1)}).message(), HasSubstr("index -1"));
  EXPECT_EQ(RunError("Gather", {I64({7, 8, 9}, {3}), Tensor::Scalar<int64_t>(0)}, {{"axis", 1}}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GatherKernel, BadIndexIsNamed) {
  Tensor params = F64({1, 2, 3, 4, 5, 6}, {3, 2});
  absl::Status s = RunError("Gather", {params, I64({0, 7}, {2})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("index 7"));
  EXPECT_THAT(s.message(), HasSubstr("[0, 3)"));
  EXPECT_THAT(RunError("Gather", {params, I32({-1}, {1})}).message(), HasSubstr("index -1"));
  EXPECT_EQ(RunError("Gather", {params, F64({0}, {1})}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunError("Gather", {params, I64({0}, {1})}, {{"axis", 2}}).code(), absl::StatusCode::kInvalidArgument);
}

// ---- gradient helpers ----

TEST(ConcatGradKernel, SplitsDyIntoTheInputsBlocks) {
  Tensor dy = I64(Iota(6), {2, 3});
  absl::StatusOr<std::vector<Tensor>> out =
      RunOp("ConcatGrad", {dy, I64({0, 0}, {2, 1}), I64({0, 0, 0, 0}, {2, 2})}, {{"axis", 1}}, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorEq((*out)[0], I64({0, 3}, {2, 1})));
  EXPECT_TRUE(TensorEq((*out)[1], I64({1, 2, 4, 5}, {2, 2})));
  out = RunOp("ConcatGrad", {dy, I64({}, {0, 3}), I64({0, 0, 0}, {1, 3}), I64({0, 0, 0}, {1, 3})}, {{"axis", 0}}, 3);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), Shape({0, 3}));
  EXPECT_TRUE(TensorEq((*out)[1], I64({0, 1, 2}, {1, 3})));
  EXPECT_TRUE(TensorEq((*out)[2], I64({3, 4, 5}, {1, 3})));
  absl::Status s = RunError("ConcatGrad", {dy, I64({0, 0}, {2, 1})}, {{"axis", 1}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("add up to 1"));
  EXPECT_EQ(RunError("ConcatGrad", {dy, I64({0, 0}, {1, 2})}, {{"axis", 1}}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SliceGradKernel, PadsDyWithZeros) {
  Tensor x = F64(std::vector<double>(12, 9.0), {3, 4});
  EXPECT_TRUE(TensorEq(Run1("SliceGrad", {x, F64({1, 2, 3, 4}, {2, 2})}, SliceAttrs({1, 1}, {2, 2})),
                       F64({0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0}, {3, 4})));
  EXPECT_TRUE(TensorEq(Run1("SliceGrad", {x, F64({1, 2, 3}, {1, 3})}, SliceAttrs({2, 1}, {-1, -1})),
                       F64({0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3}, {3, 4})));
  absl::Status s = RunError("SliceGrad", {x, F64({1, 2}, {1, 2})}, SliceAttrs({1, 1}, {2, 2}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("[2,2]"));
  EXPECT_EQ(RunError("SliceGrad", {x, F64({1}, {1, 1})}, SliceAttrs({3, 0}, {1, 1})).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GatherGradKernel, ScatterAddsRowsIncludingRepeats) {
  Tensor params = F64({0, 0, 0, 0, 0, 0}, {3, 2});
  EXPECT_TRUE(TensorEq(Run1("GatherGrad", {params, I64({2, 0, 2}, {3}), F64({1, 2, 3, 4, 5, 6}, {3, 2})}),
                       F64({3, 4, 0, 0, 6, 8}, {3, 2})));
  EXPECT_TRUE(TensorEq(Run1("GatherGrad", {params, Tensor::Scalar<int64_t>(1), F64({7, 8}, {2})}),
                       F64({0, 0, 7, 8, 0, 0}, {3, 2})));
  EXPECT_TRUE(TensorEq(Run1("GatherGrad", {params, I32({1, 1}, {2}), F64({1, 2, 3, 4, 5, 6}, {3, 2})}, {{"axis", 1}}),
                       F64({0, 3, 0, 7, 0, 11}, {3, 2})));
  absl::Status s = RunError("GatherGrad", {params, I64({3}, {1}), F64({1, 2}, {1, 2})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("index 3"));
  s = RunError("GatherGrad", {params, I64({0, 1}, {2}), F64({1, 2}, {1, 2})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("gives [2,2]"));
  EXPECT_EQ(RunError("GatherGrad", {params, F64({0}, {1}), F64({1, 2}, {1, 2})}).code(),
            absl::StatusCode::kInvalidArgument);
}

// Indexed rows: IndexedRowsSum of IndexedRows(P, idx, dy) is GatherGrad's
// dense gradient, for float32 and float64, scalar, vector and matrix
// indices, int32 and int64; concatenating two sums keeps their rows while
// there are at most P's rows, then compacts them to one row per distinct
// index (in index order) with the same sum.
TEST(IndexedRowsKernels, SumsEqualGatherGradAndConcatCompacts) {
  for (DType dt : {DType::kFloat32, DType::kFloat64}) {
    auto cast = [&](const Tensor& t) { return dt == DType::kFloat64 ? t : Run1("Cast", {t}, {{"DstT", dt}}); };
    Tensor P = cast(F64(std::vector<double>(3 * 2 * 2, 0.5), {3, 2, 2}));
    struct Read {
      Tensor idx, dy;
    };
    std::vector<Read> reads = {
        {Tensor::Scalar<int64_t>(1), cast(F64({1, 2, 3, 4}, {2, 2}))},
        {I32({2, 0, 2}, {3}), cast(F64({1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12}, {3, 2, 2}))},
        {I64({0, 1}, {2, 1}), cast(F64({0.5, 0.25, -1, 2, 4, 8, 16, 32}, {2, 1, 2, 2}))},
    };
    std::vector<Tensor> rows;
    Tensor dense_sum;
    for (const Read& r : reads) {
      rows.push_back(Run1("IndexedRows", {P, r.idx, r.dy}));
      EXPECT_EQ(rows.back().shape(), Shape({r.idx.num_elements(), 5}));
      Tensor want = Run1("GatherGrad", {P, r.idx, r.dy});
      EXPECT_TRUE(TensorEq(Run1("IndexedRowsSum", {rows.back(), P}), want)) << DTypeName(dt);
      dense_sum = dense_sum.valid() ? Run1("Add", {dense_sum, want}) : want;
    }
    // 1 + 3 rows > 3: compacted to the 3 distinct indices.
    Tensor two = Run1("IndexedRowsConcat", {P, rows[0], rows[1]});
    EXPECT_EQ(two.shape(), Shape({3, 5}));
    EXPECT_TRUE(TensorEq(Run1("IndexedRowsSum", {two, P}), Run1("Add", {Run1("GatherGrad", {P, reads[0].idx, reads[0].dy}),
                                                                         Run1("GatherGrad", {P, reads[1].idx, reads[1].dy})})));
    // 1 + 2 rows <= 3: kept, in order.
    Tensor kept = Run1("IndexedRowsConcat", {P, rows[0], rows[2]});
    EXPECT_EQ(kept.shape(), Shape({3, 5}));
    EXPECT_TRUE(TensorEq(Run1("IndexedRowsConcat", {P, kept}), kept));
    Tensor all = Run1("IndexedRowsConcat", {P, rows[0], rows[1], rows[2]});
    EXPECT_EQ(all.shape(), Shape({3, 5}));
    EXPECT_TRUE(TensorEq(Run1("IndexedRowsSum", {all, P}), dense_sum)) << DTypeName(dt);
  }
}

TEST(IndexedRowsKernels, EmptySumsAndErrors) {
  Tensor P = F64(std::vector<double>(6, 1.0), {3, 2});
  Tensor empty = Run1("IndexedRowsConcat", {P});
  EXPECT_EQ(empty.shape(), Shape({0, 3}));
  EXPECT_TRUE(TensorEq(Run1("IndexedRowsSum", {empty, P}), F64(std::vector<double>(6, 0.0), {3, 2})));
  Tensor one = Run1("IndexedRows", {P, I64({2}, {1}), F64({7, 8}, {1, 2})});
  EXPECT_TRUE(TensorEq(Run1("IndexedRowsConcat", {P, empty, one, empty}), one));
  // Taken apart again (for a sparse variable update).
  std::vector<Tensor> split = *RunOp("IndexedRowsSplit", {Run1("IndexedRowsConcat", {P, one, one}), P}, {}, 2);
  ASSERT_EQ(split.size(), 2u);
  EXPECT_TRUE(TensorEq(split[0], I64({2, 2}, {2})));
  EXPECT_TRUE(TensorEq(split[1], F64({7, 8, 7, 8}, {2, 2})));
  EXPECT_EQ((*RunOp("IndexedRowsSplit", {empty, P}, {}, 2))[1].shape(), Shape({0, 2}));
  absl::Status s = RunError("IndexedRows", {P, I64({3}, {1}), F64({1, 2}, {1, 2})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("index 3"));
  EXPECT_THAT(RunError("IndexedRows", {P, I64({0, 1}, {2}), F64({1, 2}, {1, 2})}).message(), HasSubstr("gives [2,2]"));
  EXPECT_THAT(RunError("IndexedRowsConcat", {P, F64({1, 2}, {1, 2})}).message(), HasSubstr("must be indexed rows [m, 3]"));
  // A row whose index does not decode into [0, rows) is refused, not scattered.
  EXPECT_THAT(RunError("IndexedRowsSum", {F64({1e300, 1, 2}, {1, 3}), P}).message(), HasSubstr("out of range [0, 3)"));
  EXPECT_EQ(RunError("IndexedRows", {I64({1, 2}, {2}), I64({0}, {1}), I64({1}, {1})}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunError("IndexedRowsSum", {one, Tensor::Scalar<double>(1.0)}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(BroadcastToKernel, ExpandsToTheOtherShape) {
  EXPECT_TRUE(TensorEq(Run1("BroadcastTo", {F64({1, 2}, {2}), F64({0, 0, 0, 0, 0, 0}, {3, 2})}),
                       F64({1, 2, 1, 2, 1, 2}, {3, 2})));
  EXPECT_TRUE(TensorEq(Run1("BroadcastTo", {Tensor::Scalar<int64_t>(4), I32({0, 0}, {2})}), I64({4, 4}, {2})));
  EXPECT_TRUE(TensorEq(Run1("BroadcastTo", {I64({1, 2}, {2, 1}), I64({0, 0, 0, 0}, {2, 2})}),
                       I64({1, 1, 2, 2}, {2, 2})));
  EXPECT_TRUE(TensorEq(Run1("BroadcastTo", {Tensor::Scalar<int64_t>(4), Tensor::Scalar<int64_t>(0)}),
                       Tensor::Scalar<int64_t>(4)));
  absl::Status s = RunError("BroadcastTo", {F64({1, 2, 3}, {3}), F64({0, 0}, {2})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("[3]"));
  // Broadcasting must not grow the target shape.
  EXPECT_EQ(RunError("BroadcastTo", {F64({1, 2}, {2, 1}), F64({0, 0}, {2})}).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tdf
