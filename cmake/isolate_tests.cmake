# acc_isolate_tests(): call at the end of every CMakeLists.txt that adds tests. Each test of that
# directory that did not choose its own HF_HOME gets an empty one, so that no test reads (or writes)
# the Accelerate config file of the user running it. (CMake 3.25 cannot set properties of tests in
# another directory, hence one call per directory.)
function(acc_isolate_tests)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(t ${tests})
    get_test_property(${t} ENVIRONMENT env)
    if(NOT "${env}" MATCHES "HF_HOME=")
      set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT "HF_HOME=${PROJECT_BINARY_DIR}/hf_home_empty")
    endif()
  endforeach()
endfunction()
