# cmake/aarch64-linux-gnu.cmake — cross build for ARM64 Linux with Debian's
# gcc-aarch64-linux-gnu, target libraries from Debian multiarch, tests run
# under qemu user-mode emulation.
#
#   .ci/deps arm64      # cross gcc, qemu-user, libyaml/libxxhash/libcmocka :arm64
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
#   cmake --build build-arm64 -j2
#   ctest --test-dir build-arm64 --output-on-failure
#
# Layout on a Debian host after `dpkg --add-architecture arm64`:
#   - the cross C library (libc6-dev-arm64-cross) lives in /usr/aarch64-linux-gnu;
#   - the :arm64 packages put their libraries in /usr/lib/aarch64-linux-gnu and
#     their .pc files in /usr/lib/aarch64-linux-gnu/pkgconfig; headers are the
#     arch-independent ones in /usr/include, which the cross gcc searches.
# So there is no separate sysroot: the host's / is it, with multiarch paths.
# CMake derives CMAKE_LIBRARY_ARCHITECTURE (aarch64-linux-gnu) from the
# compiler, so find_library looks in the multiarch folders, never in the
# host's x86_64 ones.
#
# Tests: CMAKE_CROSSCOMPILING_EMULATOR prefixes every add_test command that
# names a target, so `ctest` runs the ARM64 binaries transparently (tests that
# start the CLI themselves get the same prefix through EDGERT_TEST_CLI, see
# tests/CMakeLists.txt). The emulated CPU is chosen per test with
# QEMU_CPU=<model>; unset, qemu-aarch64 emulates `max`, which has every feature.
#
# Why `-L /` and not `-L /usr/aarch64-linux-gnu`: the :arm64 packages pull in
# libc6:arm64, so the target's own loader and C library are installed as a
# matched pair in /lib/ld-linux-aarch64.so.1 and /lib/aarch64-linux-gnu. With
# -L /usr/aarch64-linux-gnu qemu starts the cross package's ld.so (glibc
# 2.36-8cross1 on Debian 12), which searches /lib/aarch64-linux-gnu first and
# (qemu falling back to host paths) loads the multiarch libc.so.6
# (2.36-9+deb12uN): a loader and libc from different builds, whose private
# shared structures differ — the first pthread_create then loops forever in
# the stack-cache list walk. The cross libc is only for linking (older than
# the runtime one, which is the direction glibc supports); `-L /` (qemu treats
# it as no prefix) runs everything against the multiarch pair.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(EDGERT_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${EDGERT_CROSS_TRIPLE}-gcc)

set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/)

# Programs (pkg-config, qemu) are the build machine's; libraries and headers
# are the target's (multiarch paths, see above).
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)

# pkg-config must see only the arm64 .pc files: LIBDIR replaces the default
# search path, PKG_CONFIG_PATH (which would be searched first) is cleared, and
# no sysroot prefix is added to the paths the .pc files name.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/${EDGERT_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
