# tests/hermetic_dirs.cmake — the fixture test `hermetic_dirs`: empty the
# tests' hermetic folder and create each test's own HOME and XDG folders, so
# no test sees the developer's per-user caches or what an earlier run left.
#
#   cmake -DDIR=<build>/tests/hermetic -DTESTS=name|name|... -P hermetic_dirs.cmake
#
# The folder layout is the one edgert_test_hermetic() in tests/CMakeLists.txt
# points each test's environment at.
if(NOT DIR OR NOT DIR MATCHES "/hermetic$")
  message(FATAL_ERROR "hermetic_dirs.cmake: DIR must be the tests' hermetic folder, got '${DIR}'")
endif()
file(REMOVE_RECURSE "${DIR}")
string(REPLACE "|" ";" TESTS "${TESTS}")
foreach(t ${TESTS})
  file(MAKE_DIRECTORY "${DIR}/${t}/home" "${DIR}/${t}/cache" "${DIR}/${t}/data"
    "${DIR}/${t}/config")
endforeach()
list(LENGTH TESTS n)
message(STATUS "hermetic HOME and XDG folders for ${n} tests under ${DIR}")
