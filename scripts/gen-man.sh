#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gen-man.sh STEPPROF > stepprof.1 - the man page, generated from the help text: `stepprof --help`
# (synopsis and description) and every command's `stepprof CMD --help` (one subsection each), so
# the page can never disagree with the binary. Plain roff (man(7)); no help2man needed.
set -euo pipefail
SP=${1:?usage: gen-man.sh path/to/stepprof}
ver=$("$SP" --version | awk '{print $2}')
# roff: a leading '.' or '\'' would be a request, '\' an escape, '-' in options should be \-
esc() { sed -e 's/\\/\\e/g' -e 's/^\([.'"'"']\)/\\\&\1/' -e 's/-/\\-/g'; }
help=$("$SP" --help)
cmds=$(printf '%s\n' "$help" | awk '/^  [a-z]+ /{print $1}')
cat <<ROFF
.TH STEPPROF 1 "" "stepprof $ver" "User Commands"
.SH NAME
stepprof \\- profile unmodified GPU programs by training step
.SH SYNOPSIS
.B stepprof
.I COMMAND
.RI [ ARGS ]
.br
.B stepprof \\-\\-version
.br
.B LD_PRELOAD=libstepprof.so
.I program
.SH DESCRIPTION
ROFF
printf '%s\n' "$help" | sed -n '/^Profiles/,$p' | esc
echo ".SH COMMANDS"
for c in $cmds; do
	echo ".SS $c"
	echo ".nf"
	"$SP" "$c" --help | esc
	echo ".fi"
done
cat <<'ROFF'
.SH ENVIRONMENT
.TP
.B STEPPROF_CONFIG
the INI file the preloaded library reads
.TP
.B STEPPROF_<SECTION>_<KEY>
overrides one INI key, e.g. STEPPROF_SCHEDULE_WAIT=3
.TP
.B STEPPROF_RUN_ID
the run id (one folder per run); stepprof run sets it for everything it starts
.TP
.B STEPPROF_VERBOSE
1: the library prints the detected period and every step boundary
.SH FILES
.TP
.I PREFIX/lib/libstepprof.so, libstepprof-nomalloc.so
the preloaded collector (with and without malloc hooks)
.TP
.I stepprof-traces/RUN/rankR.HOST.PID.sptrace
the default output: one folder per run, one trace per profiled rank
.TP
.I PREFIX/share/doc/stepprof/
README.md, RECIPES.md (workflows with INI files in recipes/), CONFIG.md, STEPS.md, OUTPUTS.md, FORMAT.md
.SH EXIT STATUS
0 success, 1 runtime failure (unreadable trace, write error), 2 usage or configuration error;
.B stepprof run
returns the status of the command it ran.
.SH SEE ALSO
.BR nsys (1),
torch.profiler
ROFF
