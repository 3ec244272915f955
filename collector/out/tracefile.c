/* SPDX-License-Identifier: MIT */
/* tracefile.c - one trace file of the writer thread (writer_int.h): making it (and the output
 * directory), writing events to it, its failures (a write that fails, the file removed while it is
 * written), and what they lost, said at stop. Writer thread only, except sp_writer_make_dir. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "collector/base/intern.h"
#include "collector/base/log.h"
#include "collector/stacks/pystack.h"
#include "collector/stacks/stacks.h"
#include "writer.h"
#include "writer_int.h"

/* sp_string_lookup_fn over the process's intern table; NULL for an unknown id. */
static const char *lookup(void *ctx, uint32_t id)
{
	return sp_intern_lookup(id);
}

/* Warns once and discards everything of f from now on. This function can't fail. */
void sp_tf_fail(struct file *f, const char *what, int err)
{
	if (!f->failed)
		sp_warn("%s trace %s failed (%s); dropping further events", what, f->path, strerror(err));
	if (!f->failed)
		f->err = err;
	f->failed = true;
}

/* After a window's end: if f's file is no longer at its path (its directory or the file removed,
 * another put in its place), says so once and writes no more to it. This function can't fail. */
void sp_tf_check_there(struct file *f)
{
	struct stat st;
	if (f->failed || !f->made || (stat(f->path, &st) == 0 && st.st_dev == f->dev && st.st_ino == f->ino))
		return;
	sp_warn("trace %s was removed while it was written (its directory or the file deleted); dropping further "
		"events",
		f->path);
	f->gone = f->failed = true;
	f->err = ENOENT;
}

/* Counts a window's begin (end: 0) or end (1) in f's account of what a failure lost. */
void sp_tf_account(struct file *f, const struct sp_event *ev, int end)
{
	bool kept = end ? f->win_kept : !f->failed && f->tw;
	int64_t first = ev->u.window.first_step, last = ev->u.window.last_step;
	if (!end && kept) {
		f->kept_first = f->kept++ ? f->kept_first : first;
		f->open_first = first;
	} else if (!end) {
		f->lost_first = f->lost++ ? f->lost_first : first;
	} else if (kept && f->failed && !f->cut) {
		f->cut = true; /* the failure came inside it */
		f->cut_first = f->open_first;
		f->cut_last = last;
	}
	if (end || !kept)
		*(kept ? &f->kept_last : &f->lost_last) = last;
	f->win_kept = !end && kept;
}

/* At stop: says what a failure of f lost (the failure itself was said when it came). */
void sp_tf_say_loss(const struct file *f)
{
	char cut[96] = "", lost[128] = "";
	if (!f->failed || (!f->kept && !f->lost))
		return;
	if (f->gone || !f->made) {
		sp_warn("trace %s is lost (%s): %u window%s (steps %lld-%lld) not written", f->path,
			f->gone ? "removed while it was written" : "it could not be made, as said", f->kept + f->lost,
			f->kept + f->lost == 1 ? "" : "s", (long long)(f->kept ? f->kept_first : f->lost_first),
			(long long)(f->lost ? f->lost_last : f->kept_last));
		return;
	}
	if (f->cut)
		snprintf(cut, sizeof cut, "its window of steps %lld-%lld ends early", (long long)f->cut_first,
			 (long long)f->cut_last);
	if (f->lost)
		snprintf(lost, sizeof lost, "%s%u later window%s (steps %lld-%lld) not written", f->cut ? "; " : "",
			 f->lost, f->lost == 1 ? "" : "s", (long long)f->lost_first, (long long)f->lost_last);
	if (f->cut || f->lost)
		sp_warn("trace %s is cut short (%s): %s%s", f->path, strerror(f->err), cut, lost);
}

/* Creates f's trace at path and writes its header (meta). The file is always new: the next free
 * name STEM.1.sptrace ... STEM.99.sptrace is taken if path exists (a planted link, a name another
 * process took). Returns 0, or -1 with why filled (f->tw stays NULL; nothing printed). */
int sp_tf_create(struct file *f, const char *path, const struct sp_trace_meta *meta, char *why, size_t whylen)
{
	struct stat st;
	snprintf(f->path, sizeof(f->path), "%s", path);
	size_t stem = strlen(f->path);
	if (stem > 8 && !strcmp(f->path + stem - 8, ".sptrace"))
		stem -= 8;
	for (int n = 1; !(f->tw = sp_trace_create(f->path, meta, lookup, NULL, 0)) && errno == EEXIST && n < 100; n++)
		snprintf(f->path, sizeof(f->path), "%.*s.%d%s", (int)stem, path, n, path[stem] ? path + stem : "");
	if (!f->tw) {
		f->err = errno;
		snprintf(why, whylen, "cannot create trace %s: %s", f->path, strerror(errno));
		return -1;
	}
	f->made = true;
	if (stat(f->path, &st) == 0) {
		f->dev = st.st_dev;
		f->ino = st.st_ino;
	}
	if (strcmp(f->path, path))
		sp_warn("%s exists; writing %s instead", path, f->path);
	sp_trace_set_stack_lookup(f->tw, sp_stack_lookup, NULL);
	sp_trace_set_pyframe_lookup(f->tw, sp_pyframe_lookup, NULL);
	return 0;
}

/* Writes ev to f, counting its bytes in f's open window. Errors go through fail(). */
void sp_tf_write(struct file *f, const struct sp_event *ev)
{
	if (f->failed || !f->tw)
		return;
	int n = sp_trace_write(f->tw, ev);
	if (n < 0)
		sp_tf_fail(f, "writing", errno);
	else if (f->in_window)
		f->win_bytes += (uint64_t)n;
}

/* Returns 0, or -1 with why filled (nothing printed). */
int sp_writer_make_dir(char *dir, bool allow_foreign, char *why, size_t whylen)
{
	struct stat st;
	for (char *p = dir + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			mkdir(dir, 0750);
			*p = '/';
		}
	if (mkdir(dir, 0750) < 0 && errno != EEXIST) {
		snprintf(why, whylen, "cannot create output directory %s: %s", dir, strerror(errno));
		return -1;
	}
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		snprintf(why, whylen, "output directory %s is not a directory", dir);
		return -1;
	}
	if (st.st_uid != geteuid() && !allow_foreign) {
		snprintf(why, whylen,
			 "output directory %s belongs to another user (uid %u; this process runs as uid %u), who could "
			 "read or remove the traces (set [profile] allow_foreign_dir = true, or "
			 "STEPPROF_PROFILE_ALLOW_FOREIGN_DIR=1, if that is intended)",
			 dir, (unsigned)st.st_uid, (unsigned)geteuid());
		return -1;
	}
	return 0;
}
