# The C# consumer of an installed tree (cmake -P). STEP=build, for Mono: unpacks STAGE's
# share/nuget/Accelerate.VERSION.nupkg into WORK and lays it out as a linux-x64 app (the assembly, and
# runtimes/linux-x64/native/* next to it), then compiles Program.cs against it with mcs; a netstandard2.0
# assembly also needs Mono's netstandard.dll facade (NETSTANDARD), copied beside it as MSBuild does for
# .NET Framework apps. With DOTNET instead: a project in WORK, for the SDK's own runtime, references the
# package Accelerate from share/nuget as a local feed and is built with `dotnet build` into WORK/app.
# STEP=run runs it with mono or dotnet (under LAUNCH with NPROC processes when given), LD_LIBRARY_PATH
# unset; STEP=missing runs it from a copy of the app without libaccelerate.so.0, which must fail naming
# that library. EXPECT: regular expressions the output must match.
set(app ${WORK}/app)
if(DOTNET)
  set(exe Consumer.dll)
  set(native runtimes/linux-x64/native)  # where a .NET build puts the package's natives
  set(runner ${DOTNET})
else()
  set(exe Consumer.exe)
  set(native .)
  set(runner ${MONO})
endif()
if(STEP STREQUAL "build" AND DOTNET)
  include(${CMAKE_CURRENT_LIST_DIR}/../dotnet.cmake)
  file(REMOVE_RECURSE ${WORK})
  file(MAKE_DIRECTORY ${WORK})
  execute_process(COMMAND ${DOTNET} --version WORKING_DIRECTORY ${WORK} OUTPUT_VARIABLE sdk RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT sdk MATCHES "^([0-9]+)\\.([0-9]+)")
    message(FATAL_ERROR "dotnet --version failed")
  endif()
  # The SDK's own runtime: netcoreappX.Y before .NET 5, netX.Y since.
  if(CMAKE_MATCH_1 LESS 5)
    set(framework netcoreapp${CMAKE_MATCH_1}.${CMAKE_MATCH_2})
  else()
    set(framework net${CMAKE_MATCH_1}.${CMAKE_MATCH_2})
  endif()
  file(WRITE ${WORK}/nuget.config "<configuration><packageSources><clear />
  <add key=\"accelerate\" value=\"${STAGE}/share/nuget\" /></packageSources></configuration>\n")
  # CopyLocalLockFileAssemblies: the package's files in the output folder (2.x SDKs leave them in the cache).
  file(WRITE ${WORK}/Consumer.csproj "<Project Sdk=\"Microsoft.NET.Sdk\">
  <PropertyGroup>
    <OutputType>Exe</OutputType>
    <TargetFramework>${framework}</TargetFramework>
    <TreatWarningsAsErrors>true</TreatWarningsAsErrors>
    <EnableDefaultCompileItems>false</EnableDefaultCompileItems>
    <CopyLocalLockFileAssemblies>true</CopyLocalLockFileAssemblies>
  </PropertyGroup>
  <ItemGroup>
    <Compile Include=\"${CMAKE_CURRENT_LIST_DIR}/Program.cs\" />
    <PackageReference Include=\"Accelerate\" Version=\"${VERSION}\" />
  </ItemGroup>
</Project>\n")
  acc_dotnet(${WORK}/home build ${WORK}/Consumer.csproj -c Release -o ${app})
  # As a deployed app: the development runtimeconfig would let the runtime read the NuGet cache too.
  file(REMOVE ${app}/Consumer.runtimeconfig.dev.json)
  return()
elseif(STEP STREQUAL "build")
  file(REMOVE_RECURSE ${WORK})
  file(MAKE_DIRECTORY ${WORK}/pkg ${app})
  execute_process(COMMAND ${UNZIP} -q ${STAGE}/share/nuget/Accelerate.${VERSION}.nupkg -d ${WORK}/pkg RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "unzip failed")
  endif()
  file(GLOB natives ${WORK}/pkg/runtimes/linux-x64/native/*)
  file(GLOB assembly ${WORK}/pkg/lib/*/Accelerate.dll)  # lib/net461 (mcs) or lib/netstandard2.0 (dotnet pack)
  set(refs -r:${assembly})
  if(assembly MATCHES "/netstandard")
    if(NOT EXISTS "${NETSTANDARD}")
      message(FATAL_ERROR "Mono's netstandard.dll facade is needed (NETSTANDARD)")
    endif()
    list(APPEND refs -r:${NETSTANDARD})
    list(APPEND natives ${NETSTANDARD})
  endif()
  file(COPY ${assembly} ${natives} DESTINATION ${app})
  execute_process(COMMAND ${MCS} -nologo -warnaserror+ ${refs} -out:${app}/Consumer.exe
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
  file(REMOVE ${broken}/${native}/libaccelerate.so.0)
  if(DOTNET)
    # The .NET host refuses to start an app missing a file its deps.json lists: drop that entry too.
    file(READ ${broken}/Consumer.deps.json deps)
    string(REGEX REPLACE "\"${native}/libaccelerate\\.so\\.0\": {[^}]*},?[ \n\r]*" "" deps "${deps}")
    file(WRITE ${broken}/Consumer.deps.json "${deps}")
  endif()
  set(FAIL ON)
  acc_run_consumer(${runner} ${broken}/${exe})
  return()
endif()
set(cmd ${runner} ${app}/${exe})
if(NPROC)
  set(cmd ${LAUNCH} --num_processes ${NPROC} ${cmd})
endif()
acc_run_consumer(${cmd})
