#!/usr/bin/env bash
# pack_openmpi.sh - Debian's Open MPI (openmpi-bin, libopenmpi3, libpmix2) copied into one
# relocatable prefix, so that the GPU machine, which has no Debian libraries, can run
# `mpirun -np 2 EXE` with the same MPI this machine tests with (docs/distributed.md).
#
#   tests/gpu/pack_openmpi.sh DEST          (device_run.sh --pack calls it)
#   source DEST/env.sh && mpirun --allow-run-as-root -np 2 hostname
#   tests/gpu/pack_openmpi.sh --check DEST [CMD...]  (relocation test, here: see below)
#
# DEST mirrors the installed layout under prefix /usr (bin/, lib/x86_64-linux-gnu/openmpi/lib/
# openmpi3/ for the plugins, share/openmpi/ for the help texts), because Open MPI finds them as
# ${prefix}/... and OPAL_PREFIX=DEST moves ${prefix}. What is not under the prefix is pointed at
# by env.sh: the MCA parameter file (Debian's is /etc/openmpi/openmpi-mca-params.conf; its
# exclusions of ucx, openib and ofi must stay, or those components are tried) and the default
# hostfile. PMIx (libpmix2, through which mpirun and the ranks talk) has its own install
# directories, absolute and not relocatable; env.sh names its plugin directory (DEST/lib/pmix)
# instead. Where Debian's PMIx is installed, its parameter file names the system's plugin
# directory and wins over that, which is harmless (the same plugins); without them PMIx prints
# "pcompress ... unavailable" and still works. The shared libraries, named by soname, go to DEST/lib, which env.sh puts first on
# LD_LIBRARY_PATH; the executable's dlopen("libmpi.so.40") finds libmpi there too.
#
# Plugins that need the InfiniBand, UCX, libfabric or PSM libraries (and OpenSHMEM's) are left
# out: the ranks talk over shared memory and TCP on one machine, and NCCL carries the training.
#
# --check copies DEST to a fresh temporary prefix and runs `mpirun -np 2 hostname` there in a
# mount namespace where Debian's Open MPI and PMIx (/usr/lib/x86_64-linux-gnu/openmpi,
# .../pmix2, /usr/share/openmpi, /etc/openmpi, /usr/bin/orterun and the libmpi, libopen-*,
# libpmix libraries) are hidden under empty mounts, under `strace -f -e trace=openat,execve`.
# It fails if a file of the system's Open MPI is opened or if a rank did not run. CMD, if given,
# then runs (and must exit 0) in the same namespace, environment and strace (e.g. build/bin/hgp_mpi_bootstrap_test, which
# starts the packed mpirun and whose ranks dlopen the packed libmpi.so.40); its output is shown.
set -euo pipefail
multiarch=x86_64-linux-gnu
sys_lib=/usr/lib/$multiarch
plugin_rel=lib/$multiarch/openmpi/lib/openmpi3

