# Call 1 of the thirty-second session (2026-12-07): the MXFP4 one-pass tile on the persistent grid
# that splits every tile's K steps evenly over its programs (`Launch.stream_k`,
# moebench/kernels/stream_k.py), at 6 programs an SM (80 registers, the arm's cap), 7 (72) and 8
# (64; 3 and 2 stages), against the arm's launch, 16-64 tokens, two draws, both ranks; first the
# grid's kernel tests on the GPU (bitwise against the one-pass grid where sums are exact, the
# counters back to zero, refusals).
set -u
export PYTHONPATH=$PWD:$PWD/tools
CALL_END=${CALL_END:-$(( $(date +%s) + 400 ))}
left() { echo $(( CALL_END - $(date +%s) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_grouped_decode.py \
  -k "persistent or stream_k" > $OUT/gpu_tests.txt 2>&1
echo "tests rc=$?"; tail -3 $OUT/gpu_tests.txt
V=":-:-:-:-:-:-:-:-:-:-:-:-:-"  # fields 10-22 the arm's
BENCH_TIME_BUDGET_S=$(( $(left) - 90 )) timeout $(( $(left) - 15 )) python3 tools/bench_grouped_decode.py /tmp/sk \
  --precision w4a16 --tokens 16,32,64 --seeds 0,1 --rank 0,1 \
  --variants "dot:-:-:-:-:-:-:-:-$V:6,dot:-:-:-:-:-:-:-:72$V:7,dot:-:-:-:-:-:-:-:64$V:8,dot:-:-:-:-:2:-:-:64$V:8" \
  --variant-tokens 16,32,64 > $OUT/stream.log 2>&1
echo "bench rc=$?"; grep -A30 "^slowest" $OUT/stream.log | grep -v "^\s*$"
