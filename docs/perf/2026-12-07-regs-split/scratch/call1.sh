# Call 1 of the thirty-first session (2026-12-07): the thirtieth session's call2.sh (never run:
# its device time ran out), then, where a variant was faster at every count of its regime, the
# gated scenario with it as the arm's default.
# - The MXFP4 tiles on fewer registers a thread, so that an SM holds more of them (the thirtieth
#   session's bench: a one-pass tile's time hardly depends on how many tiles share its SM). Offline
#   (sm_90a, ../../2026-12-07-biased-scales/offline/sass_regs.txt): one pass a program (16-64
#   tokens; the arm: 80 registers, 3 stages, 6 an SM) at 64 registers 8 an SM, no local loads or
#   stores in the weight loop; the expert loop (4-8 tokens; the arm: 128 registers, 4 stages, 4 an
#   SM) at 80 registers 6 an SM, spilling outside the weight loop only.
# - fc2 split in K over 2 programs a row block (`Launch.split_k`), at 80 and 64 registers, fc2
#   only, 16-64 tokens: 1,440 tiles of half the steps where fc2 had 720. Timed, not decided here.
# The decision (decide.py below), per regime: the variant faster at every count of it (4-8: the
# expert loop; 16-64: one pass), the lowest mean change among those; it sets
# TILE_MXFP4_MAX_REGISTERS / TILE_MXFP4_STAGES or PASS_GRID_MXFP4_MAX_REGISTERS / PASS_GRID_STAGES
# in the device's copy, and the gated scenario runs where the call has 250 s left (CALL_END).
set -u
export PYTHONPATH=$PWD:$PWD/tools
CALL_END=${CALL_END:-$(( $(date +%s) + 590 ))}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
BENCH_TIME_BUDGET_S=${BUDGET:-130} timeout ${LIMIT:-185} python3 tools/bench_grouped_decode.py /tmp/rg \
  --precision w4a16 --tokens 4,8,16,32,64 --seeds 0,1 --rank 0,1 \
  --variants "dot:-:-:-:-:-:-:-:80,dot:-:-:-:-:-:-:-:64,dot:-:-:-:-:2:-:-:64" \
  --variant-tokens 4,8,16,32,64 > $OUT/regs.log 2>&1
echo "bench rc=$?"; grep -A40 "^slowest" $OUT/regs.log | grep grouped_decode
S=":-:-:-:-:-:-:-:-:-:2"  # fields 13-21 the arm's, field 22 (split) 2
BENCH_TIME_BUDGET_S=${BUDGET2:-70} timeout ${LIMIT2:-115} python3 tools/bench_grouped_decode.py /tmp/sk \
  --precision w4a16 --tokens 16,32,64 --seeds 0,1 --rank 0,1 \
  --variants "dot:-:-:-:-:-:-:-:-:-:-:2$S,dot:-:-:-:-:-:-:-:64:-:-:2$S" --variant-tokens 16,32,64 \
  > $OUT/split.log 2>&1
echo "split rc=$?"; grep -A20 "^slowest" $OUT/split.log | grep grouped_decode
python3 docs/perf/2026-12-07-regs-split/scratch/decide.py $OUT/regs.log > $OUT/decision.txt
cat $OUT/decision.txt
if grep -q "^SET" $OUT/decision.txt; then
  grep "^SET" $OUT/decision.txt | while read -r _ name value; do
    sed -i "s/^$name = [0-9]*$/$name = $value/" moebench/kernels/grouped_launch.py
  done
  grep -n "^TILE_MXFP4_\|^PASS_GRID_MXFP4_\|^PASS_GRID_STAGES" moebench/kernels/grouped_launch.py
  if [ $(( CALL_END - $(date +%s) )) -gt 250 ]; then
    DEADLINE=$(( $(date +%s) + 245 )) PER_RUN_TIMEOUT=240 bash tools/gpu_run.sh /tmp/g scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
    echo "gated rc=$?"; tail -2 $OUT/gpu_run.log; cp /tmp/g/gpu_run.tgz /tmp/g/summary.txt $OUT/
  else
    echo "gated: $(( CALL_END - $(date +%s) )) s left in this call, not run"
  fi
fi
