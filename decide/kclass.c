/* SPDX-License-Identifier: MIT */
/* kclass.c - kernel names that say training (see kclass.h). The words are those the step
 * detector's training evidence reads (stepdet.c, kernel_class). */
#include <string.h>
#include "kclass.h"

int sp_kernel_trains(const char *name)
{
	static const char *const words[] = { "backward", "bwd",       "wgrad", "dgrad",   "adam",
					     "sgd",      "optimizer", "lamb",  "adagrad", "rmsprop" };
	for (size_t i = 0; name && i < sizeof words / sizeof *words; i++)
		if (strcasestr(name, words[i]))
			return 1;
	return 0;
}
