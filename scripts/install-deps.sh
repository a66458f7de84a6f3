#!/usr/bin/env bash
# The one list of Debian packages fabench uses. Idempotent: apt-get update runs only when
# something is missing. Needs root (or sudo) on Debian 12.
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config git
  clang                               # CI's second compiler (clang 14 on Debian 12)
  openmpi-bin libopenmpi-dev          # mpi transport, native MPI_Allreduce, mpirun launcher
  libucx-dev ucx-utils                # ucx transport
  libhwloc-dev hwloc-nox              # topology
  libdnnl-dev                         # CPU training backend (oneDNN 2.6)
  zlib1g-dev                          # gzip'd Fashion-MNIST
  libcjson-dev                        # JSON writer/reader (run.json, topo.json)
  libyaml-dev                         # accept's rules files
  libxml2-utils                       # xmllint: accept.xml against the JUnit schema (tests)
  libcmocka-dev                       # unit-test framework
  iproute2 procps                     # emulated fabrics (ip netns, tc), process control
  gnuplot-nox                         # report plots
  dataset-fashion-mnist               # default training data
  python3-torch python3-numpy         # PyTorch peer for the training checks and benchmarks
  clang libclang-rt-14-dev            # libFuzzer targets (scripts/fuzz.sh, tests/fuzz)
  help2man dpkg-dev                   # man page; cpack's Debian package (dpkg-shlibdeps)
  slurmctld slurmd slurm-client munge # the one-node Slurm of tests/install/slurm.sh
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
