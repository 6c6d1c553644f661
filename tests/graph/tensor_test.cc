// Tensor::RefCountIsOne: what in-place updates (AssignAdd, ScatterAdd) rely
// on to never change a value someone else holds.
#include <gtest/gtest.h>

#include <vector>

#include "tdf/tensor.h"

namespace tdf {
namespace {

TEST(TensorRefCount, CopiesViewsAndScalars) {
  Tensor t = *Tensor::FromVector<float>({1, 2, 3, 4}, Shape({2, 2}));
  EXPECT_TRUE(t.RefCountIsOne());
  {
    Tensor copy = t;  // shares the Rep
    EXPECT_FALSE(t.RefCountIsOne());
    EXPECT_FALSE(copy.RefCountIsOne());
  }
  EXPECT_TRUE(t.RefCountIsOne());
  {
    Tensor view = *t.Reshape(Shape({4}));  // its own Rep, the same buffer
    EXPECT_FALSE(t.RefCountIsOne());
    EXPECT_FALSE(view.RefCountIsOne());
  }
  EXPECT_TRUE(t.RefCountIsOne());
  Tensor moved = std::move(t);  // a move transfers the only reference
  EXPECT_TRUE(moved.RefCountIsOne());
  Tensor clone = moved.Clone();
  EXPECT_TRUE(clone.RefCountIsOne());
  EXPECT_TRUE(moved.RefCountIsOne());
  EXPECT_TRUE(Tensor::Scalar<double>(2.0).RefCountIsOne());  // inline: nothing shared
}

TEST(TensorRefCount, WrappedBufferHeldElsewhere) {
  // A tensor over a buffer that something else also references is shared.
  Buffer* buf = Buffer::Allocate(4 * sizeof(float), Device::Cpu());
  Tensor t = Tensor::FromBuffer(DType::kFloat32, Shape({4}), buf);
  EXPECT_FALSE(t.RefCountIsOne());
  buf->Unref();
  EXPECT_TRUE(t.RefCountIsOne());
}

}  // namespace
}  // namespace tdf
