# Call 1 of the thirty-first session (2026-12-07). Parts in order, each after the first where the
# call's time allows (CALL_END, seconds since the epoch):
# 1. The MXFP4 tiles on fewer registers a thread, so that an SM holds more of them (the thirtieth
#    session's call2.sh, never run: its device time ran out; the thirtieth session's bench: a
#    one-pass tile's time hardly depends on how many tiles share its SM). Offline (sm_90a,
#    ../offline/sass_regs.txt): one pass a program (16-64 tokens; the arm: 80 registers, 3
#    stages, 6 an SM) at 64 registers 8 an SM; the expert loop (4-8 tokens; the arm: 128
#    registers, 4 stages, 4 an SM) at 80 registers 6 an SM, spilling outside the weight loop only.
#    This tree has the scale pair as one multiply (mx_rotated.rotated_tile), so the arm's rows are
#    part 2's "new".
# 2. The scale pair as one multiply against the shifts and the or it replaces (sm_90a: 241
#    instructions a step against 249 on the one-pass tile, 247 / 240 against 255 / 248 on the
#    expert loop; the same bits): the arms alone on the old line (sed), at 8-64 tokens, against
#    part 1's arm rows; dense_decode and sparse_decode, which the line does not touch, say how far
#    the machine drifted between the two runs.
# 3. The gated scenario, on the new line and with part 1's winners (decide.py: per regime, the
#    variant faster at every count of it with the lowest mean change, set in the device's copy of
#    grouped_launch.py; none: the arm as it is).
# 4. fc2 split in K over 2 programs a row block (`Launch.split_k`), at 80 and 64 registers, last.
# A call shorter than 400 s skips part 1 and runs part 2's new line on its own first.
set -u
export PYTHONPATH=$PWD:$PWD/tools
CALL_END=${CALL_END:-$(( $(date +%s) + 590 ))}
left() { echo $(( CALL_END - $(date +%s) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [ $(left) -ge 400 ]; then
  BENCH_TIME_BUDGET_S=${BUDGET:-115} timeout ${LIMIT:-165} python3 tools/bench_grouped_decode.py /tmp/rg \
    --precision w4a16 --tokens 4,8,16,32,64 --seeds 0,1 --rank 0,1 \
    --variants "dot:-:-:-:-:-:-:-:80,dot:-:-:-:-:-:-:-:64,dot:-:-:-:-:2:-:-:64" \
    --variant-tokens 4,8,16,32,64 > $OUT/regs.log 2>&1
  echo "bench rc=$?"; grep -A40 "^slowest" $OUT/regs.log | grep -v "^\s*$"
  python3 docs/perf/2026-12-07-regs-split/scratch/decide.py $OUT/regs.log > $OUT/decision.txt
  cat $OUT/decision.txt
else
  # A short call (the session's device time): part 1 not run; part 2's "new" run on its own.
  echo "regs: $(left) s left in this call, not run" | tee $OUT/decision.txt
  timeout 90 python3 tools/bench_grouped_decode.py /tmp/new \
    --precision w4a16 --tokens 8,16,32,64 --seeds 0,1 --rank 0,1 --variants dot --variant-tokens 1 \
    > $OUT/new_pair.log 2>&1
  echo "new rc=$?"; grep -A40 "^slowest" $OUT/new_pair.log | grep -v "^\s*$"
fi
F=moebench/kernels/mx_rotated.py
NEW="pair = s32 \* 0x00800080  # biased"
OLD="bits = s32 << 7; pair = bits | (bits << 16)  # biased"
sed -i "s/$NEW/$OLD/" $F; grep -n "# biased bytes" $F
# No variant: the only one is at 1 token, which this run does not sweep.
timeout $(( $(left) > 330 ? 90 : 60 )) python3 tools/bench_grouped_decode.py /tmp/old \
  --precision w4a16 --tokens 8,16,32,64 --seeds 0,1 --rank 0,1 --variants dot --variant-tokens 1 \
  > $OUT/old_pair.log 2>&1
echo "old rc=$?"; grep -A40 "^slowest" $OUT/old_pair.log | grep -v "^\s*$"
sed -i "s/$OLD/pair = s32 * 0x00800080  # biased/" $F; grep -n "# biased bytes" $F
if [ ! -f $OUT/new_pair.log ] && [ $(left) -gt 330 ]; then
  # The new line again after the old (part 1's run was first): new, old, new.
  timeout 60 python3 tools/bench_grouped_decode.py /tmp/new \
    --precision w4a16 --tokens 8,16,32,64 --seeds 0,1 --rank 0,1 --variants dot --variant-tokens 1 \
    > $OUT/new_pair.log 2>&1
  echo "new rc=$?"; grep -A40 "^slowest" $OUT/new_pair.log | grep -v "^\s*$"
fi
if grep -q "^SET" $OUT/decision.txt; then
  grep "^SET" $OUT/decision.txt | while read -r _ name value; do
    sed -i "s/^$name = [0-9]*$/$name = $value/" moebench/kernels/grouped_launch.py
  done
fi
grep -n "^TILE_MXFP4_\|^PASS_GRID_MXFP4_\|^PASS_GRID_STAGES" moebench/kernels/grouped_launch.py
if [ $(left) -gt 250 ]; then
  DEADLINE=$(( $(date +%s) + 245 )) PER_RUN_TIMEOUT=240 bash tools/gpu_run.sh /tmp/g scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
  echo "gated rc=$?"; tail -2 $OUT/gpu_run.log; cp /tmp/g/gpu_run.tgz /tmp/g/summary.txt $OUT/
else
  echo "gated: $(left) s left in this call, not run"
fi
S=":-:-:-:-:-:-:-:-:-:2"  # fields 13-21 the arm's, field 22 (split) 2
if [ $(left) -gt 60 ]; then
  BENCH_TIME_BUDGET_S=$(( $(left) - 40 )) timeout $(( $(left) - 10 )) python3 tools/bench_grouped_decode.py /tmp/sk \
    --precision w4a16 --tokens 16,32,64 --seeds 0,1 --rank 0,1 \
    --variants "dot:-:-:-:-:-:-:-:-:-:-:2$S,dot:-:-:-:-:-:-:-:64:-:-:2$S" --variant-tokens 16,32,64 \
    > $OUT/split.log 2>&1
  echo "split rc=$?"; grep -A20 "^slowest" $OUT/split.log | grep grouped_decode
else
  echo "split: $(left) s left in this call, not run"
fi
