#!/usr/bin/env bash
# gpu_check_isolated.sh ROOTFS OUTDIR [wheel]: scripts/gpu-check.sh run here (no GPU) inside a
# chroot that has only what the GPU machine is known to have: a base system, python3 (no
# torch here), the CUDA toolkit's libraries (this machine's /usr/local/cuda-13.0, bound in)
# and no -dev package, no OpenBLAS, PCRE2, cJSON, libyaml, zstd, no xz binary, no make, no
# compiler, no git. ROOTFS is made once (as root, network to Debian's mirror):
#   debootstrap --variant=minbase bullseye ROOTFS http://deb.debian.org/debian
#   cp /etc/resolv.conf ROOTFS/etc/; mount -t proc proc ROOTFS/proc
#   chroot ROOTFS apt-get install -y --no-install-recommends python3; umount ROOTFS/proc
# bullseye's glibc is 2.31, older than the 2.34 the binaries need: the run must take the
# bundled glibc loader by itself, and libstdc++ (GCC 10's) is older than ours: lib/fallback.
# The repository is bound in at /repo with build-gpu-prebuilt/ removed first, so the
# carried archive itself is what gets unpacked; nvidia-smi is a stand-in printing an H100
# 80 GB's name and memory (the shape is chosen as there). The GPU parts then say "SKIP: no
# CUDA device" (counted as failed) and the python ones fail (no torch); what this checks is
# everything before them: unpack, the library checks, the binaries starting, `olmo info`'s
# shape, and every part running in order within the budget. With "wheel" the CUDA
# libraries are not under /usr/local/cuda but only where a pip torch keeps them
# (python3's nvidia/cu13/lib): the script must find them there by itself.
set -euo pipefail
[ -n "${2:-}" ] && [ -x "${1:-}/bin/sh" ] || { echo "usage: scripts/gpu_check_isolated.sh ROOTFS OUTDIR [wheel] (ROOTFS: see the header)" >&2; exit 2; }
cd "$(dirname "$0")/.."
R=$(cd "$1" && pwd); mkdir -p "$2"; OUTD=$(cd "$2" && pwd)
[ -f build-gpu-prebuilt.tar.xz ] || { echo "no build-gpu-prebuilt.tar.xz: run scripts/gpu-check.sh --prepare" >&2; exit 2; }
CUDA=$(readlink -f /usr/local/cuda)
rm -rf build-gpu-prebuilt
WHEEL=/usr/lib/python3/dist-packages/nvidia/cu13/lib
mkdir -p "$R/repo" "$R/out" "$R/stub" "$R$CUDA" "$R$WHEEL"
rm -f "$R/usr/local/cuda"
cat >"$R/stub/nvidia-smi" <<'SH'
#!/bin/sh
case "$*" in
  *name,memory.total,memory.free*noheader*) echo "NVIDIA H100 80GB HBM3 (stand-in), 81559, 81004";;
  *noheader*) exit 1;;
  *--format=csv*) echo "name, memory.total [MiB], memory.free [MiB]"; echo "NVIDIA H100 80GB HBM3 (stand-in), 81559 MiB, 81004 MiB";;
  *) echo "nvidia-smi stand-in (gpu_check_isolated.sh): no GPU here";;
esac
SH
chmod +x "$R/stub/nvidia-smi"
unshare -m bash -c '
  set -e
  R=$1
  mount --make-rprivate /
  mount --bind "$2" "$R/repo"; mount --bind "$3" "$R/out"
  if [ "$5" = wheel ]; then mount --bind "$(readlink -f "$4/lib64")" "$R$6"; echo "CUDA libraries only in $6"
  else mount --bind "$4" "$R$4"; ln -sfn "$4" "$R/usr/local/cuda"; fi
  mount -t proc proc "$R/proc"
  echo "chroot $R: $(chroot "$R" ldd --version | head -1); -dev packages: $(chroot "$R" dpkg -l | grep -c -- "-dev " || true); /usr/include entries: $(ls "$R/usr/include" 2>/dev/null | wc -l); xz: $(chroot "$R" sh -c "command -v xz || echo none"); make: $(chroot "$R" sh -c "command -v make || echo none")"
  chroot "$R" env -i PATH=/stub:/usr/local/bin:/usr/bin:/bin HOME=/tmp bash /repo/scripts/gpu-check.sh /out
  rm -f "$R/usr/local/cuda"
' _ "$R" "$PWD" "$OUTD" "$CUDA" "${3:-}" "$WHEEL" || true
