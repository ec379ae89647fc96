# Fails when the committed SWIG output (internal/capi/capi.go and wrapper/) differs from what
# generate.cmake makes of today's bindings/accelerate.i and swig/ (cmake -DSWIG=swig -DTMP=<folder>
# -P ...): run `cmake --build build --target go_generate` (or generate.cmake) and commit the result.
file(REMOVE_RECURSE ${TMP})
execute_process(COMMAND ${CMAKE_COMMAND} -DSWIG=${SWIG} -DOUT=${TMP} -P ${CMAKE_CURRENT_LIST_DIR}/generate.cmake
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "generate.cmake failed")
endif()
# Another SWIG writes other code for the same interface: only the version that made the committed
# output can tell whether it is stale.
file(STRINGS ${TMP}/internal/capi/capi.go made_here REGEX "^ \\* Version " LIMIT_COUNT 1)
file(STRINGS ${CMAKE_CURRENT_LIST_DIR}/internal/capi/capi.go committed REGEX "^ \\* Version " LIMIT_COUNT 1)
if(NOT made_here STREQUAL committed)
  message(STATUS "skipped: this SWIG (${made_here}) is not the one that made the committed output (${committed})")
  return()
endif()
set(stale)
foreach(file internal/capi/capi.go wrapper/capi_wrap.cxx wrapper/capi_wrap.h)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${TMP}/${file} ${CMAKE_CURRENT_LIST_DIR}/${file}
    RESULT_VARIABLE differ)
  if(NOT differ EQUAL 0)
    list(APPEND stale ${file})
  endif()
endforeach()
if(stale)
  message(FATAL_ERROR "bindings/go's SWIG output is stale (${stale}): regenerate with "
    "`cmake --build build --target go_generate` and commit it")
endif()
message(STATUS "bindings/go's SWIG output matches bindings/accelerate.i")
