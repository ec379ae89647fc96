# Shared by the consumers of an installed tree (bindings/*/consumer/run.cmake): runs a command with
# LD_LIBRARY_PATH unset, prints its output, and fails unless it exits 0 (or, with FAIL set, fails)
# and its output matches each regular expression of EXPECT (separated by &&).
function(acc_run_consumer)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(FAIL AND rc EQUAL 0)
    message(FATAL_ERROR "the consumer should have failed")
  elseif(NOT FAIL AND NOT rc EQUAL 0)
    message(FATAL_ERROR "the consumer failed (${rc})")
  endif()
  string(REPLACE "&&" ";" expects "${EXPECT}")
  foreach(expect IN LISTS expects)
    if(NOT "${out}${err}" MATCHES "${expect}")
      message(FATAL_ERROR "the consumer's output does not match: ${expect}")
    endif()
  endforeach()
endfunction()
