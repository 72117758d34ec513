# The most a finer-grained fc1 -> fc2 wait could save: fc2's tile without its dependent-launch
# wait (a timing ablation, wrong outputs on purpose), 16, 32 and 64 tokens, two draws, both ranks.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 400 python3 docs/perf/2026-12-06-expert-ready/scratch/nowait.py --tokens 16,32,64 --seeds 0,1 > $OUT/nowait.log 2>&1; echo "rc=$?"
cat $OUT/nowait.log
