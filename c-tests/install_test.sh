#!/usr/bin/env bash
# Install the build tree into a temporary prefix, then build and run a consumer through the CMake
# package (find_package(engine)) and through pkg-config. Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$1"
src="$2"
prefix="$(mktemp -d)"
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
test -L "$prefix/lib/libengine.so" || test -L "$prefix/lib64/libengine.so"
libdir="$(dirname "$(find "$prefix" -name libengine.so.0 | head -n 1)")"

cmake -S "$src/consumer" -B "$prefix/consumer-build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/consumer-build" >/dev/null
LD_LIBRARY_PATH="$libdir" "$prefix/consumer-build/consumer"

export PKG_CONFIG_PATH="$libdir/pkgconfig"
# shellcheck disable=SC2046
cc -std=c11 -o "$prefix/consumer-pc" "$src/consumer/main.c" $(pkg-config --cflags --libs engine)
LD_LIBRARY_PATH="$libdir" "$prefix/consumer-pc"
