# The Maven artifact ai.accelerate:accelerate:VERSION in OUT: the jar (classes, the native libraries
# under ai/accelerate/native/linux-x86_64/, a manifest naming the module ai.accelerate), the POM, and
# the -sources and -javadoc jars. Run with -P; CLASSES: compiled classes; SOURCES: a |-list of source
# roots; NATIVES: a |-list of libraries (symlinks are copied as the files they point to).
string(REPLACE "|" ";" SOURCES "${SOURCES}")
string(REPLACE "|" ";" NATIVES "${NATIVES}")
set(base ${OUT}/accelerate-${VERSION})
set(stage ${OUT}/stage)
file(REMOVE_RECURSE ${stage} ${OUT}/javadoc)
file(COPY ${CLASSES}/ DESTINATION ${stage})
foreach(lib ${NATIVES})
  get_filename_component(name ${lib} NAME)
  configure_file(${lib} ${stage}/ai/accelerate/native/linux-x86_64/${name} COPYONLY)
  # The wrapper finds libaccelerate.so.0 beside it, not in the build tree it was linked in.
  if(name MATCHES "_(java|csharp)\\.so$")
    file(RPATH_SET FILE ${stage}/ai/accelerate/native/linux-x86_64/${name} NEW_RPATH "\$ORIGIN")
  endif()
endforeach()
file(WRITE ${OUT}/MANIFEST.MF "Automatic-Module-Name: ai.accelerate\nImplementation-Title: accelerate\nImplementation-Version: ${VERSION}\n")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed: ${ARGN}")
  endif()
endfunction()
run(${JAR} cfm ${base}.jar ${OUT}/MANIFEST.MF -C ${stage} .)
set(src_args)
foreach(root ${SOURCES})
  list(APPEND src_args -C ${root} .)
endforeach()
run(${JAR} cf ${base}-sources.jar ${src_args})
string(REPLACE ";" ":" sourcepath "${SOURCES}")
run(${JAVADOC} -quiet -Xdoclint:none -encoding UTF-8 -d ${OUT}/javadoc -sourcepath ${sourcepath}
    -subpackages ai.accelerate -windowtitle "accelerate ${VERSION}")
run(${JAR} cf ${base}-javadoc.jar -C ${OUT}/javadoc .)
configure_file(${POM_IN} ${base}.pom @ONLY)

# Maven's checksum files beside each file (hex digests), which its resolver checks for every
# artifact it fetches, also from a file:// repository (without them it warns, and fails under -C).
foreach(file ${base}.jar ${base}.pom ${base}-sources.jar ${base}-javadoc.jar)
  foreach(algorithm SHA1 MD5)
    string(TOLOWER ${algorithm} suffix)
    file(${algorithm} ${file} digest)
    file(WRITE ${file}.${suffix} "${digest}")
  endforeach()
endforeach()
