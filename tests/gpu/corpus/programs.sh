# SPDX-License-Identifier: MIT
# programs.sh - the step-detection corpus: one line per program, sourced by record.sh.
#   corpus_programs: prints "NAME|TRUTH|COMMAND[|SKIP]" lines; COMMAND runs from the repo root; SKIP
#   (default 10) is the skip_first record.sh check gives both runs, past automatic detection's lock
#   on that program (measured on an H100: graphs_infer locks in iteration 35, jax_train in 126).
# TRUTH is a marker (KIND:PATTERN) that the program hits once at the start of every true
# iteration; it is never a detector token (docs/STEPS.md, "Recording token streams").
# Programs under torchrun (ddp_train, nanogpt_ddp) are listed only with CORPUS_GPUS=2 or more: every
# rank records its own stream, NAME.rank<R>.tokens (rankenv.sh); `--nproc_per_node N` in COMMAND
# tells record.sh and tests/e2e/autostep_corpus.sh how many ranks to expect.
# Third-party programs live under .thirdparty/ (fetched, not committed: README in this folder).
corpus_programs() {
	local C=tests/gpu/corpus T=api:cuGetErrorName
	echo "graphs_infer|$T|python3 $C/graphs_infer.py 300|50"
	echo "graphs_train|$T|python3 $C/graphs_train.py 300|40"
	echo "datadep|$T|python3 $C/datadep.py 200"
	echo "warmup_growth|$T|python3 $C/warmup_growth.py 120|25"
	echo "jax_train|$T|python3 $C/jax_train.py 300|150"
	echo "cublas_loop|$T|$CORPUS_BIN/cublas_loop 200"
	[ "${CORPUS_GPUS:-1}" -ge 2 ] &&
		echo "ddp_train|$T|torchrun --standalone --nproc_per_node 2 --no-python $C/rankenv.sh python3 $C/ddp_train.py 200 50 1|25"
	[ -f .thirdparty/nanoGPT/train.py ] && {
		echo "nanogpt_eval|$T|python3 $C/nanogpt_run.py .thirdparty/nanoGPT --compile=False --max_iters=100 --eval_interval=25 --eval_iters=10 --gradient_accumulation_steps=1"
		echo "nanogpt_accum|$T|python3 $C/nanogpt_run.py .thirdparty/nanoGPT --compile=False --max_iters=60 --eval_interval=1000 --eval_iters=5 --gradient_accumulation_steps=4"
		[ "${CORPUS_GPUS:-1}" -ge 2 ] &&
			echo "nanogpt_ddp|$T|torchrun --standalone --nproc_per_node 2 --no-python $C/rankenv.sh python3 $C/nanogpt_run.py .thirdparty/nanoGPT --compile=False --max_iters=80 --eval_interval=40 --eval_iters=5 --gradient_accumulation_steps=2"
		echo "nanogpt_compile|$T|python3 $C/nanogpt_run.py .thirdparty/nanoGPT --compile=True --max_iters=100 --eval_interval=50 --eval_iters=10 --gradient_accumulation_steps=1"
	}
	[ -x .thirdparty/llm.c/train_gpt2cu ] &&
		echo "llmc|nvtx:Train step*|.thirdparty/llm.c/train_gpt2cu -i $CORPUS_BIN/llmc/train.bin -j $CORPUS_BIN/llmc/val.bin -e d6 -b 8 -t 256 -x 60 -v 20 -m 20 -s 0 -h 0"
	return 0
}
