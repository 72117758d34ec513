# First call (twenty-fifth session): the sparse GEMV's expert-by-expert wait. Its tests compiled on
# the GPU (the graph-replay test among them), the sparse step A/B (the arm against ready,
# ready_peel2 and, from 2 tokens, pdl_local) at 1, 2 and 4 tokens, four draws, both ranks, then
# the one-token timeline of the arm's step and ready's side by side. About 7 minutes.
set -u
S=docs/perf/2026-12-06-sparse-ready/scratch
export PYTHONPATH=$PWD:$PWD/tools:$PWD/$S
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_expert_ready.py -k sparse > $OUT/gpu_sparse_ready_tests.txt 2>&1
echo "gpu tests rc=$?"; tail -2 $OUT/gpu_sparse_ready_tests.txt
timeout 260 python3 $S/ready_bench.py > $OUT/ready_w8a16.log 2>&1; echo "bench rc=$?"
grep -A16 "^slowest rank" $OUT/ready_w8a16.log
timeout 120 python3 $S/ready_timeline.py --tokens 1 --seeds 0,2 > $OUT/timeline.log 2>&1
echo "timeline rc=$?"; grep -A5 "^T=1 seed=0 rank=0" $OUT/timeline.log | cut -c1-330
