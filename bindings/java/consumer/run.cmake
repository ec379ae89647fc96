# The Java consumer of an installed tree (cmake -P): STEP=build copies this folder to WORK and builds
# it with Maven offline against STAGE's share/maven-repo (a file:// repository; plugins from Debian's
# /usr/share/maven-repo); STEP=run runs it (under LAUNCH with NPROC processes when given), with
# nothing but the artifact on the class path: no -Djava.library.path, no LD_LIBRARY_PATH; STEP=native-path
# runs it with -Dai.accelerate.native.path=NATIVE (FAIL: it must fail). EXPECT: regular expressions
# the output must match (separated by &&).
if(STEP STREQUAL "build")
  file(REMOVE_RECURSE ${WORK})
  file(COPY ${CMAKE_CURRENT_LIST_DIR}/pom.xml ${CMAKE_CURRENT_LIST_DIR}/settings.xml ${CMAKE_CURRENT_LIST_DIR}/src
       DESTINATION ${WORK})
  execute_process(COMMAND ${MVN} -o -q -B -Daether.offline.protocols=file -s settings.xml
                          -Dmaven.repo.local=${WORK}/m2 -Daccelerate.repo=file://${STAGE}/share/maven-repo
                          -Daccelerate.version=${VERSION} compile
    WORKING_DIRECTORY ${WORK} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "mvn failed")
  endif()
  return()
endif()
set(cp ${WORK}/target/classes:${WORK}/m2/ai/accelerate/accelerate/${VERSION}/accelerate-${VERSION}.jar)
set(cmd ${JAVA} -cp ${cp} consumer.Main)
if(STEP STREQUAL "native-path")  # the libraries from NATIVE instead of the jar
  set(cmd ${JAVA} -Dai.accelerate.native.path=${NATIVE} -cp ${cp} consumer.Main)
endif()
if(NPROC)
  set(cmd ${LAUNCH} --num_processes ${NPROC} ${cmd})
endif()
include(${CMAKE_CURRENT_LIST_DIR}/../../consumer_check.cmake)
acc_run_consumer(${cmd})
