# cmake/EdgertPlugin.cmake — edgert_add_plugin(): one backend plugin, built the
# way every plugin must be (include/edgert/plugin.h):
#
#   edgert_add_plugin(<target>
#     SOURCES <file>...                 the plugin's sources
#     [ISA_FLAGS "<file>=<flags>"...]   per-FILE instruction-set flags, e.g.
#                                       "aw_kern_int16.c=-mavx512f -mavx512vnni";
#                                       never for the whole target and never
#                                       -march=native: the entry file stays
#                                       baseline so the library loads and inits
#                                       on any CPU of its arch, and init picks the
#                                       path from the host's CPU flags
#     [LIBS <lib>...]                   extra libraries (libm, ...)
#     [OUTPUT_DIRECTORY <dir>]          default: the backends folder
#     [NO_LIB_PREFIX]                   <target>.so instead of lib<target>.so
#     [MANIFEST <file.yaml>...]         the backend's manifest(s): copied next to
#                                       the library (@VAR@ filled in, e.g.
#                                       @PROJECT_VERSION@), stamped with the
#                                       library's checksum after every link
#                                       (`edgert checksum --stamp`), installed
#                                       beside it. Several manifests may share
#                                       one library (plugin_name, plugin_options)
#     [NO_KIT]                          without the plugin kit (edgert::plugin_kit,
#                                       <edgert/kit/plugin_kit.h>), which is
#                                       linked by default, in edgert's tree and
#                                       from the installed package alike
#     [X86_KIT]                         also the kit's x86 part
#                                       (edgert::plugin_kit_x86: AMX permission,
#                                       decode tuning, prefetch=auto)
#     [NO_INSTALL])                     test-only plugins
#
# A MODULE library with hidden visibility (only edgert_plugin_entry is
# exported, by EDGERT_PLUGIN_EXPORT), linking nothing of the core: it sees the
# public headers and, unless NO_KIT, links the plugin kit, a static library of
# hidden objects. The ISA flag list of a plugin is given once and can serve a second
# target built from the same files (the AMX-emulation test build does):
# COMPILE_OPTIONS are set per source for that target's directory.
include_guard(GLOBAL)

