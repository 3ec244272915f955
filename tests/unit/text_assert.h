/* SPDX-License-Identifier: MIT */
/* text_assert.h - assertions on the text the CLI prints (report, steps, diff), for cmocka tests:
 * include after <cmocka.h>. */
#ifndef SP_TEST_TEXT_ASSERT_H
#define SP_TEST_TEXT_ASSERT_H

#include <string.h>

/* Asserts that the needles appear in s in this order, each at the start of a line. */
__attribute__((unused)) static void assert_rows(const char *s, const char *const *names, int n)
{
	const char *at = s;
	for (int i = 0; i < n; i++) {
		const char *p = at;
		while ((p = strstr(p, names[i])) && p != s && p[-1] != '\n')
			p++;
		if (!p)
			fail_msg("row '%s' missing or out of order in:\n%s", names[i], s);
		at = p + 1;
	}
}

#endif
