/* SPDX-License-Identifier: MIT */
/* outfile.c - see outfile.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "outfile.h"

int sp_outfile_create(const char *path, char **tmp, char *err, size_t errlen)
{
	mode_t mask = umask(0);
	umask(mask);
	*tmp = NULL;
	if (asprintf(tmp, "%s.XXXXXX", path) < 0) {
		*tmp = NULL;
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	int fd = mkostemp(*tmp, O_CLOEXEC);
	if (fd < 0 || fchmod(fd, 0666 & ~mask) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(*tmp);
		}
		free(*tmp);
		*tmp = NULL;
		return -1;
	}
	return fd;
}

FILE *sp_outfile_fopen(const char *path, char **tmp, char *err, size_t errlen)
{
	int fd = sp_outfile_create(path, tmp, err, errlen);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
	if (fd >= 0 && !f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		unlink(*tmp);
		free(*tmp);
		*tmp = NULL;
	}
	return f;
}

int sp_outfile_commit(char *tmp, const char *path, int ok)
{
	int rc = 0;
	if (!tmp)
		return 0;
	if (ok && rename(tmp, path) < 0) {
		fprintf(stderr, "stepprof: %s: %s\n", path, strerror(errno));
		rc = -1;
	}
	if (!ok || rc < 0)
		unlink(tmp);
	free(tmp);
	return rc;
}
