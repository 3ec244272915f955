/* SPDX-License-Identifier: MIT */
/* entry.h - what the other hook files ask of the entry (entry.c). */
#ifndef SP_ENTRY_H
#define SP_ENTRY_H

/* 0 when the user turned stepprof off (STEPPROF_PROFILE_ENABLED = 0/false/no/off): the hooks then
 * pass everything through. Safe before main(); can't fail. */
int sp_preload_enabled(void);

#endif
