# The first call: the grouped FP8 step's program timeline at 16, 32 and 64 tokens (draw 0, both
# ranks), then the FP8 arms' copy shares on this machine (call11.sh of 2026-12-05-h200-confirm).
set -u
export PYTHONPATH=$PWD:$PWD/tools
D=docs/perf/2026-12-05-step-timeline/scratch
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
timeout 240 python3 $D/timeline.py --tokens 16,32,64 --seeds 0 --rank 0,1 --reps 5 --splits 1,2,3 > $OUT/timeline.log 2>&1
echo "timeline rc=$?"; grep -v "^$" $OUT/timeline.log | tail -60
timeout 150 python3 tools/bench_grouped_decode.py /tmp/c1 --precision w8a16 --tokens 1,32,64 --seeds 0,1 --rank 0,1 \
  --variants "dot:-:-:-:-:-:-:-:-:-:-:-:-" --variant-tokens 64 > $OUT/copy_share_w8a16.log 2>&1; echo "share rc=$?"
head -2 $OUT/copy_share_w8a16.log | tail -1; grep -v "^precision=" $OUT/copy_share_w8a16.log | grep -A4 "^prec " | head -5
