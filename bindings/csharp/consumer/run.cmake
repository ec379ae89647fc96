# The C# consumer of an installed tree (cmake -P): STEP=build unpacks STAGE's
# share/nuget/Accelerate.VERSION.nupkg into WORK and lays it out as a linux-x64 app (the assembly, and
# runtimes/linux-x64/native/* next to it), then compiles Program.cs against it with mcs; STEP=run runs
# it with mono (under LAUNCH with NPROC processes when given), LD_LIBRARY_PATH unset; STEP=missing
# runs it from a copy of the app without libaccelerate.so.0, which must fail naming that library.
# EXPECT: regular expressions the output must match.
set(app ${WORK}/app)
if(STEP STREQUAL "build")
  file(REMOVE_RECURSE ${WORK})
  file(MAKE_DIRECTORY ${WORK}/pkg ${app})
  execute_process(COMMAND ${UNZIP} -q ${STAGE}/share/nuget/Accelerate.${VERSION}.nupkg -d ${WORK}/pkg RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "unzip failed")
  endif()
  file(GLOB natives ${WORK}/pkg/runtimes/linux-x64/native/*)
  file(COPY ${WORK}/pkg/lib/net461/Accelerate.dll ${natives} DESTINATION ${app})
  execute_process(COMMAND ${MCS} -nologo -warnaserror+ -r:${app}/Accelerate.dll -out:${app}/Consumer.exe
                          ${CMAKE_CURRENT_LIST_DIR}/Program.cs RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "mcs failed")
  endif()
  return()
endif()
include(${CMAKE_CURRENT_LIST_DIR}/../../consumer_check.cmake)
if(STEP STREQUAL "missing")
  set(broken ${WORK}/broken)
  file(REMOVE_RECURSE ${broken})
  file(COPY ${app}/ DESTINATION ${broken})
  file(REMOVE ${broken}/libaccelerate.so.0)
  set(FAIL ON)
  acc_run_consumer(${MONO} ${broken}/Consumer.exe)
  return()
endif()
set(cmd ${MONO} ${app}/Consumer.exe)
if(NPROC)
  set(cmd ${LAUNCH} --num_processes ${NPROC} ${cmd})
endif()
acc_run_consumer(${cmd})
