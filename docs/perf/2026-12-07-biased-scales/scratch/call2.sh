# Call 2 of the thirtieth session (2026-12-07; prepared, not run: the session's device time ran
# out): the MXFP4 tiles with fewer registers a thread, so that an SM holds more of them. Why: call
# 1's bench says a one-pass tile's time hardly depends on how many tiles share its SM (fc2 36.0 us
# with 495 tiles against 38.0 with 720), so more tiles an SM may move more bytes.
# Offline (sm_90a, offline/sass_regs.txt; local loads and stores in a weight loop only where said):
# - one pass a program (16-64 tokens; the arm: 80 registers, 3 stages, 6 programs an SM): 64
#   registers on 3 stages, 8 programs an SM, 254 / 267 instructions a step (fc1 / fc2) against
#   249 / 249; on 2 stages 250 / 241;
# - the expert loop (4-8 tokens; the arm: 128 registers, 4 stages, 4 programs an SM): 80 on 4
#   stages, 6 an SM (261 / 256 against 255 / 248; 112 / 40 bytes of stack, spilled outside the
#   weight loop); 64 on 4 stages, 7 an SM (shared memory), fc1 spilling in its loop (7 local
#   loads and 2 stores a step, 275 instructions); 64 on 2, 8 an SM (242 / 242).
# Then fc2 split in K over 2 programs a row block (`Launch.split_k`, built after call 1; offline
# 80 registers, 6 an SM, 256 instructions a step), at 80 and at 64 registers, fc2 only, 16-64
# tokens: 1,440 tiles of half the steps where fc2 had 720.
# The bench at 4-64 tokens, draws 0 and 1, both ranks; the same three variants at every count (a
# variant equal to the arm's launch is skipped and said); then the split at 16-64.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
BENCH_TIME_BUDGET_S=${BUDGET:-150} timeout ${LIMIT:-210} python3 tools/bench_grouped_decode.py /tmp/rg \
  --precision w4a16 --tokens 4,8,16,32,64 --seeds 0,1 --rank 0,1 \
  --variants "dot:-:-:-:-:-:-:-:80,dot:-:-:-:-:-:-:-:64,dot:-:-:-:-:2:-:-:64" \
  --variant-tokens 4,8,16,32,64 > $OUT/regs.log 2>&1
echo "bench rc=$?"; grep -A40 "^slowest" $OUT/regs.log | grep grouped_decode
S=":-:-:-:-:-:-:-:-:-:2"  # fields 13-21 the arm's, field 22 (split) 2
BENCH_TIME_BUDGET_S=${BUDGET2:-90} timeout ${LIMIT2:-140} python3 tools/bench_grouped_decode.py /tmp/sk \
  --precision w4a16 --tokens 16,32,64 --seeds 0,1 --rank 0,1 \
  --variants "dot:-:-:-:-:-:-:-:-:-:-:2$S,dot:-:-:-:-:-:-:-:64:-:-:2$S" --variant-tokens 16,32,64 \
  > $OUT/split.log 2>&1
echo "split rc=$?"; grep -A20 "^slowest" $OUT/split.log | grep grouped_decode
