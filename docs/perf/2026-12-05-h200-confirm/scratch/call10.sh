# The tenth call: the FP8 one-pass tile at 64 registers (8 programs an SM, sm_90a: no spill) on
# 5 or 4 stages, and at 72 (7 programs) on 5, against the arm's 80 registers on 6 stages. If the
# 64-register, 5-stage tile is faster in every draw at 16, 32 and 64 tokens, scratch/regs64.patch
# (the arm's launch so) is applied here and the gated scenario runs on it.
set -u
export PYTHONPATH=$PWD:$PWD/tools
START=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 150 python3 tools/bench_grouped_decode.py /tmp/r64 --precision w8a16 --tokens 16,32,64 \
  --seeds 0,1,2 --rank 0,1 --variants "dot:-:-:64:-:5:-:1:64,dot:-:-:64:-:4:-:1:64,dot:-:-:64:-:5:-:1:72" \
  --variant-tokens 16,32,64 > $OUT/regs.log 2>&1; echo "bench rc=$?"
sed -n '/slowest of ranks/,$p' $OUT/regs.log | grep -v "dense_decode\|sparse_decode"
python3 - "$OUT/regs.log" > $OUT/decision.txt <<'PY'
import re, sys
text = open(sys.argv[1]).read()
want = "dot m16 n64 k64 w4 s5 pdl tma r64 passes eb placed"
ok = True
for t in (16, 32, 64):
    draws = {}
    for name in ("default", want):
        m = re.search(rf"^  w8a16 {t:2d} grouped_decode {re.escape(name)}: (.*?)  mean", text, re.M)
        draws[name] = [float(v.split(":")[1]) for v in m[1].split()] if m else []
    wins = sum(a < b for a, b in zip(draws[want], draws["default"]))
    print(f"{t} tokens: {wins} of {len(draws['default'])} draws faster")
    ok &= bool(draws["default"]) and wins == len(draws["default"]) == len(draws[want])
print("apply" if ok else "keep")
PY
cat $OUT/decision.txt
if [ "$(tail -1 $OUT/decision.txt)" = apply ]; then
  git apply docs/perf/2026-12-05-h200-confirm/scratch/regs64.patch && echo "patch applied"
  export DEADLINE=$(( START + 300 )) PER_RUN_TIMEOUT=250
  bash tools/gpu_run.sh /tmp/g scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
  cp /tmp/g/gpu_run.tgz $OUT/ 2>/dev/null; cat /tmp/g/summary.txt
fi
