#!/usr/bin/env bash
# The device call prepared for the session after the eighteenth (issue 28): every A/B of this
# folder's README, in one call of about 4 minutes. Run from the repository root on the GPU
# machine: bash docs/perf/2026-12-05-ready-slots/scratch/next_call.sh   (writes to $OUT)
set -u
D=docs/perf/2026-12-05-ready-slots/scratch
export PYTHONPATH=$PWD:$PWD/tools:$D
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/smi.txt"
git log --oneline -1 > "$OUT/tree.txt" 2>&1
run() {  # name, then the bench's arguments; a timeout each, so one hang costs only its own
    timeout 150 python3 "$D/ready_bench.py" "${@:2}" > "$OUT/$1.log" 2>&1
    echo "$1: rc=$?"
}
run ready --tokens 1 --seeds 0,1,2,3,4,5
run pdl_fp8 --tokens 2,4 --kinds pdl,pdl_local
run pdl_mxfp4 --precision w4a16 --tokens 1,2,4 --kinds pdl_local
run ready_tile --grouped --tokens 16,32,64 --seeds 0,1 --kinds ready,placed,ready_placed
run ready_tile_mx --grouped --precision w4a16 --tokens 16,32,64 --seeds 0,1
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_decode_kernels.py -k pdl \
    > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests: rc=$?"
for f in ready pdl_fp8 pdl_mxfp4 ready_tile ready_tile_mx; do
    echo "== $f"
    grep -v "^w[48]a16 T=" "$OUT/$f.log" | tail -12
done
tail -1 "$OUT/gpu_tests.log"
