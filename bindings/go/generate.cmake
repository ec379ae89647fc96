# Regenerates SWIG's Go output for bindings/accelerate.i (cmake -DSWIG=swig -DOUT=<folder> -P
# generate.cmake) into OUT, by default bindings/go, where it is committed as a pair made by one SWIG
# run: the Go side, internal/capi/capi.go, which is the module's package and needs only a C compiler
# (cgo), and the C++ side, wrapper/capi_wrap.cxx and capi_wrap.h, which CMake compiles into
# libaccelerate_go. Users of the module need neither SWIG nor a C++ compiler.
# SWIG runs from bindings/ on the relative path accelerate.i, because the names it gives the cgo
# symbols hash that path: any checkout, any output folder gives the same files.
get_filename_component(bindings ${CMAKE_CURRENT_LIST_DIR}/.. ABSOLUTE)
if(NOT SWIG)
  set(SWIG swig)
endif()
if(NOT OUT)
  set(OUT ${CMAKE_CURRENT_LIST_DIR})
endif()
file(MAKE_DIRECTORY ${OUT}/internal/capi ${OUT}/wrapper)
execute_process(COMMAND ${SWIG} -go -cgo -intgosize 64 -module capi -c++ -I. -I../capi/include
                        -o ${OUT}/wrapper/capi_wrap.cxx -outdir ${OUT}/internal/capi accelerate.i
  WORKING_DIRECTORY ${bindings} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "swig failed")
endif()
