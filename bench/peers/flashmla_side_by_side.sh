#!/usr/bin/env bash
# moekit vs FlashMLA (DeepSeek's sparse MLA kernels) on this GPU, in one process
# (bench/peers/flashmla_side_by_side.py: FP8 sparse decode and bf16 sparse prefill, head dim 512).
#
#   bench/peers/flashmla_side_by_side.sh [FLASHMLA_DIR] [-- args for the .py, e.g. --kv fp8 --only h=128]
#
# FLASHMLA_DIR: a FlashMLA source tree with its csrc/cutlass submodule filled (include/ and
# tools/util/include/ are what the build reads) (default: $MOEKIT_PEERS/FlashMLA, MOEKIT_PEERS
# defaulting to ~/.cache/moekit-peers; cloned there at the pinned commit with its cutlass submodule
# when missing, which needs the network). It is built in place for sm_90a only with FlashMLA's own
# switches (FLASH_MLA_DISABLE_SM100=1, FLASH_MLA_DISABLE_FP16=1; torch CUDAExtension, ninja when
# installed, MAX_JOBS parallel compiles, a few minutes) unless flash_mla/cuda*.so is there and
# imports; nothing of it enters this repository. The build's log is FLASHMLA_DIR/build.log.
# moekit must be importable (pip install . from this repository). Needs torch with CUDA, nvcc >= 12.8,
# a C++20 compiler and an sm_90 GPU.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
FM_COMMIT=9241ae3ef9bac614dd25e45e507e089f888280e0  # FlashMLA main, 2026-04-29 (pins CUTLASS 147f5673, v4.3.0-56)
fm=${MOEKIT_PEERS:-$HOME/.cache/moekit-peers}/FlashMLA
if [[ $# -gt 0 && $1 != -- ]]; then fm=$1; shift; fi
[[ $# -gt 0 && $1 == -- ]] && shift

if [[ ! -d $fm ]]; then
  git clone https://github.com/deepseek-ai/FlashMLA.git "$fm"
  git -C "$fm" checkout "$FM_COMMIT"
  git -C "$fm" submodule update --init csrc/cutlass
fi
fm=$(cd "$fm" && pwd)
for d in csrc/cutlass/include/cute csrc/cutlass/include/cutlass csrc/cutlass/tools/util/include/cutlass flash_mla; do
  [[ -d $fm/$d ]] || { echo "error: $fm/$d is missing (FlashMLA's tree and its csrc/cutlass submodule)" >&2; exit 1; }
done
# setup.py runs `git submodule update` and `git rev-parse`: keep git inside FlashMLA's own tree,
# never a repository around it (a tree copied under this repository's .peers/ has no .git).
GIT_CEILING_DIRECTORIES=$(dirname "$fm")
export GIT_CEILING_DIRECTORIES

imports() { (cd / && PYTHONPATH=$fm python3 -c 'import torch, flash_mla.cuda' > /dev/null 2>&1); }
if ! ls "$fm"/flash_mla/cuda*.so > /dev/null 2>&1 || ! imports; then
  echo "building FlashMLA in $fm (sm_90a only; log: $fm/build.log)"
  rm -f "$fm"/flash_mla/cuda*.so
  (
    cd "$fm"
    export FLASH_MLA_DISABLE_SM100=1 FLASH_MLA_DISABLE_FP16=1
    export MAX_JOBS=${MAX_JOBS:-$(nproc)}
    # CUDA 13 keeps libcu++ (cuda/std/...) in include/cccl, which nvcc adds by itself but the host
    # compiler of FlashMLA's csrc/api/api.cpp (through cutlass/cutlass.h) does not get from torch.
    cuda_home=$(python3 -c 'from torch.utils.cpp_extension import CUDA_HOME; print(CUDA_HOME or "")' 2> /dev/null)
    if [[ -n $cuda_home && -d $cuda_home/include/cccl ]]; then
      export CPLUS_INCLUDE_PATH=$cuda_home/include/cccl${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}
    fi
    start=$SECONDS
    python3 setup.py build_ext --inplace > build.log 2>&1 || { tail -40 build.log >&2; exit 1; }
    echo "built in $((SECONDS - start)) s: $(ls "$fm"/flash_mla/cuda*.so)"
  )
  imports || { echo "error: flash_mla.cuda does not import after the build" >&2; exit 1; }
fi

if [[ -d $fm/.git ]]; then
  FLASHMLA_COMMIT=$(git -C "$fm" rev-parse HEAD)
elif [[ -f $fm/PEER_COMMIT ]]; then
  FLASHMLA_COMMIT=$(head -1 "$fm/PEER_COMMIT")
else
  FLASHMLA_COMMIT="commit unknown (expected $FM_COMMIT)"
fi
export FLASHMLA_COMMIT
export PYTHONPATH=$fm${PYTHONPATH:+:$PYTHONPATH}
exec python3 "$here/flashmla_side_by_side.py" "$@"
