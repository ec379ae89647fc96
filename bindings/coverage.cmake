# Fails unless every function accelerate.h declares is called by the SWIG interface (accelerate.i and
# swig/*, /* */ and // comments left out) or is on accelerate.i's "Deliberately not wrapped" list,
# with a reason.
# The three languages share that interface, so a function it calls is in all of them.
foreach(v HEADER INTERFACE SWIG_DIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "coverage.cmake: ${v} is not set")
  endif()
endforeach()

file(READ ${HEADER} header)
string(REGEX MATCHALL "ACC_API[^(;]*[ *]acc_[a-z0-9_]+\\(" functions "${header}")
list(TRANSFORM functions REPLACE ".*[ *](acc_[a-z0-9_]+)\\($" "\\1")
list(LENGTH functions count)
if(count LESS 100)
  message(FATAL_ERROR "found only ${count} functions in ${HEADER}: the pattern no longer fits the header")
endif()

file(READ ${INTERFACE} interface)
# Each entry needs a reason after the colon (only the name is captured: reasons may hold ';').
string(REGEX MATCHALL "\n \\*  - acc_[a-z0-9_]+: [a-zA-Z]" excluded "${interface}")
list(TRANSFORM excluded REPLACE "^\n \\*  - (acc_[a-z0-9_]+):.*" "\\1")

set(code "${interface}")
file(GLOB swig_files ${SWIG_DIR}/*)
foreach(f IN LISTS swig_files)
  file(READ ${f} text)
  string(APPEND code "\n${text}")
endforeach()
# Comments, /* */ and //, whichever opens first (so neither kind hides inside the other).
string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/|//[^\n]*" "" code "${code}")

set(problems "")
foreach(name IN LISTS functions)
  string(REGEX MATCH "[^a-z0-9_]${name}[ \t\n]*\\(" called "${code}")
  list(FIND excluded ${name} at)
  if(at GREATER -1 AND called)
    string(APPEND problems "\n  ${name} is on the not-wrapped list but the interface calls it")
  elseif(at EQUAL -1 AND NOT called)
    string(APPEND problems "\n  ${name} is neither wrapped nor on accelerate.i's not-wrapped list")
  endif()
endforeach()
foreach(name IN LISTS excluded)
  list(FIND functions ${name} at)
  if(at EQUAL -1)
    string(APPEND problems "\n  ${name} is on the not-wrapped list but not in the header")
  endif()
endforeach()
if(problems)
  message(FATAL_ERROR "the bindings do not cover accelerate.h:${problems}")
endif()
list(LENGTH excluded nexcluded)
math(EXPR nwrapped "${count} - ${nexcluded}")
message(STATUS "${count} functions in accelerate.h: ${nwrapped} wrapped, ${nexcluded} deliberately not")
