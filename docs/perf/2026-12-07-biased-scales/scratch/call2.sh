# Call 2 of the thirtieth session (2026-12-07): the one-pass MXFP4 tile (16-64 tokens) capped at 64
# registers a thread, on 3 stages and on 2, against the arm's 80 (biased scale bytes, K order,
# packed). Offline (sm_90a, offline/sass_regs.txt): 8 programs an SM instead of 6, no local load
# or store in the weight loop, 254 / 267 instructions a step (fc1 / fc2) against 249 / 249 on 3
# stages, 250 / 241 on 2. Why: call 1's bench says a tile's time hardly depends on how many tiles
# share its SM (fc2 36.0 us with 495 tiles against 38.0 with 720), so more tiles an SM may move
# more bytes. The bench at 16, 32 and 64 tokens, draws 0 and 1, both ranks.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
BENCH_TIME_BUDGET_S=${BUDGET:-100} timeout ${LIMIT:-150} python3 tools/bench_grouped_decode.py /tmp/rg \
  --precision w4a16 --tokens 16,32,64 --seeds 0,1 --rank 0,1 \
  --variants "dot:-:-:-:-:-:-:-:64,dot:-:-:-:-:2:-:-:64" --variant-tokens 16,32,64 > $OUT/regs64.log 2>&1
echo "bench rc=$?"; grep -A20 "^slowest" $OUT/regs64.log | grep grouped_decode
