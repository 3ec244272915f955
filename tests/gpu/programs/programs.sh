# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# programs.sh - the unseen-program suite, one line per program, sourced by run.sh:
#   suite_programs prints "NAME|ITERS|TAGS|TRUTH|COMMAND". ITERS: the true iterations the program
#   marks (truth.mark: cuGetErrorName at the start of each); TAGS: opt (a PyTorch training loop:
#   its optimizer steps are the default's boundaries, and `kind = optimizer` applies); TRUTH: the
#   explicit marker that is the truth (KIND:PATTERN); COMMAND runs from the repository root, {dir}
#   standing for the run's own folder. The default schedule (wait 10, warmup 1, active 3: steps
#   11-13 from where numbering starts) fits every program with room for a late start.
#   llm.c is listed when LLMC_BIN (its train_gpt2cu) and LLMC_DATA (llmc_data.py's folder) are set.
#   PROG_PY: the Python that runs the programs (python3; the host test puts a stand-in there).
suite_programs() {
	local P=tests/gpu/programs C=tests/gpu/corpus T=api:cuGetErrorName python3=${PROG_PY:-python3}
	echo "hf_trainer|60|opt|$T|$python3 $P/hf_trainer.py"
	echo "lightning_val|80|opt|$T|$python3 $P/lightning_val.py"
	echo "lightning_accum|40|opt|$T|$python3 $P/lightning_val.py --steps 40 --accum 2"
	echo "gradscaler_resnet|80|opt|$T|$python3 $P/gradscaler_resnet.py"
	echo "gradscaler_inf|80|opt|$T|$python3 $P/gradscaler_resnet.py --inf-every 7"
	echo "accum_eval|60|opt|$T|$python3 $P/accum_eval.py"
	echo "accelerate_accum|45|opt|$T|$python3 $P/accelerate_accum.py"
	echo "gan|60|opt|$T|$python3 $P/gan.py"
	echo "wgan|40|opt|$T|$python3 $P/wgan.py"
	echo "compile_train|60|opt|$T|$python3 $P/compile_train.py"
	echo "compile_infer_graphs|40||$T|$python3 $P/compile_infer_graphs.py 40"
	echo "compile_infer_graphs_300|300||$T|$python3 $P/compile_infer_graphs.py 300"
	echo "peft_lora|60|opt|$T|$python3 $P/peft_lora.py"
	echo "timm_train|60|opt|$T|$python3 $P/timm_train.py"
	echo "rl_phases|30|opt|$T|$python3 $P/rl_phases.py"
	echo "profiler_in_program|30|opt|$T|$python3 $P/profiler_in_program.py --steps 30 --skip-first 8 --json {dir}/kineto.json"
	echo "jax_train|300||$T|$python3 $C/jax_train.py 300"
	if [ -n "${LLMC_BIN:-}" ] && [ -x "$LLMC_BIN" ] && [ -n "${LLMC_DATA:-}" ]; then
		echo "llmc|60||nvtx:Train step*|$LLMC_BIN -i $LLMC_DATA/train.bin -j $LLMC_DATA/val.bin -e d6 -b 8 -t 256 -x 60 -v 20 -m 20 -s 0 -h 0"
	fi
	return 0
}
