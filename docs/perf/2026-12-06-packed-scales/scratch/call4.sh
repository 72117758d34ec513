# Call 4 of the twenty-eighth session's records (run in the twenty-ninth): the MXFP4 tile's scale
# bytes biased (`Launch.mx_biased_scales`, `mx_rotated.biased_scales`: s + 126 stored, so the
# folded decode's multiplier is one shift of the byte; offline 249 instructions a step against 261
# in the K order) against the arm (values in K order, packed bytes and scales), on the arm's
# stages, at 4, 8, 16, 32 and 64 tokens, two draws, both ranks. If faster on the mean at every
# count, this call turns it on in its copy of the tree (grouped_launch.MX_BIASED_SCALES = True,
# the one line the next commit changes) and, where the call's time allows (CALL_END, seconds
# since the epoch), runs the whole gated scenario on it.
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
