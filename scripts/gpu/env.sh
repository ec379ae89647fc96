# Sourced by build.sh and test.sh: where the private prefix and the build are, and what finds them.
deps=${ACC_DEPS_DIR:-$PWD/deps/gpu}
prefix=$deps/prefix
build=${ACC_BUILD_DIR:-build-gpu}
python=$(command -v "${ACC_PYTHON:-python3}")
libdir=$prefix/usr/lib/x86_64-linux-gnu
# protoc and the programs the tests start find the unpacked libraries (yaml-cpp, protobuf) here.
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
