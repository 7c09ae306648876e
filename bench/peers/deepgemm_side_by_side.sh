#!/usr/bin/env bash
# moekit vs DeepGEMM on this GPU, in one process (bench/peers/deepgemm_side_by_side.py).
#
#   bench/peers/deepgemm_side_by_side.sh [DEEPGEMM_DIR] [-- args for the .py, e.g. --only 2112]
#
# DEEPGEMM_DIR: a DeepGEMM source tree with its third-party/cutlass and third-party/fmt filled
# (default: $MOEKIT_PEERS/DeepGEMM, MOEKIT_PEERS defaulting to ~/.cache/moekit-peers; cloned there
# at the pinned release with its submodules when missing, which needs the network). It is built in
# place (torch CUDAExtension, ~1 minute) unless already built; nothing of it enters this repository.
# moekit must be importable (pip install . from this repository). Needs torch with CUDA, a C++17
# compiler and an sm_90 GPU.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
DG_COMMIT=54e22612   # DeepGEMM release 2.6.1 (pins CUTLASS f3fde583, fmt 553ec11e as submodules)
dg=${MOEKIT_PEERS:-$HOME/.cache/moekit-peers}/DeepGEMM
if [[ $# -gt 0 && $1 != -- ]]; then dg=$1; shift; fi
[[ $# -gt 0 && $1 == -- ]] && shift

if [[ ! -d $dg ]]; then
  git clone https://github.com/deepseek-ai/DeepGEMM.git "$dg"
  git -C "$dg" checkout "$DG_COMMIT"
  git -C "$dg" submodule update --init --recursive
fi
for d in third-party/cutlass/include/cute third-party/fmt/include; do
  [[ -d $dg/$d ]] || { echo "error: $dg/$d is missing (DeepGEMM's submodules)" >&2; exit 1; }
done
if ! ls "$dg"/deep_gemm/_C*.so > /dev/null 2>&1; then
  echo "building DeepGEMM in $dg"
  (
    cd "$dg"
    ln -sfn "$dg/third-party/cutlass/include/cutlass" deep_gemm/include/cutlass
    ln -sfn "$dg/third-party/cutlass/include/cute" deep_gemm/include/cute
    python3 setup.py build > build.log 2>&1 || { tail -30 build.log >&2; exit 1; }
    ln -sf "$(realpath "$(find build -name '_C*.so' -type f | head -1)")" deep_gemm/
  )
fi

# DeepGEMM's extension needs the C++ runtime of the compiler that built it: an older libstdc++
# loaded first (torch's dependencies) makes std::regex in its include parser crash at first use.
export LD_PRELOAD=$(g++ -print-file-name=libstdc++.so.6)${LD_PRELOAD:+:$LD_PRELOAD}
export PYTHONPATH=$dg${PYTHONPATH:+:$PYTHONPATH}
export DG_JIT_CACHE_DIR=${DG_JIT_CACHE_DIR:-${MOEKIT_PEERS:-$HOME/.cache/moekit-peers}/deepgemm-jit}
exec python3 "$here/deepgemm_side_by_side.py" "$@"
