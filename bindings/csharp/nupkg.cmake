# Accelerate.VERSION.nupkg (OUT): a NuGet package is a zip holding the .nuspec, the assembly under
# lib/<framework>/ and native libraries under runtimes/<rid>/native/. Run with -P; NATIVES: a |-list
# (symlinks are copied as the files they point to). With DOTNET: `dotnet pack` of CSPROJ (netstandard2.0)
# over the build folder BUILD_DIR, taking the natives staged here; otherwise a zip (ZIP) of Mono's
# net461 build (DLL, XMLDOC) and NUSPEC_IN.
string(REPLACE "|" ";" NATIVES "${NATIVES}")
get_filename_component(dir ${OUT} DIRECTORY)
set(stage ${dir}/stage)
set(native ${stage}/runtimes/linux-x64/native)
file(REMOVE_RECURSE ${stage})
file(REMOVE ${OUT})
foreach(lib ${NATIVES})
  get_filename_component(name ${lib} NAME)
  configure_file(${lib} ${native}/${name} COPYONLY)
  # The wrapper finds libaccelerate.so.0 beside it, not in the build tree it was linked in.
  if(name MATCHES "_(java|csharp)\\.so$")
    file(RPATH_SET FILE ${native}/${name} NEW_RPATH "\$ORIGIN")
  endif()
endforeach()
if(DOTNET)
  include(${CMAKE_CURRENT_LIST_DIR}/dotnet.cmake)
  acc_dotnet(${dir}/dotnet pack ${CSPROJ} -c Release -p:AccelerateBuildDir=${BUILD_DIR}
             -p:AccelerateOut=${dir}/dotnet/ -p:AccelerateNativeDir=${native} -p:PackageOutputPath=${dir}/)
  if(NOT EXISTS ${OUT})
    message(FATAL_ERROR "dotnet pack made no ${OUT} (is Version.props's version ${VERSION}?)")
  endif()
  return()
endif()
configure_file(${NUSPEC_IN} ${stage}/Accelerate.nuspec @ONLY)
configure_file(${DLL} ${stage}/lib/net461/Accelerate.dll COPYONLY)
configure_file(${XMLDOC} ${stage}/lib/net461/Accelerate.xml COPYONLY)
file(WRITE "${stage}/[Content_Types].xml" [=[<?xml version="1.0" encoding="utf-8"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="nuspec" ContentType="application/octet" /><Default Extension="dll" ContentType="application/octet" /><Default Extension="xml" ContentType="application/octet" /><Default Extension="so" ContentType="application/octet" /><Default Extension="0" ContentType="application/octet" /></Types>
]=])
execute_process(COMMAND ${ZIP} -q -r -X ${OUT} . WORKING_DIRECTORY ${stage} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "zip failed")
endif()
