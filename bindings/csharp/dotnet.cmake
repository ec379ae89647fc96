# acc_dotnet(HOME ARGS...): runs the .NET SDK's DOTNET with ARGS (a build or pack) from a -P script, and
# fails the script if it fails. Its first-run files and NuGet package cache go under HOME: nothing lands
# in the user's home, and a package rebuilt under the same version is never read from an older cache.
# No build servers are left behind (they would keep CTest's output pipes open).
function(acc_dotnet home)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
                          DOTNET_NOLOGO=1 DOTNET_CLI_HOME=${home} NUGET_PACKAGES=${home}/packages
                          ${DOTNET} ${ARGN} -nologo -nodeReuse:false -p:UseSharedCompilation=false
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "dotnet ${ARGN} failed")
  endif()
endfunction()
