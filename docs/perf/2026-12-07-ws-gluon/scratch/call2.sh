# Second call (thirty-fourth session): the warp-specialised Gluon probe (mx_ws.py) checked and
# timed beside the arm's MXFP4 tile and the earlier tiled probe, 32 and 64 tokens, draws 0 and 1,
# rank 0, on 4, 2 and 8 stages (80 registers a thread at launch: 3 programs an SM at 4 stages).
#   bash docs/perf/2026-12-07-ws-gluon/scratch/call2.sh
set -u
D=docs/perf/2026-12-07-ws-gluon/scratch
export PYTHONPATH=$PWD:$PWD/tools:$PWD/$D
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $OUT/gpu.txt
timeout 300 python3 $D/ws_bench.py --tokens 32,64 --seeds 0,1 --rank 0 \
  --variants 4:80,2:80,8:80 > $OUT/ws_bench.log 2>&1
echo "bench rc=$?"
grep "fc1+fc2\|error\|failed\|False\|Error\|not timed" $OUT/ws_bench.log | tail -40
