#!/usr/bin/env bash
# Build a real Apache Iggy server (snapshot cc269ef70, server 0.9.0-edge.5, client protocol
# 0.11.0) to test iggy-route against. The server's source is not on any package registry:
# provide a git checkout of https://github.com/apache/iggy (plain or bare) whose HEAD is
# commit cc269ef70, e.g.
#   git clone https://github.com/apache/iggy /tmp/iggy && git -C /tmp/iggy checkout cc269ef70
#
#   tests/real-cluster/build.sh GIT_DIR    extract HEAD of GIT_DIR, install the build's apt
#                                          packages (libhwloc-dev, libudev-dev), build (debug)
#   tests/real-cluster/build.sh --release GIT_DIR
#                                          the same, built as upstream releases it (its own
#                                          release profile: LTO, one codegen unit), with
#                                          upstream's benchmark tool iggy-bench beside it
#
# Run it from the project root: state goes to $IGGYREAL_DIR (default: target/iggy-real under
# the current directory, which git ignores). Debug: about 10 minutes on 2 idle cores; release:
# about 45. A debug server shows behaviour; figures to compare come from the release one.
# Nothing of the server's source goes into the project: it is a test peer, not a dependency.
set -euo pipefail
profile=debug
if [ "${1:-}" = "--release" ]; then profile=release; shift; fi
git_dir=${1:?usage: tests/real-cluster/build.sh [--release] GIT_DIR (a git checkout of apache/iggy at cc269ef70)}
W=${IGGYREAL_DIR:-$PWD/target/iggy-real}   # not IGGY_*: the server rejects unknown IGGY_ variables
mkdir -p "$W"
if ! dpkg -s libhwloc-dev libudev-dev >/dev/null 2>&1; then
  apt-get update >/dev/null && apt-get install -y libhwloc-dev libudev-dev >/dev/null
fi
if [ ! -d "$W/src/core/server" ]; then
  mkdir -p "$W/src"
  git -C "$git_dir" archive HEAD | tar -x -C "$W/src"
fi
# The snapshot pins a toolchain that may not be installed; the installed stable one builds it.
[ -f "$W/src/rust-toolchain.toml" ] && mv "$W/src/rust-toolchain.toml" "$W/src/rust-toolchain.toml.orig"
if [ "$profile" = release ]; then
  (cd "$W/src" && CARGO_TARGET_DIR="$W/target" cargo build --release -p server --bin iggy-server \
    -p iggy-bench --bin iggy-bench -j"${JOBS:-2}")
  echo "built: $W/target/release/iggy-server and $W/target/release/iggy-bench"
else
  (cd "$W/src" && CARGO_TARGET_DIR="$W/target" cargo build -p server --bin iggy-server -j"${JOBS:-2}")
  echo "built: $W/target/debug/iggy-server"
fi
