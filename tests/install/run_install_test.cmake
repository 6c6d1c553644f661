# Driven by ctest (see CMakeLists.txt here): cmake -DSTEP=... -P this file.
#   STEP=install       cmake --install the tdf build into WORK_DIR/prefix
#   STEP=find_package  configure, build and run consumer/ with find_package
#   STEP=pkg_config    compile and run consumer/main.cc with pkg-config flags
#   STEP=shared        build tdf as a shared library (library and CLI only),
#                      install it, and run the installed CLI and a pkg-config
#                      consumer without LD_LIBRARY_PATH
cmake_minimum_required(VERSION 3.25)

set(prefix ${WORK_DIR}/prefix)
if(NOT CONFIG)
  set(CONFIG Release)
endif()
set(expected_output "int64[] 42\nfloat32[2,2] [1, 2, 3, 4]\n")

function(run_checked what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n  ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

function(check_consumer_output exe)
  run_checked("running ${exe}" ${exe})
  if(NOT last_output STREQUAL expected_output)
    message(FATAL_ERROR "${exe} printed:\n${last_output}\nexpected:\n${expected_output}")
  endif()
  message(STATUS "${exe} printed the expected output:\n${last_output}")
endfunction()

set(sanitize_flags "")
if(SANITIZE)
  set(sanitize_flags "-fsanitize=${SANITIZE}")
endif()

if(STEP STREQUAL "install")
  file(REMOVE_RECURSE ${prefix})
  run_checked("cmake --install" ${CMAKE_COMMAND} --install ${TDF_BINARY_DIR} --prefix ${prefix} --config ${CONFIG})
  foreach(pattern include/tdf/tensor.h include/tdf/graph.h lib*/libtdf.* lib*/cmake/tdf/tdfConfig.cmake
                  lib*/cmake/tdf/tdfConfigVersion.cmake lib*/cmake/tdf/tdfTargets.cmake lib*/pkgconfig/tdf.pc)
    file(GLOB_RECURSE found ${prefix}/${pattern})
    if(NOT found)
      message(FATAL_ERROR "cmake --install left no ${pattern} under ${prefix}")
    endif()
  endforeach()
  # Nothing internal may leak into the installed headers.
  file(GLOB leaked ${prefix}/include/tdf/*_internal.h ${prefix}/include/cuda)
  if(leaked)
    message(FATAL_ERROR "internal files installed: ${leaked}")
  endif()
  message(STATUS "installed tdf into ${prefix}")

elseif(STEP STREQUAL "find_package")
  set(build ${WORK_DIR}/find_package)
  file(REMOVE_RECURSE ${build})
  set(generator_args "")
  if(GENERATOR)
    set(generator_args -G ${GENERATOR})
  endif()
  run_checked("configuring the consumer" ${CMAKE_COMMAND} ${generator_args} -S ${CONSUMER_SOURCE_DIR} -B ${build}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_BUILD_TYPE=${CONFIG}
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER} "-DCMAKE_CXX_FLAGS=${sanitize_flags}"
    "-DCMAKE_EXE_LINKER_FLAGS=${sanitize_flags}")
  message(STATUS "${last_output}")
  run_checked("building the consumer" ${CMAKE_COMMAND} --build ${build} --config ${CONFIG})
  file(GLOB_RECURSE exe LIST_DIRECTORIES false ${build}/consumer ${build}/*/consumer)
  if(NOT exe)
    message(FATAL_ERROR "no consumer executable under ${build}")
  endif()
  list(GET exe 0 exe)
  check_consumer_output(${exe})

elseif(STEP STREQUAL "pkg_config")
  find_program(PKG_CONFIG NAMES pkg-config pkgconf)
  if(NOT PKG_CONFIG)
    message(STATUS "SKIPPED: pkg-config is not installed")
    return()
  endif()
  file(GLOB_RECURSE pc_file ${prefix}/tdf.pc)
  get_filename_component(pc_dir "${pc_file}" DIRECTORY)
  set(ENV{PKG_CONFIG_PATH} "${pc_dir}")
  run_checked("pkg-config" ${PKG_CONFIG} --cflags --libs tdf)
  string(STRIP "${last_output}" pc_flags)
  message(STATUS "pkg-config --cflags --libs tdf: ${pc_flags}")
  separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
  separate_arguments(sanitize_args UNIX_COMMAND "${sanitize_flags}")
  set(exe ${WORK_DIR}/pkg_config/consumer)
  file(MAKE_DIRECTORY ${WORK_DIR}/pkg_config)
  run_checked("compiling the consumer with pkg-config flags"
    ${CXX_COMPILER} -std=c++17 ${sanitize_args} ${CONSUMER_SOURCE_DIR}/main.cc -o ${exe} ${pc_flags})
  check_consumer_output(${exe})

elseif(STEP STREQUAL "shared")
  if(SANITIZE)
    # A shared libtdf under a sanitizer needs the runtime preloaded: not
    # what this step checks (the release preset runs it).
    message(STATUS "SKIPPED: the shared-library step runs without sanitizers")
    return()
  endif()
  find_program(PKG_CONFIG NAMES pkg-config pkgconf)
  set(build ${WORK_DIR}/shared/build)
  set(shared_prefix ${WORK_DIR}/shared/prefix)
  file(REMOVE_RECURSE ${WORK_DIR}/shared)
  set(generator_args "")
  if(GENERATOR)
    set(generator_args -G ${GENERATOR})
  endif()
  run_checked("configuring a shared libtdf" ${CMAKE_COMMAND} ${generator_args} -S ${SOURCE_DIR} -B ${build}
    # Build type None: no optimisation, the quickest compile of the library
    # this step links against (what it checks is linkage, not speed).
    -DBUILD_SHARED_LIBS=ON -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
    -DTDF_BUILD_TESTS=OFF -DTDF_BUILD_BENCHMARKS=OFF -DTDF_BUILD_EXAMPLES=OFF -DTDF_ENABLE_CUDA=OFF
    -DTDF_ENABLE_MPI=OFF)
  cmake_host_system_information(RESULT cores QUERY NUMBER_OF_LOGICAL_CORES)
  run_checked("building a shared libtdf and the CLI" ${CMAKE_COMMAND} --build ${build} --target tdf tdf_cli
    --parallel ${cores})
  run_checked("installing them" ${CMAKE_COMMAND} --install ${build} --prefix ${shared_prefix})
  # The versioned SONAME: libtdf.so -> libtdf.so.0.1 -> libtdf.so.0.1.0.
  file(GLOB_RECURSE soname_file ${shared_prefix}/lib*/libtdf.so.*.*)
  if(NOT soname_file)
    message(FATAL_ERROR "no versioned libtdf.so.* under ${shared_prefix}")
  endif()
  unset(ENV{LD_LIBRARY_PATH})
  run_checked("the installed CLI" ${shared_prefix}/bin/tdf run ${SOURCE_DIR}/examples/graphs/fib.pbtxt --feed n=10
    --fetch result)
  if(NOT last_output MATCHES "result = 89 ")
    message(FATAL_ERROR "the installed CLI printed:\n${last_output}")
  endif()
  message(STATUS "the installed CLI runs without LD_LIBRARY_PATH: ${last_output}")
  if(NOT PKG_CONFIG)
    message(STATUS "pkg-config is not installed: the consumer part is skipped")
    return()
  endif()
  file(GLOB_RECURSE pc_file ${shared_prefix}/tdf.pc)
  get_filename_component(pc_dir "${pc_file}" DIRECTORY)
  set(ENV{PKG_CONFIG_PATH} "${pc_dir}")
  run_checked("pkg-config" ${PKG_CONFIG} --cflags --libs tdf)
  string(STRIP "${last_output}" pc_flags)
  separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
  set(exe ${WORK_DIR}/shared/consumer)
  run_checked("compiling the consumer against the shared libtdf"
    ${CXX_COMPILER} -std=c++17 ${CONSUMER_SOURCE_DIR}/main.cc -o ${exe} ${pc_flags})
  check_consumer_output(${exe})

else()
  message(FATAL_ERROR "unknown STEP '${STEP}'")
endif()
