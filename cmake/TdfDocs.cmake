# The API reference: Doxygen over the public headers (include/tdf/), as the
# target `docs` (HTML in build/<preset>/docs/html/index.html). Only when
# Doxygen is found (Debian: doxygen); the build never needs it otherwise.
# CMake writes the Doxyfile (build/<preset>/docs/Doxyfile.docs) from the
# DOXYGEN_* settings below. Doxygen's warnings (undocumented public API
# among them) go to build/<preset>/docs/doxygen_warnings.txt, which the
# test Docs.ApiReferenceHasNoWarnings requires to be empty.
find_package(Doxygen 1.9 QUIET)
if(NOT DOXYGEN_FOUND)
  message(STATUS "tdf: Doxygen not found; no `docs` target (API reference)")
  return()
endif()

set(DOXYGEN_PROJECT_NAME "tdf")
set(DOXYGEN_PROJECT_NUMBER ${PROJECT_VERSION})
set(DOXYGEN_PROJECT_BRIEF "A tagged-token dataflow runtime: recursion in static graphs, autodiff, oneTBB")
set(DOXYGEN_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/docs)
set(DOXYGEN_GENERATE_HTML YES)
set(DOXYGEN_GENERATE_LATEX NO)
# The headers' own words: a file's \file block, then each declaration's
# /// comment (its first sentence is the brief).
set(DOXYGEN_JAVADOC_AUTOBRIEF YES)
set(DOXYGEN_EXTRACT_ALL NO)
set(DOXYGEN_EXTRACT_STATIC YES)
set(DOXYGEN_HIDE_UNDOC_MEMBERS NO)
set(DOXYGEN_SORT_MEMBER_DOCS NO)  # declaration order, as the headers tell it
# A member group's comment (\name ... @{ ... @}) documents each member in it
# that has none of its own: families of ops, accessors, constructors.
set(DOXYGEN_DISTRIBUTE_GROUP_DOC YES)
set(DOXYGEN_FULL_PATH_NAMES YES)
set(DOXYGEN_STRIP_FROM_PATH ${CMAKE_SOURCE_DIR}/include)
set(DOXYGEN_STRIP_FROM_INC_PATH ${CMAKE_SOURCE_DIR}/include)
# Internals the headers must show the compiler but not the reader.
set(DOXYGEN_EXCLUDE_SYMBOLS "*_internal" "*_internal::*" "tdf::runtime" "tdf::runtime::*" "TDF_*_H_"
                            "TDF_CONCAT_*" "TDF_ASSIGN_OR_RETURN_IMPL_" "TDF_BUILDER_LITERAL_OPERATOR")
set(DOXYGEN_PREDEFINED "ABSL_GUARDED_BY(x)=" "ABSL_SCOPED_LOCKABLE=" "ABSL_EXCLUSIVE_LOCK_FUNCTION(x)="
                       "ABSL_UNLOCK_FUNCTION(x)=" "ABSL_MUST_USE_RESULT=")
set(DOXYGEN_MACRO_EXPANSION YES)
set(DOXYGEN_WARN_IF_UNDOCUMENTED YES)
set(DOXYGEN_WARN_NO_PARAMDOC NO)
set(DOXYGEN_WARN_LOGFILE ${CMAKE_BINARY_DIR}/docs/doxygen_warnings.txt)
set(DOXYGEN_QUIET YES)
set(DOXYGEN_USE_MDFILE_AS_MAINPAGE ${CMAKE_SOURCE_DIR}/docs/api.md)

doxygen_add_docs(docs ${CMAKE_SOURCE_DIR}/include/tdf ${CMAKE_SOURCE_DIR}/docs/api.md
                 COMMENT "API reference (Doxygen) in ${CMAKE_BINARY_DIR}/docs/html")

if(TDF_BUILD_TESTS)
  # Builds the reference and fails on any Doxygen warning: an undocumented
  # public class or function, a broken \ref, a malformed command.
  add_test(NAME Docs.ApiReferenceHasNoWarnings
           COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR}
                   -DWARNINGS=${CMAKE_BINARY_DIR}/docs/doxygen_warnings.txt
                   -P ${CMAKE_SOURCE_DIR}/cmake/check_docs.cmake)
  set_tests_properties(Docs.ApiReferenceHasNoWarnings PROPERTIES TIMEOUT 300)
endif()
