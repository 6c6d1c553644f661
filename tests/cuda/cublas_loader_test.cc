// tdf dlopen()s cuBLAS instead of linking it (src/cuda/cublas_loader.h).
// Loading and resolving need no GPU, only the library, so unlike the other
// CUDA tests these run on every machine of a CUDA build.
#include "gtest/gtest.h"

#if TDF_WITH_CUDA

#include <dlfcn.h>

#include <string>
#include <vector>

#include "cuda/cublas_loader.h"
#include "gmock/gmock.h"

namespace tdf {
namespace cuda {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(CublasLoader, IsNotMappedUntilLoaded) {
  // The point of loading lazily: a process that never initialises a device
  // does not map cuBLAS. RTLD_NOLOAD only looks, it loads nothing. ctest runs
  // each test in its own process; in a whole-binary run an earlier test may
  // have loaded it already.
  if (void* h = dlopen(CublasLibraryName(), RTLD_NOW | RTLD_NOLOAD)) {
    dlclose(h);
    GTEST_SKIP() << "cuBLAS was loaded by an earlier test in this process";
  }
  ASSERT_TRUE(LoadCublas().ok()) << LoadCublas().status();
  void* h = dlopen(CublasLibraryName(), RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(h, nullptr) << "LoadCublas succeeded but " << CublasLibraryName() << " is not mapped";
  if (h != nullptr) dlclose(h);
}

TEST(CublasLoader, LoadsTheToolkitsCublasAndResolvesEveryFunction) {
  absl::StatusOr<const CublasFunctions*> loaded = LoadCublas();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_NE(*loaded, nullptr);
  // Once per process: the same table every time.
  absl::StatusOr<const CublasFunctions*> again = LoadCublas();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *loaded);
  // Resolving the same symbols from a fresh handle succeeds too.
  EXPECT_TRUE(ProbeCublasLibrary(CublasLibraryName()).ok());
}

TEST(CublasLoader, LibraryNameIsTheVersionedSoname) {
  EXPECT_THAT(std::string(CublasLibraryName()), StartsWith("libcublas.so."));
  EXPECT_NE(std::string(CublasLibraryName()), "libcublas.so.");
}

TEST(CublasLoader, ResolvesTheV2EntryPoints) {
  // <cublas_v2.h> maps these names to the _v2 symbols; the legacy ones take
  // no handle and must not be what the loader finds.
  EXPECT_EQ(CublasSymbolNames(),
            (std::vector<std::string>{"cublasCreate_v2", "cublasSetStream_v2", "cublasSgemm_v2", "cublasDgemm_v2"}));
}

TEST(CublasLoader, MissingLibraryIsAStatusNamingIt) {
  absl::Status s = ProbeCublasLibrary("libtdf_no_such_cublas.so.0");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("cuBLAS"), HasSubstr("dlopen(\"libtdf_no_such_cublas.so.0\")"),
                    HasSubstr("cannot open shared object file")));
}

TEST(CublasLoader, MissingSymbolIsAStatusNamingIt) {
  // libc is always loadable and has no cuBLAS symbols.
  absl::Status s = ProbeCublasLibrary("libc.so.6");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("symbol cublasCreate_v2 not found in libc.so.6"), HasSubstr("undefined symbol")));
}

}  // namespace
}  // namespace cuda
}  // namespace tdf

#else  // !TDF_WITH_CUDA

TEST(CublasLoader, NeedsACudaBuild) { GTEST_SKIP() << "built without CUDA: tdf has no cuBLAS to load"; }

#endif
