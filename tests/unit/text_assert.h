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

/* The line of s starting with prefix with its runs of spaces squeezed to one, into buf. */
__attribute__((unused)) static const char *squeezed(const char *s, const char *prefix, char *buf, size_t n)
{
	const char *p = s;
	size_t k = 0;

	while ((p = strstr(p, prefix)) && p != s && p[-1] != '\n')
		p++;
	if (!p)
		fail_msg("no line starting '%s' in:\n%s", prefix, s);
	for (; *p && *p != '\n' && k + 1 < n; p++)
		if (*p != ' ' || (k && buf[k - 1] != ' '))
			buf[k++] = *p;
	while (k && buf[k - 1] == ' ')
		k--;
	buf[k] = 0;
	return buf;
}

#endif