function(edgert_add_plugin target)
  cmake_parse_arguments(P "NO_KIT;X86_KIT;NO_INSTALL;NO_LIB_PREFIX" "OUTPUT_DIRECTORY"
    "SOURCES;ISA_FLAGS;LIBS;MANIFEST" ${ARGN})
  if(NOT P_SOURCES)
    message(FATAL_ERROR "edgert_add_plugin(${target}): no SOURCES")
  endif()
  add_library(${target} MODULE ${P_SOURCES})
  # the headers only: a plugin links nothing of the core
  target_link_libraries(${target} PRIVATE edgert::headers)
  if(P_X86_KIT AND P_NO_KIT)
    message(FATAL_ERROR "edgert_add_plugin(${target}): X86_KIT and NO_KIT")
  elseif(P_X86_KIT)
    target_link_libraries(${target} PRIVATE edgert::plugin_kit_x86)
  elseif(NOT P_NO_KIT)
    target_link_libraries(${target} PRIVATE edgert::plugin_kit)
  endif()
  if(P_LIBS)
    target_link_libraries(${target} PRIVATE ${P_LIBS})
  endif()
  foreach(spec ${P_ISA_FLAGS})
    if(NOT spec MATCHES "^([^=]+)=(.+)$")
      message(FATAL_ERROR "edgert_add_plugin(${target}): ISA_FLAGS entry '${spec}' is not file=flags")
    endif()
    set(file ${CMAKE_MATCH_1})
    separate_arguments(flags UNIX_COMMAND "${CMAKE_MATCH_2}")
    set_source_files_properties(${file} TARGET_DIRECTORY ${target} PROPERTIES
      COMPILE_OPTIONS "${flags}")
  endforeach()
  if(NOT DEFINED P_OUTPUT_DIRECTORY)
    if(EDGERT_BACKEND_DIR)
      set(P_OUTPUT_DIRECTORY ${EDGERT_BACKEND_DIR})
    else()
      set(P_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
    endif()
  endif()
  set(P_PREFIX "lib")
  if(P_NO_LIB_PREFIX)
    set(P_PREFIX "")
  endif()
  # "$<1:...>": a multi-config generator (Ninja Multi-Config) would put the
  # library in a per-config subfolder, away from the manifest that names it
  set_target_properties(${target} PROPERTIES
    PREFIX "${P_PREFIX}"
    C_VISIBILITY_PRESET hidden
    LIBRARY_OUTPUT_DIRECTORY "$<1:${P_OUTPUT_DIRECTORY}>")
  # (the manifests first: their install-time check must come before the
  # library's install, and their own install after it)
  if(P_MANIFEST)
    _edgert_plugin_manifest(${target} "${P_MANIFEST}" ${P_OUTPUT_DIRECTORY} ${P_NO_INSTALL})
  endif()
  if(NOT P_NO_INSTALL)
    install(TARGETS ${target} LIBRARY DESTINATION ${EDGERT_INSTALL_BACKEND_DIR})
    _edgert_plugin_dest_searched(${target})
  endif()
  if(P_MANIFEST AND NOT P_NO_INSTALL)
    _edgert_plugin_manifest_install(${target})
  endif()
endfunction()

# A configure-time warning when the plugin would install where the edgert
# found does not look (its package config lists the folders; edgert's own
# tree has no such list and installs next to libedgert).
function(_edgert_plugin_dest_searched target)
  if(NOT DEFINED EDGERT_SEARCHED_BACKEND_DIRS)
    return()
  endif()
  set(dest "${EDGERT_INSTALL_BACKEND_DIR}")
  if(NOT IS_ABSOLUTE "${dest}")
    set(dest "${CMAKE_INSTALL_PREFIX}/${dest}")
  endif()
  cmake_path(NORMAL_PATH dest)
  foreach(dir ${EDGERT_SEARCHED_BACKEND_DIRS})
    cmake_path(NORMAL_PATH dir)
    if(dest STREQUAL dir)
      return()
    endif()
  endforeach()
  string(REPLACE ";" "\n    " dirs "${EDGERT_SEARCHED_BACKEND_DIRS}")
  message(WARNING "edgert_add_plugin(${target}) installs to ${dest}, which edgert "
    "${EDGERT_VERSION} does not search, so it would not find the backend there. "
    "Its folders are:\n    ${dirs}\n"
    "Install to one of them (a plain `cmake --install` without CMAKE_INSTALL_PREFIX goes to "
    "${EDGERT_VENDOR_BACKEND_DIR}; -DCMAKE_INSTALL_PREFIX=$HOME/.local to the per-user one; "
    "or -DEDGERT_INSTALL_BACKEND_DIR=<folder>), or point EDGERT_ADD_MANIFEST_PATH at ${dest} "
    "where edgert runs (docs/backend-folders.md).")
endfunction()

# The manifests next to the library, stamped after each link with the
# checksum of the bytes just built, so the core refuses a stale or swapped file.
function(_edgert_plugin_manifest target manifests dir no_install)
  set(stamped)
  set(sources)
  foreach(manifest ${manifests})
    get_filename_component(name ${manifest} NAME)
    if(NOT IS_ABSOLUTE ${manifest})
      set(manifest ${CMAKE_CURRENT_SOURCE_DIR}/${manifest})
    endif()
    # an @VAR@ that would expand to nothing: said here, with what to do,
    # not later as an empty field of the copy (project() without VERSION
    # left `version: "@PROJECT_VERSION@"` empty)
    file(READ ${manifest} text)
    string(REGEX MATCHALL "@[A-Za-z_][A-Za-z_0-9]*@" vars "${text}")
    list(REMOVE_DUPLICATES vars)
    foreach(v ${vars})
      string(REGEX REPLACE "^@(.*)@$" "\\1" var "${v}")
      if("${${var}}" STREQUAL "")
        set(hint "")
        if(var MATCHES "^(PROJECT|CMAKE_PROJECT)_VERSION")
          set(hint ": give the project a version, project(${PROJECT_NAME} VERSION 0.1.0 ...)")
        endif()
        message(FATAL_ERROR "edgert_add_plugin(${target}): ${manifest} says ${v}, and "
          "${var} is empty here, so the copy would have an empty value${hint}")
      endif()
    endforeach()
    configure_file(${manifest} ${dir}/${name} @ONLY)
    list(APPEND stamped ${dir}/${name})
    list(APPEND sources ${manifest})
  endforeach()
  if(TARGET edgert-cli) # in the edgert tree: the CLI being built
    set(cli $<TARGET_FILE:edgert-cli>)
  else()                # a vendor's build: the installed package's CLI
    set(cli ${EDGERT_CLI})
  endif()
  if(cli)
    # A target of its own that runs on every build (after the library's
    # link): a re-configure rewrites the manifest unstamped even when the
    # library is not relinked, and this stamps it again.
    # (--source: an error in the copy names the file the vendor edits)
    set(cmds)
    foreach(m src IN ZIP_LISTS stamped sources)
      list(APPEND cmds COMMAND ${CMAKE_CROSSCOMPILING_EMULATOR} ${cli} checksum --stamp ${m}
        --source ${src})
    endforeach()
    add_custom_target(${target}-stamp ALL
      ${cmds}
      DEPENDS ${target}
      COMMENT "Stamping ${stamped} with the checksum of ${target}"
      VERBATIM)
    add_dependencies(${target}-stamp ${target})
    if(TARGET edgert-cli)
      add_dependencies(${target}-stamp edgert-cli)
    endif()
  endif()
  if(NOT no_install AND cli)
    # Before anything is installed: the build's copies stamped again, which
    # fails (naming the source) when a manifest is bad or the library was not
    # built, so a failed build installs nothing, not a manifest edgert skips.
    foreach(m src IN ZIP_LISTS stamped sources)
      install(CODE "execute_process(COMMAND ${CMAKE_CROSSCOMPILING_EMULATOR} \"${cli}\"
        checksum --stamp \"${m}\" --source \"${src}\" RESULT_VARIABLE rc)
      if(NOT rc EQUAL 0)
        message(FATAL_ERROR \"${target}: nothing installed: its manifest or library is not \"
          \"ready (said above); fix it and build again\")
      endif()")
    endforeach()
  endif()
  set_property(TARGET ${target} PROPERTY EDGERT_STAMPED "${stamped}")
  set_property(TARGET ${target} PROPERTY EDGERT_STAMP_CLI "${cli}")
endfunction()

# The manifests installed beside the library, after it.
function(_edgert_plugin_manifest_install target)
  get_property(stamped TARGET ${target} PROPERTY EDGERT_STAMPED)
  get_property(cli TARGET ${target} PROPERTY EDGERT_STAMP_CLI)
  install(FILES ${stamped} DESTINATION ${EDGERT_INSTALL_BACKEND_DIR})
  if(NOT cli)
    return()
  endif()
  # Stamped again where installed, after the library: `cmake --install
  # --strip` changes its bytes, and a manifest stamped for the unstripped
  # build would refuse it (CHECKSUM_MISMATCH).
  set(dest ${EDGERT_INSTALL_BACKEND_DIR})
  if(NOT IS_ABSOLUTE ${dest})
    set(dest "\${CMAKE_INSTALL_PREFIX}/${dest}")
  endif()
  foreach(m ${stamped})
    get_filename_component(name ${m} NAME)
    install(CODE "execute_process(COMMAND ${CMAKE_CROSSCOMPILING_EMULATOR} \"${cli}\"
      checksum --stamp \"\$ENV{DESTDIR}${dest}/${name}\" RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR \"could not stamp the installed ${name} (exit \${rc})\")
    endif()")
  endforeach()
endfunction()
