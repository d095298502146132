# cmake/check_output.cmake — run a command and check its output, for ctest
# entries that test what the CLI prints (tests/CMakeLists.txt).
#
#   cmake -DCMD="prog|arg|arg" -DMUST="re1@@re2" -DMUSTNOT="re3" \
#         [-DEXPECT_RC=0] -P cmake/check_output.cmake
#
# CMD is the command line with `|` between its words (so a word may hold a
# `;`), MUST and MUSTNOT are CMake regular expressions separated by `@@`,
# matched against stdout + stderr. Every MUST must match, no MUSTNOT may, and
# the exit code must be EXPECT_RC (default 0). The output is echoed so ctest
# --output-on-failure shows what was checked.
if(NOT DEFINED CMD OR CMD STREQUAL "")
  message(FATAL_ERROR "check_output: CMD is empty")
endif()
if(NOT DEFINED EXPECT_RC)
  set(EXPECT_RC 0)
endif()
string(REPLACE "|" ";" _cmd "${CMD}")
execute_process(COMMAND ${_cmd} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
set(_all "${_out}${_err}")
message("${_all}")

set(_failed "")
if(NOT _rc STREQUAL "${EXPECT_RC}")
  string(APPEND _failed "  exit code ${_rc}, expected ${EXPECT_RC}\n")
endif()
if(DEFINED MUST AND NOT MUST STREQUAL "")
  string(REPLACE "@@" ";" _must "${MUST}")
  foreach(_re IN LISTS _must)
    if(NOT _all MATCHES "${_re}")
      string(APPEND _failed "  missing: ${_re}\n")
    endif()
  endforeach()
endif()
if(DEFINED MUSTNOT AND NOT MUSTNOT STREQUAL "")
  string(REPLACE "@@" ";" _mustnot "${MUSTNOT}")
  foreach(_re IN LISTS _mustnot)
    if(_all MATCHES "${_re}")
      string(APPEND _failed "  present but must not be: ${_re}\n")
    endif()
  endforeach()
endif()
if(NOT _failed STREQUAL "")
  message(FATAL_ERROR "check_output: ${CMD}\n${_failed}")
endif()
message("check_output: all checks passed")
