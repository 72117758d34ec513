# Call 1 (2026-12-02, eighth session): the grouped tile's launch at 2-8 tokens, two routing draws.
set -x
V="dot:16:32:128:4:4,dot:16:32:128:4:4:-:-:0,-:-:-:-:-:4:-:1:96,-:-:-:-:-:4:-:1:96:0,dot:16:64:128:8:4,dot:16:32:128:8:4,dot:16:16:128:4:4,dot:16:64:128:4:4:-:-:0"
nvidia-smi --query-gpu=name,driver_version --format=csv
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
PYTHONPATH=$PWD python3 tools/bench_grouped_decode.py $OUT/seed0 --tokens 2,4,8 --variants "$V" --variant-tokens 2,4,8 > $OUT/bench_seed0.log 2>&1
PYTHONPATH=$PWD python3 tools/bench_grouped_decode.py $OUT/seed1 --tokens 2,4,8 --variants "$V" --variant-tokens 2,4,8 --scenario docs/perf/2026-12-02-low-counts/scratch/seed1.yaml > $OUT/bench_seed1.log 2>&1
tail -30 $OUT/bench_seed0.log; tail -30 $OUT/bench_seed1.log
