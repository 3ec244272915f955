/* SPDX-License-Identifier: MIT */
/* tokglue.c - what step detector token an API call is (a kernel launch, an auto-detection call,
 * a graph launch), and its recording for STEPPROF_RECORD_TOKENS with the truth before the token
 * it marks. Application threads, inside CUPTI callbacks; makes no CUPTI configuration change. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "decide/stepdet.h"
#include "collector/out/tokrec.h"

/* The recorded truth's pattern per name id: 0 unknown, 1 no, 2 yes (tokrec.h). */
static uint8_t truth_match_cache[SP_DET_MATCH_CACHE];

/* The detector token an API entry is, if any: a kernel launch, or at the outermost level an
 * auto-detection call or a graph launch. Fills kind, flags and name; returns 1, else 0. */
int sp_tokglue_token_of(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const CUpti_CallbackData *cd, int launch,
			uint8_t *kind, uint8_t *flags, uint32_t *name)
{
	int d = dom == CUPTI_CB_DOMAIN_DRIVER_API;
	uint8_t cls = cbid < SP_CBID_MAX ? sp_col.cls[d][cbid] : 0;
	*flags = d ? SP_TOKF_DRIVER : 0;
	if (launch) {
		*kind = SP_TOK_KERNEL;
		*name = sp_coll_name_id(cd->symbolName);
		return 1;
	}
	if ((d && sp_thr.in_rt) || !(cls & (CLS_AUTO | CLS_GRAPH)))
		return 0;
	*kind = cls & CLS_AUTO ? SP_TOK_API : SP_TOK_GRAPH;
	*flags |= (cls & CLS_AUTO) && sp_col.api_sync[d][cbid] ? SP_TOKF_SYNC : 0;
	*name = sp_cbset_api_name(dom, cbid);
	return 1;
}

/* Records the token an API entry is (STEPPROF_RECORD_TOKENS): a kernel launch, an auto-detection
 * call or a graph launch at the outermost level, and the truth before the token it marks. */
void sp_tokglue_api(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const CUpti_CallbackData *cd, int launch,
		    uint64_t t)
{
	int d = dom == CUPTI_CB_DOMAIN_DRIVER_API;
	uint8_t kind, flags;
	uint32_t name;
	int tok = sp_tokglue_token_of(dom, cbid, cd, launch, &kind, &flags, &name);
	if (launch && sp_tokrec_truth_kind() == SP_TOK_KERNEL &&
	    sp_name_matches(name, sp_tokrec_truth_pattern(), truth_match_cache, sp_col.demangle))
		sp_tokrec_add(SP_TOK_TRUTH, flags, name, t, sp_coll_tid());
	else if (!launch && !(d && (sp_thr.in_rt || sp_thr.in_nest)) && cbid < SP_CBID_MAX &&
		 (sp_col.cls[d][cbid] & CLS_TRUTH))
		sp_tokrec_add(SP_TOK_TRUTH, flags, sp_cbset_api_name(dom, cbid), t, sp_coll_tid());
	if (tok)
		sp_tokrec_add(kind, flags, name, t, sp_coll_tid());
}
