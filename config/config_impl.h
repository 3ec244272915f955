/* SPDX-License-Identifier: MIT */
/* config_impl.h - inside config/ only: the key table's record, which config.c owns, and what
 * config_print.c (the printer, sizes) and template.c (output path templates) share with it.
 * Never include it outside config/. */
#ifndef SP_CONFIG_IMPL_H
#define SP_CONFIG_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include "config.h"

enum ktype { K_BOOL, K_INT, K_SIZE, K_STR, K_OUTPUT, K_RANKS, K_CHOICE, K_STACKS };

struct key {
	const char *section, *name;
	enum ktype type;
	size_t off, size;       /* the field in struct sp_config */
	int64_t min, max;       /* K_INT and K_SIZE */
	const char *def;        /* default, written as in an INI file */
};

/* Key i of the table (table order: by section, as sp_cfg_print writes them), or NULL past the
 * last. This function can't fail. */
const struct key *sp_cfg_key(size_t i);
/* The integer value of a K_BOOL, K_INT, K_CHOICE or K_STACKS key in cfg. Can't fail. */
int64_t sp_cfg_key_load(const struct sp_config *cfg, const struct key *k);
/* The name of value v of a K_CHOICE or K_STACKS key. Can't fail. */
const char *sp_cfg_key_choice(const struct key *k, int64_t v);

/* What key k accepts, for the "(allowed: ...)" part of its errors, in buf or a constant string,
 * which it returns. Can't fail (config_print.c). */
const char *sp_cfg_key_allowed(const struct key *k, char *buf, size_t len);

/* Formats a size with the largest suffix that divides it exactly (round-trips through
 * sp_parse_size) into buf, which it returns. Can't fail (config_print.c). */
const char *sp_cfg_format_size(char *buf, size_t len, uint64_t v);

/* Checks the placeholders of an output template; writes the problem to problem. Returns 0 or -1
 * (template.c). */
int sp_cfg_check_template(const char *t, char *problem, size_t len);

#endif
