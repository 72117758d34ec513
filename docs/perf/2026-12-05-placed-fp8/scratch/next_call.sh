#!/usr/bin/env bash
# The device call prepared in the nineteenth session (issue 28): the FP8 tile reading its weights
# in `fp8_placed`'s layout, first compiled and checked on the GPU, then timed against the arm's
# natural layout (interleaved, three routing draws, both ranks), then Nsight Compute's
# instruction counts and stalls for both (the second method beside the event timer); and the
# expert-loop tile on 96 registers. About 5 minutes. Run from the repository root on the GPU
# machine (writes to $OUT):
#   bash docs/perf/2026-12-05-placed-fp8/scratch/next_call.sh
# Five files come back (the device returns at most 8): versions.txt, gpu_tests.log,
# ab_placed.log, ab_regs96.log and ncu.txt; the benches' JSON stay on the machine (/tmp).
set -u
export PYTHONPATH=$PWD:$PWD/tools
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name(0))' > "$OUT/versions.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >> "$OUT/versions.txt"
git log --oneline -1 >> "$OUT/versions.txt" 2>&1
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fp8_placed.py \
    tests/kernels/test_grouped_decode.py -k "placed or e4m3 or fc1_and_fc2" > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests: rc=$?"
timeout 300 python3 tools/bench_grouped_decode.py /tmp/ab --precision w8a16 \
    --tokens 2,4,8,16,32,64 --seeds 0,1,2 --rank 0,1 \
    --variants "dot:-:-:-:-:-:-:-:-:-:-:-:-:1" --variant-tokens 2,4,8,16,32,64 > "$OUT/ab_placed.log" 2>&1
echo "ab: rc=$?"
# The expert-loop tile (2-8 tokens) capped at 96 registers instead of 128: 5 programs an SM
# instead of 4, no spill for FP8 in either layout, 8 B of stack for MXFP4 (sm_90a, offline);
# the GEMV's launches equal to their defaults are skipped.
timeout 200 python3 tools/bench_grouped_decode.py /tmp/ab96 --tokens 2,4,8 --seeds 0,1 \
    --rank 0,1 --variants="-:-:-:-:-:-:-:-:96,-:-:-:-:-:-:-:-:96:-:-:-:-:1" \
    --variant-tokens 2,4,8 > "$OUT/ab_regs96.log" 2>&1
echo "ab96: rc=$?"
# Two metric sets, each its own ncu run, so that a name this ncu lacks costs only its own set.
M1="gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active"
M1="$M1,dram__throughput.avg.pct_of_peak_sustained_elapsed"
M1="$M1,regex:smsp__average_warps_issue_stalled_(long_scoreboard|math_pipe_throttle|not_selected|barrier|wait)_per_issue_active\.ratio"
M2="sm__inst_executed_pipe_alu.sum,sm__inst_executed_pipe_fma.sum,sm__inst_executed_pipe_fmaheavy.sum"
for k in grouped grouped-placed; do
    for m in 1 2; do
        [ "$m" = 1 ] && M="$M1" || M="$M2"
        echo "== ncu_kernels.py $k, metric set $m" >> "$OUT/ncu.txt"
        timeout 90 ncu --clock-control none -k regex:_grouped_dot --launch-skip 4 --launch-count 2 \
            --metrics "$M" python3 tools/ncu_kernels.py "$k" >> "$OUT/ncu.txt" 2>&1
        echo "ncu $k $m: rc=$?" | tee -a "$OUT/ncu.txt"
    done
done
tail -1 "$OUT/gpu_tests.log"
grep -v "^precision=" "$OUT/ab_placed.log" | tail -30
grep -v "^precision=" "$OUT/ab_regs96.log" | tail -16
