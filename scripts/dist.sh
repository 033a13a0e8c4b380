#!/usr/bin/env bash
# make dist: one tarball with hgpc, the runner and the non-system shared libraries hgpc needs
# (libonnx_proto, libprotobuf, ...), for another Linux x86-64 machine. The CUDA runtime is linked
# into the runner; cuDNN and cuBLAS are loaded from the target machine's library path at run time.
#
#   scripts/dist.sh BUILD_DIR OUT.tar.gz
set -euo pipefail
build=${1:-build}
out=${2:-$build/hgpc-dist.tar.gz}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
name=hgpc-$(git describe --always --dirty 2>/dev/null || echo dev)
root=$stage/$name
mkdir -p "$root/bin" "$root/libexec" "$root/lib"
cp "$build/bin/hgpc" "$build/bin/hgpc-runner" "$root/libexec/"
strip "$root/libexec/hgpc" "$root/libexec/hgpc-runner"
# Libraries every Linux has, or that the GPU machine provides itself.
system='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libgcc_s\.|libstdc\+\+\.|libcuda\.|libcudart|libcudnn|libcublas|libnccl|libnvidia)'
for f in "$root"/libexec/*; do
  ldd "$f" | awk '/=> \// {print $1, $3}' | while read -r lib path; do
    [[ $lib =~ $system ]] || cp -L "$path" "$root/lib/$lib"
  done
done
cat > "$root/bin/hgpc" <<'SH'
#!/bin/sh
# Runs hgpc with the libraries shipped beside it; generated executables need none of them.
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$here/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/../libexec/hgpc" "$@"
SH
chmod +x "$root/bin/hgpc"
cp README.md "$root/"
tar -C "$stage" -czf "$out" "$name"
echo "wrote $out ($(du -h "$out" | cut -f1)): $name/bin/hgpc, libexec/{hgpc,hgpc-runner}, lib/$(ls "$root/lib" | tr '\n' ' ')"