if [[ ${1:-} == --check ]]; then
  src=$(cd "$2" && pwd)
  shift 2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  cp -a "$src" "$tmp/mpi"
  empty=$tmp/empty && mkdir -p "$empty" && : > "$tmp/empty-file"
  hide=""
  for d in $sys_lib/openmpi $sys_lib/pmix2 /usr/share/openmpi /etc/openmpi; do
    [[ -d $d ]] && hide+="mount --bind $empty $d; "
  done
  for f in /usr/bin/orterun /usr/bin/orted $sys_lib/libmpi.so.40* $sys_lib/libopen-rte.so.40* \
           $sys_lib/libopen-pal.so.40* $sys_lib/libmca_common_* $sys_lib/libpmix.so.2*; do
    [[ -f $f && ! -L $f ]] && hide+="mount --bind $tmp/empty-file $f; "
  done
  root=$([[ $(id -u) == 0 ]] && echo --allow-run-as-root || true)
  # shellcheck disable=SC2016
  unshare -m --propagation private bash -c "$hide"'
    source "$1/mpi/env.sh"
    echo "which mpirun: $(command -v mpirun)"
    echo "ldd libmpi: $(ldd "$1/mpi/lib/libmpi.so.40" | grep -cE "=> /(usr/)?lib/'$multiarch'/(libmpi|libopen-|libpmix|openmpi|pmix2)") system Open MPI libraries"
    strace -f -qq -e trace=openat,execve -o "$1/strace.log" \
      timeout 60 mpirun '"$root"' --oversubscribe -np 2 hostname > "$1/out.log" 2>&1
    echo "mpirun exit $?"
    if [[ $# -gt 1 ]]; then
      echo "running ${*:2}"
      strace -f -qq -e trace=openat,execve -o "$1/strace-cmd.log" timeout 300 "${@:2}"
      echo $? > "$1/cmd.rc"
    fi' _ "$tmp" "$@"
  if [[ $# -gt 0 ]]; then echo "exit $(cat "$tmp/cmd.rc")"; [[ $(cat "$tmp/cmd.rc") == 0 ]] || exit 1; fi
  cat "$tmp"/strace-cmd.log >> "$tmp/strace.log" 2>/dev/null || true
  echo "hostname lines: $(grep -c . "$tmp/out.log")"; sed 's/^/  /' "$tmp/out.log"
  opened=$(grep -v ENOENT "$tmp/strace.log" | grep -E "\"($sys_lib/(openmpi|pmix2|libmpi|libopen-|libpmix|libmca_common)|/usr/share/openmpi|/etc/openmpi|/usr/bin/orte)" || true)
  tried=$(grep ENOENT "$tmp/strace.log" | grep -cE "\"($sys_lib/(openmpi|pmix2)|/usr/share/openmpi|/etc/openmpi)" || true)
  from_pack=$(grep -v ENOENT "$tmp/strace.log" | grep -c "$tmp/mpi/" || true)
  echo "files opened from the packed prefix: $from_pack; from the system's Open MPI: $(grep -c . <<< "$opened" || true) (paths looked up there and absent: $tried)"
  [[ -z $opened ]] || { echo "$opened" | head; exit 1; }
  [[ $(grep -c . "$tmp/out.log") == 2 && $(sort -u "$tmp/out.log" | wc -l) == 1 ]] || exit 1
  echo "relocation check PASSED"
  exit 0
fi

dest=${1:?usage: pack_openmpi.sh DEST | --check DEST}
[[ -x /usr/bin/orterun && -d $sys_lib/openmpi/lib/openmpi3 ]] ||
  { echo "pack_openmpi.sh: Debian's Open MPI is missing (make deps installs openmpi-bin)" >&2; exit 1; }
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib/pmix" "$dest/$plugin_rel" "$dest/share" "$dest/etc"
# Provided by every Linux (and by the GPU machine).
provided='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libgcc_s\.|libstdc\+\+\.)'
# Plugins that need these are left out (network fabrics we do not use, OpenSHMEM).
unwanted='^(libuc[mpst]\.|libfabric|libefa|libibverbs|librdmacm|libpsm|libinfinipath|libnl-|liboshmem)'
copy_deps() {
  ldd "$1" | awk '/=> \// {print $1, $3}' | while read -r name path; do
    [[ $name =~ $provided ]] && continue
    [[ -e $dest/lib/$name ]] || cp -L "$path" "$dest/lib/$name"
  done
}
wanted() { ! ldd "$1" | awk '/=>/ {print $1}' | grep -qE "$unwanted"; }

cp /usr/bin/orterun /usr/bin/orted "$dest/bin/"
ln -s orterun "$dest/bin/mpirun"
copy_deps /usr/bin/orterun
cp -L $sys_lib/libmpi.so.40 "$dest/lib/"
copy_deps $sys_lib/libmpi.so.40
skipped=()
for p in $sys_lib/openmpi/lib/openmpi3/*.so; do
  if wanted "$p"; then cp "$p" "$dest/$plugin_rel/" && copy_deps "$p"; else skipped+=("$(basename "$p" .so)"); fi
done
for p in $sys_lib/pmix2/lib/pmix/*.so; do cp "$p" "$dest/lib/pmix/" && copy_deps "$p"; done
cp -r /usr/share/openmpi "$dest/share/"
cp /etc/openmpi/openmpi-mca-params.conf /etc/openmpi/openmpi-default-hostfile "$dest/etc/"
cat > "$dest/env.sh" <<'ENV'
# source me: Debian's Open MPI from this folder, wherever it is (tests/gpu/pack_openmpi.sh).
_mpi=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export OPAL_PREFIX=$_mpi
export PATH="$_mpi/bin:$PATH"
export LD_LIBRARY_PATH="$_mpi/lib:${LD_LIBRARY_PATH:-}"
export OMPI_MCA_mca_base_param_files=$_mpi/etc/openmpi-mca-params.conf
export OMPI_MCA_orte_default_hostfile=$_mpi/etc/openmpi-default-hostfile
export PMIX_MCA_mca_base_component_path=$_mpi/lib/pmix
# A machine with a PMIx of its own (Ubuntu's, in /usr/lib/x86_64-linux-gnu/pmix2) still has its
# plugins tried; the zlib one fails to load against this PMIx, is ignored, and PMIx then warns on
# every rank that it cannot compress (seen on the GPU machine). Both are noise for a local run.
export PMIX_MCA_mca_base_component_show_load_errors=0 PMIX_MCA_pcompress_base_silence_warning=1
unset _mpi
ENV
echo "pack_openmpi.sh: $(du -sh "$dest" | cut -f1) in $dest ($(ls "$dest/$plugin_rel" | wc -l) plugins; left out: ${skipped[*]})"
