# Runs one MPI test under AddressSanitizer (tests/CMakeLists.txt,
# tdf_add_mpi_test): the command in MPI_COMMAND, its arguments separated by
# "|". Run again, once, when LeakSanitizer itself crashed while every test
# passed: LSan's stop-the-world tracer can fault at exit in a rank with many
# threads (Open MPI's progress threads, oneTBB's workers) on oversubscribed
# cores ("Tracer caught signal 11 ... LeakSanitizer has encountered a fatal
# error"). That is the sanitizer failing, not the test: a leak report, an
# ASan error or a failed test is never retried.
string(REPLACE "|" ";" command "${MPI_COMMAND}")
foreach(attempt 1 2)
  execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  message("${out}")
  if(rc EQUAL 0)
    return()
  endif()
  if(NOT out MATCHES "LeakSanitizer has encountered a fatal error" OR out MATCHES "FAILED" OR
     out MATCHES "ERROR: (LeakSanitizer: detected|AddressSanitizer)" OR out MATCHES "runtime error:")
    break()
  endif()
  message("run_mpi_test: LeakSanitizer's own tracer crashed and no test failed: running once more")
endforeach()
message(FATAL_ERROR "exit status ${rc}")
