#!/usr/bin/env bash
# The device call prepared in the twentieth session (issue 28), for an H200: the two changes the
# nineteenth session measured only on an H100, each against the arm in the same call.
#   1. The grouped FP8 tile's natural layout against the arm's placed one (`fp8_placed`, on since
#      057a057): three routing draws, both ranks, 2-64 tokens; the bench's copy share is against
#      the H200's 4.27 TB/s.
#   2. The sparse FP8 GEMVs as dependent launches triggering only where their slot is local
#      (`pdl_local`) against the arm, six draws, 1, 2 and 4 tokens; MXFP4 at one token.
#   3. The GPU tests of both (placed decode; the GEMV's dependent-launch variants).
# About 5 minutes. Run from the repository root on the GPU machine (writes to $OUT):
#   bash docs/perf/2026-12-05-h200-confirm/scratch/next_call.sh
# Five files come back: versions.txt, gpu_tests.log, ab_placed.log, pdl_fp8.log, pdl_mxfp4.log.
set -u
R=docs/perf/2026-12-05-ready-slots/scratch
export PYTHONPATH=$PWD:$PWD/tools:$R
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name(0))' > "$OUT/versions.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >> "$OUT/versions.txt"
git log --oneline -1 >> "$OUT/versions.txt" 2>&1
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fp8_placed.py \
    tests/kernels/test_grouped_decode.py tests/kernels/test_decode_kernels.py \
    -k "placed or e4m3 or fc1_and_fc2 or pdl" > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests: rc=$?"
# Field 14 is `placed`: 0 is the natural layout, the arm's default (placed) is timed beside it.
timeout 240 python3 tools/bench_grouped_decode.py /tmp/ab --precision w8a16 \
    --tokens 2,4,8,16,32,64 --seeds 0,1,2 --rank 0,1 \
    --variants "dot:-:-:-:-:-:-:-:-:-:-:-:-:0" --variant-tokens 2,4,8,16,32,64 > "$OUT/ab_placed.log" 2>&1
echo "ab: rc=$?"
timeout 120 python3 "$R/ready_bench.py" --tokens 1,2,4 --seeds 0,1,2,3,4,5 --kinds pdl,pdl_local \
    > "$OUT/pdl_fp8.log" 2>&1
echo "pdl fp8: rc=$?"
timeout 60 python3 "$R/ready_bench.py" --precision w4a16 --tokens 1 --seeds 0,1,2,3,4,5 \
    --kinds pdl_local > "$OUT/pdl_mxfp4.log" 2>&1
echo "pdl mxfp4: rc=$?"
tail -1 "$OUT/gpu_tests.log"
grep -v "^precision=" "$OUT/ab_placed.log" | tail -30
for f in pdl_fp8 pdl_mxfp4; do
    echo "== $f"
    grep -v "^w[48]a16 T=" "$OUT/$f.log" | tail -14
done
