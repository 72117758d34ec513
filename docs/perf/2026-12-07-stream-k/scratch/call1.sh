# Call 1 of the thirty-second session (2026-12-07), parts in order, each where the call's time
# (CALL_END, seconds since the epoch) allows:
# 1. On the GPU: the persistent grid's kernel tests (bitwise against the one-pass grid where sums
#    are exact, counters back to zero, refusals).
# 2. The MXFP4 one-pass tile on the persistent grid that splits every tile's K steps evenly
#    (`Launch.stream_k`, moebench/kernels/stream_k.py): 6 programs an SM (80 registers, the arm's
#    cap), 7 (72) and 8 (64; 3 and 2 stages), against the arm's launch, 16-64 tokens, two draws,
#    both ranks (BENCH_S seconds of variants at most; VARIANTS replaces the list).
# 3. decide.py: the variant faster at every count with the lowest mean change; where one won and
#    GATED_S seconds are left, the gated scenario with it as the default (call2.sh).
# 4. Otherwise, where time is left: the MXFP4 grouped tile's kernel tests (the scale pair as one
#    multiply, 4a21460, never yet run on a GPU), then the scale pair's old line (shifts and an or,
#    sed) against part 2's arm rows, arms only (dense and sparse, which neither touches, the
#    drift control).
set -u
export PYTHONPATH=$PWD:$PWD/tools
CALL_END=${CALL_END:-$(( $(date +%s) + 540 ))}
left() { echo $(( CALL_END - $(date +%s) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout ${TESTS_S:-60} python3 -m pytest -q -p no:cacheprovider tests/kernels/test_grouped_decode.py \
  -k "persistent or stream_k" > $OUT/gpu_tests.txt 2>&1
echo "tests rc=$?"; tail -3 $OUT/gpu_tests.txt
V=":-:-:-:-:-:-:-:-:-:-:-:-:-"  # fields 10-22 the arm's
BENCH_TIME_BUDGET_S=${BENCH_S:-150} timeout $(( ${BENCH_S:-150} + 70 )) python3 tools/bench_grouped_decode.py /tmp/sk \
  --precision w4a16 --tokens 16,32,64 --seeds 0,1 --rank 0,1 \
  --variants "${VARIANTS:-dot:-:-:-:-:-:-:-:-$V:6,dot:-:-:-:-:2:-:-:64$V:8,dot:-:-:-:-:-:-:-:64$V:8,dot:-:-:-:-:-:-:-:72$V:7}" \
  --variant-tokens 16,32,64 > $OUT/stream.log 2>&1
echo "bench rc=$?"; grep -A30 "^slowest" $OUT/stream.log | grep -v "^\s*$"
python3 docs/perf/2026-12-07-stream-k/scratch/decide.py $OUT/stream.log > $OUT/decision.txt
cat $OUT/decision.txt
if grep -q "^SET" $OUT/decision.txt && [ $(left) -ge ${GATED_S:-260} ]; then
  env $(grep "^SET" $OUT/decision.txt | cut -d" " -f2-) RUN_S=$(( $(left) - 10 )) \
    bash docs/perf/2026-12-07-stream-k/scratch/call2.sh
  exit 0
fi
if [ $(left) -gt 100 ]; then
  timeout 80 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_grouped_decode.py \
    -k "mxfp4" > $OUT/gpu_tests_mxfp4.txt 2>&1
  echo "mxfp4 tests rc=$?"; tail -3 $OUT/gpu_tests_mxfp4.txt
fi
F=moebench/kernels/mx_rotated.py
NEW="pair = s32 \* 0x00800080  # biased"
OLD="bits = s32 << 7; pair = bits | (bits << 16)  # biased"
if [ $(left) -gt 50 ]; then
  sed -i "s/$NEW/$OLD/" $F; grep -n "# biased bytes" $F
  timeout $(( $(left) - 5 )) python3 tools/bench_grouped_decode.py /tmp/old \
    --precision w4a16 --tokens 16,32,64 --seeds 0,1 --rank 0,1 --variants dot --variant-tokens 1 \
    > $OUT/old_pair.log 2>&1
  echo "old rc=$?"; grep -A40 "^slowest" $OUT/old_pair.log | grep -v "^\s*$"
  sed -i "s/$OLD/pair = s32 * 0x00800080  # biased/" $F
else
  echo "old pair: $(left) s left in this call, not run"
fi
