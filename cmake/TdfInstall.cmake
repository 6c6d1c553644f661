# Install rules and package files for tdf (included at the end of the top-level
# CMakeLists.txt, so every target_link_libraries(tdf ...) is already known).
#
#   <prefix>/include/tdf/*.h
#   <prefix>/<libdir>/libtdf.a (or .so with BUILD_SHARED_LIBS)
#   <prefix>/<libdir>/cmake/tdf/{tdfConfig,tdfConfigVersion,tdfTargets}.cmake
#   <prefix>/<libdir>/pkgconfig/tdf.pc
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# A shared libtdf carries its ABI version in its name (libtdf.so.0.1: every
# 0.x minor may break it), and the installed CLI finds it without
# LD_LIBRARY_PATH through an RPATH relative to its own location.
set_target_properties(tdf PROPERTIES VERSION ${PROJECT_VERSION}
                                     SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
if(TARGET tdf_cli)
  set_target_properties(tdf_cli PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
endif()

install(TARGETS tdf EXPORT tdfTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/include/tdf
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")

set(TDF_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tdf)
install(EXPORT tdfTargets NAMESPACE tdf:: DESTINATION ${TDF_CMAKE_INSTALL_DIR})

# The dependencies a consumer must find. A static libtdf carries its private
# dependencies into the consumer's link line ($<LINK_ONLY:...> in
# tdfTargets.cmake), so they are listed too. Protobuf only once tdf links it.
get_target_property(_tdf_link_libraries tdf LINK_LIBRARIES)
set(TDF_USES_PROTOBUF OFF)
foreach(_lib IN LISTS _tdf_link_libraries)
  if(_lib MATCHES "^protobuf::" OR _lib MATCHES "Protobuf_LIBRAR")
    set(TDF_USES_PROTOBUF ON)
  endif()
endforeach()
if(_tdf_link_libraries MATCHES "protobuf")
  set(TDF_USES_PROTOBUF ON)
endif()

# The toolkit tdf was built against, as a hint for the consumer's
# find_dependency(CUDAToolkit) when nvcc is not on its PATH.
set(TDF_CUDA_TOOLKIT_ROOT "")
if(TDF_CUDA_ON)
  get_filename_component(TDF_CUDA_TOOLKIT_ROOT "${CUDAToolkit_BIN_DIR}" DIRECTORY)
endif()

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/tdfConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/tdfConfig.cmake
  INSTALL_DESTINATION ${TDF_CMAKE_INSTALL_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/tdfConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tdfConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/tdfConfigVersion.cmake
  DESTINATION ${TDF_CMAKE_INSTALL_DIR})

# pkg-config. The prefix is found from the .pc file's own location, so an
# install moved with `cmake --install --prefix` still works.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(TDF_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(TDF_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH _up "/root/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/root")
  string(REGEX REPLACE "/$" "" _up "${_up}")
  set(TDF_PC_PREFIX "\${pcfiledir}/${_up}")
  set(TDF_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(TDF_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(TDF_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
set(TDF_PC_PUBLIC_REQUIRES
    "absl_status absl_statusor absl_strings absl_synchronization absl_flat_hash_map absl_inlined_vector absl_span absl_time")
set(TDF_PC_PRIVATE_REQUIRES "tbb eigen3")
set(TDF_PC_PRIVATE_LIBS "-ltbbmalloc -pthread")
if(TDF_USES_PROTOBUF)
  string(APPEND TDF_PC_PRIVATE_REQUIRES " protobuf")
endif()
if(TDF_CUDA_ON)
  # No -lcublas: tdf dlopen()s cuBLAS (src/cuda/cublas_loader.h).
  string(APPEND TDF_PC_PRIVATE_LIBS " -L${CUDAToolkit_LIBRARY_DIR} -Wl,-rpath,${CUDAToolkit_LIBRARY_DIR} -lcudart")
  foreach(_dl ${CMAKE_DL_LIBS})
    string(APPEND TDF_PC_PRIVATE_LIBS " -l${_dl}")
  endforeach()
endif()
if(BUILD_SHARED_LIBS)
  set(TDF_PC_REQUIRES "${TDF_PC_PUBLIC_REQUIRES}")
  set(TDF_PC_REQUIRES_PRIVATE "${TDF_PC_PRIVATE_REQUIRES}")
  # The rpath: a program linked with `pkg-config --libs tdf` runs without
  # LD_LIBRARY_PATH, wherever the prefix is.
  set(TDF_PC_LIBS "-L\${libdir} -Wl,-rpath,\${libdir} -ltdf")
  set(TDF_PC_LIBS_PRIVATE "${TDF_PC_PRIVATE_LIBS}")
else()
  # A static library needs its private dependencies at every link, so plain
  # `pkg-config --libs tdf` (without --static) must already list them.
  set(TDF_PC_REQUIRES "${TDF_PC_PUBLIC_REQUIRES} ${TDF_PC_PRIVATE_REQUIRES}")
  set(TDF_PC_REQUIRES_PRIVATE "")
  set(TDF_PC_LIBS "-L\${libdir} -ltdf ${TDF_PC_PRIVATE_LIBS}")
  set(TDF_PC_LIBS_PRIVATE "")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/tdf.pc.in ${CMAKE_CURRENT_BINARY_DIR}/tdf.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tdf.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
