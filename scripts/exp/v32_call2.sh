# v32 device call 2: the direct-store epilogue with its closing barrier (call 1's build kept the next tile's K loop
# off the uniform datapath: BRA.DIV before each wgmma group, K loop +5%). Its GPU tests, then two interleaved rounds
# of DeepGEMM's masked rows under the default picks and forced configurations (m256n128s3r separates the epilogue
# from the 4th stage), the contiguous 1300 case and dense M = 4096 shapes; one trace of masked 1 x 1024 (4096, 7168)
# each way.
GTEST_FILTER='GemmFp8.DirectStore:GroupedGemmDirectStore.*:GemmFp8.TailHalves:GroupedGemmMasked.CudaGraphReplayFollowsDeviceCounts' \
MASKED_CFGS="m256n128s3g4x132c1 m256n128s3g4x132c1r m256n128s4g4x132c1r m128n128s5g8x132c1 m128n128s6g8x132c1r" \
CONTIG_CFGS="m256n128s4g8x132c2r m256n128s4g8x132c1r" bash scripts/exp/v32_call1.sh
