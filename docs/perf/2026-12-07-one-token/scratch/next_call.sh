# Prepared for the next session (one machine start, about 575 s): call4.sh (the combine folded
# into fc2: its GPU tests, then its A/B at one token, FP8 and MXFP4, four draws, both ranks), then
# call3.sh's floors and gated run on whatever card comes (on an H200 that restates issue 28's
# targets where they are set: 85% at 32/64 tokens, 75% at one token, with both Gluon defaults and
# the slot grid). Files come back under distinct names:
#   CALL_END=$(( $(date +%s) + 575 )) bash docs/perf/2026-12-07-one-token/scratch/next_call.sh
set -u
S=docs/perf/2026-12-07-one-token/scratch
CALL_END=${CALL_END:-$(( $(date +%s) + 575 ))}
bash $S/call4.sh
mv $OUT/tests.txt $OUT/fold_tests.txt
echo "call3 with $(( CALL_END - $(date +%s) )) s left"
CALL_END=$CALL_END bash $S/call3.sh
# At most 8 files come back: the run's summary and log go to the output instead.
cat $OUT/summary.txt $OUT/gpu_run.log 2>/dev/null; rm -f $OUT/summary.txt $OUT/gpu_run.log
ls $OUT
