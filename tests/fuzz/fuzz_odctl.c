/* SPDX-License-Identifier: MIT */
/* fuzz_odctl.c - libFuzzer harness for the on-demand control files (config/odctl.c, read in
 * every profiled process that accepts `stepprof trigger`, and by the CLI): a request or a status
 * (by the first line) that parses must format to a text that parses back to the same fields. A
 * crash, a sanitizer report, a leak or a failed round trip is a finding. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "config/odctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[300], buf[2 * SP_OD_MAX_BYTES];
	struct sp_od_req r, r2;
	struct sp_od_status s, s2;
	if (size > SP_OD_MAX_BYTES)
		return 0; /* refused unread by sp_od_read */
	if (sp_od_req_parse((const char *)data, size, &r, err, sizeof err) == 0) {
		int n = sp_od_req_format(&r, buf, sizeof buf);
		if (n < 0 || sp_od_req_parse(buf, (size_t)n, &r2, err, sizeof err) < 0 || memcmp(&r, &r2, sizeof r))
			abort();
	}
	if (sp_od_status_parse((const char *)data, size, &s, err, sizeof err) == 0) {
		int n = sp_od_status_format(&s, buf, sizeof buf);
		/* notes and paths are kept up to SP_OD_TEXT - 1 bytes, whatever they hold but newlines */
		if (n < 0 || sp_od_status_parse(buf, (size_t)n, &s2, err, sizeof err) < 0 || s.pid != s2.pid ||
		    s.rank != s2.rank || s.request != s2.request || strcmp(s.state, s2.state) ||
		    strcmp(s.host, s2.host) || s.first != s2.first || s.last != s2.last || strcmp(s.trace, s2.trace))
			abort();
	}
	return 0;
}
