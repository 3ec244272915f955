# SPDX-License-Identifier: MIT
# bash completion for stepprof, installed as share/bash-completion/completions/stepprof (or
# `source` it). Commands, options and their values come from `stepprof --complete [CMD]`, which
# prints the same option tables that each command parses and that its --help shows (cli/opts.h):
# "operands KIND" (TRACE, INI, FILE, CMD or -), then "--NAME ARG" per option (ARG "-": no value;
# "a|b|c": those values; FILE, TRACE, INI, DIR...: a path).
_stepprof_paths() { # _stepprof_paths KIND CUR: complete a path of that kind
	case $1 in
	TRACE | *TRACE) COMPREPLY=($(compgen -f -X '!*.sptrace' -- "$2") $(compgen -d -- "$2")) ;;
	INI) COMPREPLY=($(compgen -f -X '!*.ini' -- "$2") $(compgen -d -- "$2")) ;;
	DIR) COMPREPLY=($(compgen -d -- "$2")) ;;
	FILE | FILE\|DIR/ | TRACE\|*) COMPREPLY=($(compgen -f -- "$2")) ;;
	CMD) COMPREPLY=($(compgen -c -- "$2")) ;;
	*) COMPREPLY=() ;;
	esac
}
_stepprof() {
	local cur prev cmd table arg i
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD - 1]}
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W "$(command "${COMP_WORDS[0]}" --complete 2>/dev/null) --help --version" -- "$cur"))
		return
	fi
	cmd=${COMP_WORDS[1]}
	table=$(command "${COMP_WORDS[0]}" --complete "$cmd" 2>/dev/null) || return
	# after `run ... --`, complete the command being profiled
	for ((i = 2; i < COMP_CWORD; i++)); do
		if [ "${COMP_WORDS[i]}" = "--" ]; then
			COMPREPLY=($(compgen -c -- "$cur"))
			return
		fi
	done
	# the value of the option before: its listed values, or a path of its kind
	arg=$(awk -v o="$prev" '$1 == o { print $2 }' <<<"$table")
	case $prev in -c) arg=$(awk '$1 == "--config" { print $2 }' <<<"$table") ;; -o) arg=$(awk '$1 == "--output" { print $2 }' <<<"$table") ;; -n) arg=N ;; esac
	if [ -n "$arg" ] && [ "$arg" != - ]; then
		# lower-case words are the values it takes; an upper-case one (N, FILE, DIR/) is a metavar
		local words=() w
		for w in ${arg//|/ }; do [[ $w == *[a-z]* ]] && words+=("$w"); done
		if [ ${#words[@]} -gt 0 ]; then
			COMPREPLY=($(compgen -W "${words[*]}" -- "$cur"))
		else
			_stepprof_paths "$arg" "$cur"
		fi
		return
	fi
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$(awk '$1 ~ /^--/ { print $1 }' <<<"$table")" -- "$cur"))
		return
	fi
	_stepprof_paths "$(awk '$1 == "operands" { print $2 }' <<<"$table")" "$cur"
}
complete -o filenames -F _stepprof stepprof
