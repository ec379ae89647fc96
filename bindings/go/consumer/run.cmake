# The Go consumer of an installed tree (cmake -P): STEP=build makes a module in WORK that requires
# github.com/accelerate-cpp/accelerate/go, replaced by STAGE's share/accelerate/go, and builds it
# with the installed accelerate-go.pc (PKG_CONFIG_PATH, offline), with neither SWIG nor a C++
# compiler (CXX=/bin/false: any C++ compilation or link would fail; cgo's C compiler is CC);
# STEP=run runs the program (under LAUNCH with NPROC processes when given), LD_LIBRARY_PATH unset. EXPECT: regular
# expressions the output must match.
set(env ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${STAGE}/${LIBDIR}/pkgconfig GOFLAGS=-mod=mod GOPROXY=off
  CGO_ENABLED=1 CC=${CC} GOTOOLCHAIN=local GOCACHE=${WORK}/go-cache GOPATH=${WORK}/gopath)
if(STEP STREQUAL "build")
  file(REMOVE_RECURSE ${WORK})
  file(COPY ${CMAKE_CURRENT_LIST_DIR}/main.go DESTINATION ${WORK})
  file(WRITE ${WORK}/go.mod "module example.com/consumer\n\ngo 1.19\n\n"
    "require github.com/accelerate-cpp/accelerate/go v${VERSION}\n\n"
    "replace github.com/accelerate-cpp/accelerate/go => ${STAGE}/share/accelerate/go\n")
  execute_process(COMMAND ${env} CXX=/bin/false ${GO} build -o consumer . WORKING_DIRECTORY ${WORK} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "go build failed")
  endif()
  return()
endif()
include(${CMAKE_CURRENT_LIST_DIR}/../../consumer_check.cmake)
set(cmd ${WORK}/consumer)
if(NPROC)
  set(cmd ${LAUNCH} --num_processes ${NPROC} ${cmd})
endif()
acc_run_consumer(${cmd})
