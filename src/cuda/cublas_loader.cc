#include "cuda/cublas_loader.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"
#include "cuda/cuda_device.h"
#include "tdf/status.h"

namespace tdf {
namespace cuda {
namespace {

#define TDF_CUBLAS_STR_(x) #x
#define TDF_CUBLAS_STR(x) TDF_CUBLAS_STR_(x)

// The SONAME of the cuBLAS the headers belong to: its ABI is what the
// function pointer types in CublasFunctions describe.
constexpr char kLibrary[] = "libcublas.so." TDF_CUBLAS_STR(CUBLAS_VER_MAJOR);

std::string DlError() {
  const char* text = dlerror();
  return text != nullptr ? text : "(no dlerror text)";
}

absl::Status LoadError(std::string what) {
  return absl::FailedPreconditionError(
      absl::StrCat("cannot load cuBLAS (needed by the CUDA backend): ", what));
}

// The usual search (LD_LIBRARY_PATH, RUNPATH, ld.so.cache) first; then the
// toolkit tdf was built with, which may be in none of them.
absl::StatusOr<void*> Open(const std::string& library) {
  (void)dlerror();
  // RTLD_NOW: an unresolvable dependency fails here, not at the first call.
  if (void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  std::string why = DlError();
#ifdef TDF_CUDA_LIBRARY_DIR
  if (library.find('/') == std::string::npos) {
    const std::string path = absl::StrCat(TDF_CUDA_LIBRARY_DIR, "/", library);
    if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    absl::StrAppend(&why, "; then ", DlError());
  }
#endif
  return LoadError(absl::StrCat("dlopen(\"", library, "\") failed: ", why));
}

template <typename Fn>
absl::Status Symbol(void* handle, const std::string& library, const char* name, Fn* fn) {
  (void)dlerror();
  void* p = dlsym(handle, name);
  if (p == nullptr) return LoadError(absl::StrCat("symbol ", name, " not found in ", library, ": ", DlError()));
  *fn = reinterpret_cast<Fn>(p);
  return absl::OkStatus();
}

absl::Status Resolve(void* handle, const std::string& library, CublasFunctions* f) {
#define TDF_CUBLAS_RESOLVE(field, function) \
  TDF_RETURN_IF_ERROR(Symbol(handle, library, TDF_CUBLAS_STR(function), &f->field));
  TDF_CUBLAS_FUNCTIONS(TDF_CUBLAS_RESOLVE)
#undef TDF_CUBLAS_RESOLVE
  return absl::OkStatus();
}

}  // namespace

const char* CublasLibraryName() { return kLibrary; }

std::vector<std::string> CublasSymbolNames() {
  return {
#define TDF_CUBLAS_NAME(field, function) TDF_CUBLAS_STR(function),
      TDF_CUBLAS_FUNCTIONS(TDF_CUBLAS_NAME)
#undef TDF_CUBLAS_NAME
  };
}

absl::StatusOr<const CublasFunctions*> LoadCublas() {
  // Never closed: cuBLAS handles live as long as their CudaDevice, i.e. the
  // process. Heap-allocated so no destructor runs at exit.
  static const absl::StatusOr<const CublasFunctions*>* const loaded =
      new absl::StatusOr<const CublasFunctions*>([]() -> absl::StatusOr<const CublasFunctions*> {
        TDF_ASSIGN_OR_RETURN(void* handle, Open(kLibrary));
        auto* functions = new CublasFunctions;
        absl::Status s = Resolve(handle, kLibrary, functions);
        if (!s.ok()) {
          delete functions;
          (void)dlclose(handle);
          return s;
        }
        return functions;
      }());
  return *loaded;
}

absl::Status ProbeCublasLibrary(const std::string& library) {
  TDF_ASSIGN_OR_RETURN(void* handle, Open(library));
  CublasFunctions functions;
  absl::Status s = Resolve(handle, library, &functions);
  (void)dlclose(handle);
  return s;
}

}  // namespace cuda
}  // namespace tdf
