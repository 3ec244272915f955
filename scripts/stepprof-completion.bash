# SPDX-License-Identifier: MIT
# bash completion for stepprof, installed as share/bash-completion/completions/stepprof (or
# `source` it). Commands and options are read from the binary's own --help (never out of date);
# operands complete to traces (*.sptrace), INI files or any file as the command takes them.
_stepprof() {
	local cur prev cmd opts
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD - 1]}
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W "$(command "${COMP_WORDS[0]}" --help 2>/dev/null |
			awk '/^  [a-z]+ /{print $1}') --help --version" -- "$cur"))
		return
	fi
	cmd=${COMP_WORDS[1]}
	# after `run ... --`, complete the command being profiled
	local i
	for ((i = 2; i < COMP_CWORD; i++)); do
		if [ "${COMP_WORDS[i]}" = "--" ]; then
			COMPREPLY=($(compgen -c -- "$cur"))
			return
		fi
	done
	case $prev in
	-c | --config) COMPREPLY=($(compgen -f -X '!*.ini' -- "$cur") $(compgen -d -- "$cur")); return ;;
	-o | --output | --out) COMPREPLY=($(compgen -f -- "$cur")); return ;;
	--sort) COMPREPLY=($(compgen -W "total avg calls max min name self_cuda_time_total cuda_time_total cuda_time device_time_total count" -- "$cur")); return ;;
	--window) COMPREPLY=($(compgen -W "all 0 1 2" -- "$cur")); return ;;
	--kind) COMPREPLY=($(compgen -W "alloc launch nccl all" -- "$cur")); return ;;
	--by) COMPREPLY=($(compgen -W "bytes calls" -- "$cur")); return ;;
	--set | --steps | --count | -n | --top | --ranks | --format) return ;;
	esac
	if [[ $cur == -* ]]; then
		opts=$(command "${COMP_WORDS[0]}" "$cmd" --help 2>/dev/null | grep -o -- '--[a-z][a-z-]*' | sort -u)
		COMPREPLY=($(compgen -W "$opts --help" -- "$cur"))
		return
	fi
	case $cmd in
	check) COMPREPLY=($(compgen -f -X '!*.ini' -- "$cur") $(compgen -d -- "$cur")) ;;
	run | schedule) COMPREPLY=() ;;
	*) COMPREPLY=($(compgen -f -X '!*.sptrace' -- "$cur") $(compgen -d -- "$cur")) ;;
	esac
}
complete -o filenames -F _stepprof stepprof
