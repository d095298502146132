# tests/fuzz/targets.cmake — the fuzz targets and what each one compiles,
# shared by the libFuzzer build (tests/fuzz/CMakeLists.txt, EDGERT_FUZZ=ON,
# clang) and the regression replay programs of the normal test suite
# (tests/CMakeLists.txt, any compiler): one list, so a target cannot exist
# in one build and be forgotten in the other.
set(EDGERT_FUZZ_DIR ${CMAKE_CURRENT_LIST_DIR})
# One per parser of outside input: core/formats/yamldoc.c,
# core/discover/manifest.c, core/probe/device_profile.c, the probe's sysroot
# files (core/probe/probe_*.c), core/evidence/evidence.c,
# core/formats/safetensors.c, core/weights/checkpoint.c (with packfile.c),
# and the model runner's config.json (runner/config.c).
# One line: .ci/fuzz reads the list with sed.
set(EDGERT_FUZZ_TARGETS yaml manifest device_profile probe evidence safetensors checkpoint config)

# Add fuzz target `t`'s sources to executable `exe`: tests/fuzz/fuzz_<t>.c
# and the code under test. The core's parsers come from edgert_core_obj;
# the safetensors reader comes from the formats library alone, as npu-export
# links it.
function(edgert_fuzz_sources exe t)
  target_sources(${exe} PRIVATE ${EDGERT_FUZZ_DIR}/fuzz_${t}.c)
  target_include_directories(${exe} PRIVATE ${EDGERT_FUZZ_DIR})
  if(t STREQUAL "config") # the runner's reader, over the core's YAML layer
    target_sources(${exe} PRIVATE ${PROJECT_SOURCE_DIR}/runner/config.c)
    target_include_directories(${exe} PRIVATE ${PROJECT_SOURCE_DIR}/runner
      ${PROJECT_SOURCE_DIR}/runner/include)
    target_link_libraries(${exe} PRIVATE edgert_core_obj)
  elseif(t STREQUAL "safetensors")
    target_link_libraries(${exe} PRIVATE edgert_formats)
  else()
    target_link_libraries(${exe} PRIVATE edgert_core_obj)
  endif()
endfunction()
