// Tensor::RefCountIsOne: what in-place updates (AssignAdd, ScatterAdd) rely
// on to never change a value someone else holds.
#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
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

// Buffer::View: rows of one buffer as tensors of their own, without a copy;
// the parent lives while any view does, and a view of a view is a view of
// the parent.
TEST(BufferView, SharesTheParentsStorageAndKeepsItAlive) {
  Tensor whole = *Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, Shape({3, 2}));
  Buffer* parent = whole.buffer();
  Buffer* row1 = Buffer::View(parent, 2 * sizeof(float), 2 * sizeof(float));
  Tensor t1 = Tensor::FromBuffer(DType::kFloat32, Shape({1, 2}), row1);
  row1->Unref();
  EXPECT_EQ(row1->parent(), parent);
  EXPECT_EQ(t1.raw_data(), static_cast<const char*>(whole.raw_data()) + 2 * sizeof(float));
  EXPECT_FALSE(whole.RefCountIsOne());  // the view holds the parent
  EXPECT_TRUE(t1.RefCountIsOne());      // its own rows: nobody else sees them
  Buffer* nested = Buffer::View(row1, sizeof(float), sizeof(float));
  EXPECT_EQ(nested->parent(), parent);  // not row1: views never nest
  Tensor t2 = Tensor::FromBuffer(DType::kFloat32, Shape({1}), nested);
  nested->Unref();
  whole = Tensor();  // the views keep the storage
  t1 = Tensor();
  EXPECT_EQ(t2.data<float>()[0], 4.0f);
}

// CPU buffers come from a caching allocator (tbbmalloc): live tensors
// never share memory, whatever the order of allocation and free, and blocks
// freed on another thread are reusable.
TEST(TensorAllocation, RecycledBuffersAreNeverShared) {
  const int64_t sizes[] = {4096, 4100, 45000, 45000, 8192, 100000};
  std::vector<Tensor> live;
  auto fill = [](Tensor& t, float v) {
    float* p = t.mutable_data<float>();
    for (int64_t i = 0; i < t.num_elements(); ++i) p[i] = v;
  };
  auto check = [](const Tensor& t, float v) {
    const float* p = t.data<float>();
    for (int64_t i = 0; i < t.num_elements(); ++i)
      if (p[i] != v) return false;
    return true;
  };
  for (int round = 0; round < 4; ++round) {
    for (int k = 0; k < 24; ++k) {
      live.push_back(*Tensor::Empty(DType::kFloat32, Shape({sizes[k % 6]})));
      fill(live.back(), static_cast<float>(live.size()));
    }
    for (size_t i = 0; i < live.size(); ++i) ASSERT_TRUE(check(live[i], static_cast<float>(i + 1))) << i;
    // Free every other one, refill the survivors' indices.
    std::vector<Tensor> kept;
    for (size_t i = 0; i < live.size(); i += 2) kept.push_back(live[i]);
    live = std::move(kept);
    for (size_t i = 0; i < live.size(); ++i) fill(live[i], static_cast<float>(i + 1));
  }
  // Freed on another thread, then allocated here and there.
  std::thread([moved = std::move(live)]() mutable { moved.clear(); }).join();
  Tensor a = *Tensor::Empty(DType::kFloat32, Shape({45000}));
  Tensor b = *Tensor::Empty(DType::kFloat32, Shape({45000}));
  fill(a, 1.0f);
  fill(b, 2.0f);
  EXPECT_TRUE(check(a, 1.0f));
  EXPECT_TRUE(check(b, 2.0f));
  EXPECT_NE(a.raw_data(), b.raw_data());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.raw_data()) % 64, 0u);
}

}  // namespace
}  // namespace tdf
