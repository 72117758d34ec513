# Call 3 of the twenty-eighth session: the MXFP4 tile's values stored in its K order
# (`Launch.mx_dot_order`, `mx_dot_order.dot_order_mxfp4`: the slots' operand read as the
# pipeline's copy lays it, no longer loaded, permuted and stored again every step) against the
# arm (packed bytes and scales), on the arm's stages, at 4, 8, 16, 32 and 64 tokens, two draws,
# both ranks.
# If the arm's stages in K order are faster on the mean at every count, this
# call turns it on in its copy of the tree (grouped_launch.MX_DOT_ORDER = True, the one line the
# next commit changes) and, where the call's time allows, runs the whole gated scenario on it.
# The stall reasons of its fc1 are read either way (as call 2).
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=":-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:1"
BENCH_TIME_BUDGET_S=90 timeout 150 python3 tools/bench_grouped_decode.py /tmp/do --precision w4a16 \
  --tokens 4,8,16,32,64 --seeds 0,1 --rank 0,1 --variants "dot$D" \
  --variant-tokens 4,8,16,32,64 > $OUT/dot_order.log 2>&1
echo "bench rc=$?"; grep -A24 "^slowest" $OUT/dot_order.log | grep grouped_decode
python3 - $OUT/dot_order.log > $OUT/decision.txt <<'PY'
import re, sys
rows = re.findall(r"^\s+w4a16\s+(\d+) grouped_decode dot m16 n64 k128 w4 (s\d) .*dot-order[^\n]*"
                  r"mean ([\d.]+)\s+([+-][\d.]+)%", open(sys.argv[1]).read(), re.M)
own = {int(t): float(c) for t, s, _, c in rows if (s == "s3") == (int(t) >= 16)}
print(own)
print("TAKE" if sorted(own) == [4, 8, 16, 32, 64] and all(c < 0 for c in own.values()) else "KEEP")
PY
cat $OUT/decision.txt
# The stall reasons of its fc1 either way (as call 2's of the arm's).
timeout 60 ncu --clock-control none --launch-skip 2 --launch-count 1 -k regex:_grouped_dot_mxfp4 \
  --section WarpStateStats --section SpeedOfLight \
  --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
  python3 tools/ncu_kernels.py grouped-mxfp4-dot > $OUT/ncu_stalls_dot_order_fc1.txt 2>&1
echo "ncu rc=$?"; grep -E "issue_stalled|Duration|DRAM Throughput" $OUT/ncu_stalls_dot_order_fc1.txt | awk '$NF+0 >= 0.3 || /Duration|DRAM/'
if grep -q TAKE $OUT/decision.txt; then
  sed -i 's/^MX_DOT_ORDER = False$/MX_DOT_ORDER = True/' moebench/kernels/grouped_launch.py
  grep -n "^MX_DOT_ORDER" moebench/kernels/grouped_launch.py
  # The gated scenario only where the call's device time (CALL_END, seconds since the epoch)
  # leaves room for it (about 230 s on an H100).
  if [ $(( ${CALL_END:-0} - $(date +%s) )) -gt 250 ]; then
    DEADLINE=$(( $(date +%s) + 245 )) PER_RUN_TIMEOUT=240 bash tools/gpu_run.sh /tmp/g scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
    echo "gated rc=$?"; tail -2 $OUT/gpu_run.log; cp /tmp/g/gpu_run.tgz /tmp/g/summary.txt $OUT/
  else
    echo "gated: no time left in this call"
  fi
fi
