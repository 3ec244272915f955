/* SPDX-License-Identifier: MIT */
/* version.h - the stepprof version: one place. `stepprof --version`, every trace header (the
 * producer field) and every JSON output carry it; the Makefile reads it for `make dist` and the
 * man page. Bump it with every release. */
#ifndef SP_VERSION_H
#define SP_VERSION_H

#define SP_VERSION "0.2.0"

#endif
