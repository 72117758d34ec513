# Call 1 of the thirtieth session (2026-12-07): the MXFP4 tile's scale bytes biased
# (`Launch.mx_biased_scales`; the twenty-ninth session's call4.sh, which never found a machine)
# against the arm (values in K order, packed bytes and scales) at 4-64 tokens, two draws, both
# ranks; if the biased bytes were faster at every count, the gated scenario on them; then how
# evenly fc1's and fc2's programs load the SMs (Nsight Compute: each SM's active cycles, the
# longest against the mean; fc2's 720 programs at 64 tokens are 5.45 an SM, so 60 SMs run 6 and
# 72 run 5) and where their warps wait; last, 4 and 5 stages on the one-pass MXFP4 tile. Each
# after the first where the call's time allows (CALL_END, seconds since the epoch).
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
B=":-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:1"
BENCH_TIME_BUDGET_S=90 timeout 150 python3 tools/bench_grouped_decode.py /tmp/bs --precision w4a16 \
  --tokens 4,8,16,32,64 --seeds 0,1 --rank 0,1 --variants "dot$B" \
  --variant-tokens 4,8,16,32,64 > $OUT/biased.log 2>&1
echo "bench rc=$?"; grep -A24 "^slowest" $OUT/biased.log | grep grouped_decode
python3 - $OUT/biased.log > $OUT/decision.txt <<'PY'
import re, sys
rows = re.findall(r"^\s+w4a16\s+(\d+) grouped_decode dot m16 n64 k128 w4 (s\d) .*biased[^\n]*"
                  r"mean ([\d.]+)\s+([+-][\d.]+)%", open(sys.argv[1]).read(), re.M)
own = {int(t): float(c) for t, s, _, c in rows if (s == "s3") == (int(t) >= 16)}
print(own)
print("TAKE" if sorted(own) == [4, 8, 16, 32, 64] and all(c < 0 for c in own.values()) else "KEEP")
PY
cat $OUT/decision.txt
if grep -q TAKE $OUT/decision.txt; then
  sed -i 's/^MX_BIASED_SCALES = False$/MX_BIASED_SCALES = True/' moebench/kernels/grouped_launch.py
  grep -n "^MX_BIASED_SCALES" moebench/kernels/grouped_launch.py
  if [ $(( ${CALL_END:-0} - $(date +%s) )) -gt 250 ]; then
    DEADLINE=$(( $(date +%s) + 245 )) PER_RUN_TIMEOUT=240 bash tools/gpu_run.sh /tmp/g scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
    echo "gated rc=$?"; tail -2 $OUT/gpu_run.log; cp /tmp/g/gpu_run.tgz /tmp/g/summary.txt $OUT/
  else
    echo "gated: no time left in this call"
  fi
fi
# The balance and the stalls last but one, in whatever time the call has left (each about 25 s).
M="gpu__time_duration.sum,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min"
M="$M,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size"
M="$M,launch__occupancy_limit_registers,sm__warps_active.avg.pct_of_peak_sustained_active"
for k in grouped-mxfp4:_grouped_dot_mxfp4 grouped:_grouped_dot_fp8; do
  [ $(( ${CALL_END:-0} - $(date +%s) )) -gt 120 ] || { echo "ncu ${k%%:*}: no time left"; continue; }
  f=$OUT/ncu_balance_${k%%:*}.txt
  timeout 60 ncu --clock-control none --launch-skip 2 --launch-count 2 -k regex:${k#*:} \
    --metrics $M python3 tools/ncu_kernels.py ${k%%:*} > $f 2>&1
  echo "ncu balance ${k%%:*} rc=$?"; grep -E "^\s+(gpu__|sm__|dram__|launch__)" $f
  f=$OUT/ncu_stalls_${k%%:*}.txt
  timeout 90 ncu --clock-control none --launch-skip 2 --launch-count 2 -k regex:${k#*:} \
    --section WarpStateStats --section SpeedOfLight --section Occupancy \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    python3 tools/ncu_kernels.py ${k%%:*} > $f 2>&1
  echo "ncu stalls ${k%%:*} rc=$?"
  grep -E "issue_stalled|Duration|DRAM Throughput|Achieved Occupancy" $f | awk '$NF+0 >= 0.3 || !/issue_stalled/'
done
# Deeper pipelines for the arm's one-pass MXFP4 tile (16-64 tokens): 4 and 5 stages against its 3
# (28 and 35 KB of shared memory a program, still 6 programs an SM at 80 registers), last, in
# whatever time the call has left.
left=$(( ${CALL_END:-0} - $(date +%s) - 15 ))
if [ $left -gt 40 ]; then
  BENCH_TIME_BUDGET_S=$(( left - 25 )) timeout $left python3 tools/bench_grouped_decode.py /tmp/st \
    --precision w4a16 --tokens 16,32,64 --seeds 0,1 --rank 0,1 --variants "dot:-:-:-:-:4,dot:-:-:-:-:5" \
    --variant-tokens 16,32,64 > $OUT/stages.log 2>&1
  echo "stages rc=$?"; grep -A12 "^slowest" $OUT/stages.log | grep grouped_decode
else
  echo "stages: no time left in this call"
fi
