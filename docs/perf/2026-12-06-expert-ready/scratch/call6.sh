# fc2 waiting for fc1 expert by expert (`Launch.expert_ready`: fc1 "signal", fc2 "wait", device
# counters) against the arm's whole-grid wait, 16, 32 and 64 tokens, two draws, both ranks; every
# step checked against the reference and the sentinels before it is timed. Then the same again
# (a second sample of the same cells), and the nowait ablation's bound beside it.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
V="dot:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:1"
for i in 1 2; do
  BENCH_TIME_BUDGET_S=300 timeout 200 python3 tools/bench_grouped_decode.py /tmp/rd$i --precision w8a16 --tokens 16,32,64 \
    --seeds 0,1 --rank 0,1 --variants "$V" --variant-tokens 16,32,64 > $OUT/ready_$i.log 2>&1; echo "bench $i rc=$?"
  grep -A12 "^slowest of ranks" $OUT/ready_$i.log | head -14
  echo "rows checked: $(grep -c 'ok=True sentinels=pass' $OUT/ready_$i.log) pass, $(grep -c 'ok=False\|sentinels=fail' $OUT/ready_$i.log) fail"
done
grep "ready-wait" $OUT/ready_1.log | grep -o "tokens=[0-9]* seed=[0-9] rank=[0-9].*of_copy=[0-9.]*" | sed 's/weight_bytes.*step_us/step_us/' | head -12
