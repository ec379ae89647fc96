# Fails when the Go module's committed SWIG output (internal/capi) differs from what generate.cmake
# makes of today's bindings/accelerate.i and swig/ (cmake -DSWIG=swig -DTMP=<folder> -P ...): run
# `cmake --build build --target go_generate` (or generate.cmake) and commit the result.
file(REMOVE_RECURSE ${TMP})
execute_process(COMMAND ${CMAKE_COMMAND} -DSWIG=${SWIG} -DOUT=${TMP} -P ${CMAKE_CURRENT_LIST_DIR}/generate.cmake
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "generate.cmake failed")
endif()
set(stale)
foreach(file capi.go capi_wrap.cxx capi_wrap.h swig/glue.hpp swig/err.hpp swig/callbacks.hpp swig/directors.hpp)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${TMP}/${file} ${CMAKE_CURRENT_LIST_DIR}/internal/capi/${file}
    RESULT_VARIABLE differ)
  if(NOT differ EQUAL 0)
    list(APPEND stale ${file})
  endif()
endforeach()
if(stale)
  message(FATAL_ERROR "bindings/go/internal/capi is stale (${stale}): regenerate with "
    "`cmake --build build --target go_generate` and commit it")
endif()
message(STATUS "bindings/go/internal/capi matches bindings/accelerate.i")
