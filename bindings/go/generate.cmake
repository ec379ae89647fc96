# Regenerates the Go module's SWIG output (cmake -DSWIG=swig -DOUT=<folder> -P generate.cmake): SWIG's
# Go wrapper of bindings/accelerate.i (capi.go, capi_wrap.cxx, capi_wrap.h) and copies of the C++ glue
# it includes (swig/*.hpp) into OUT, by default the module's internal/capi, where they are committed:
# users of the module then need only a C++ compiler, pkg-config and the installed library, no SWIG.
# SWIG runs from bindings/ on the relative path accelerate.i, because the names it gives the cgo
# symbols hash that path: any checkout, any output folder gives the same files.
get_filename_component(bindings ${CMAKE_CURRENT_LIST_DIR}/.. ABSOLUTE)
if(NOT SWIG)
  set(SWIG swig)
endif()
if(NOT OUT)
  set(OUT ${CMAKE_CURRENT_LIST_DIR}/internal/capi)
endif()
file(MAKE_DIRECTORY ${OUT}/swig)
execute_process(COMMAND ${SWIG} -go -cgo -intgosize 64 -module capi -c++ -I. -I../capi/include
                        -o ${OUT}/capi_wrap.cxx -outdir ${OUT} accelerate.i
  WORKING_DIRECTORY ${bindings} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "swig failed")
endif()
foreach(header glue.hpp err.hpp callbacks.hpp directors.hpp)
  configure_file(${bindings}/swig/${header} ${OUT}/swig/${header} COPYONLY)
endforeach()
