/* SPDX-License-Identifier: MIT */
/* cupti.c - hooks on libcupti for the program's own profiler: while stepprof holds CUPTI they forward to
 * collector/cupti/cupti_share.c, else to the real libcupti. No policy; stepprof's own calls bind directly. */
#include <cupti.h>
#include "collector/collector.h"
#include "resolve.h"

#define SP_EXPORT __attribute__((visibility("default")))

static const char *const cupti_libs[] = { "libcupti.so.13", "libcupti.so", NULL };

/* The body of every hook: served (an sp_share_* call that sets r) returns r; otherwise the real
 * libcupti function, resolved once, gets the arguments (with no libcupti loaded the hook returns
 * CUPTI_ERROR_NOT_INITIALIZED, as a program without CUPTI would fail). */
#define FORWARD(fn, served, ...)                                           \
	CUptiResult r;                                                     \
	static __typeof__(fn) *real_##fn;                                  \
	if (served)                                                        \
		return r;                                                  \
	if (!real_##fn)                                                    \
		real_##fn = (__typeof__(fn) *)sp_resolve(#fn, cupti_libs); \
	return real_##fn ? real_##fn(__VA_ARGS__) : CUPTI_ERROR_NOT_INITIALIZED

SP_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb, void *ud)
{
	FORWARD(cuptiSubscribe, sp_share_subscribe(sub, cb, ud, &r), sub, cb, ud);
}

SP_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle sub)
{
	FORWARD(cuptiUnsubscribe, sp_share_unsubscribe(sub, &r), sub);
}

SP_EXPORT CUptiResult cuptiEnableCallback(uint32_t on, CUpti_SubscriberHandle sub, CUpti_CallbackDomain d,
					  CUpti_CallbackId cbid)
{
	FORWARD(cuptiEnableCallback, sp_share_enable_callback(on, sub, d, cbid, &r), on, sub, d, cbid);
}

SP_EXPORT CUptiResult cuptiEnableDomain(uint32_t on, CUpti_SubscriberHandle sub, CUpti_CallbackDomain d)
{
	FORWARD(cuptiEnableDomain, sp_share_enable_domain(on, sub, d, &r), on, sub, d);
}

SP_EXPORT CUptiResult cuptiEnableAllDomains(uint32_t on, CUpti_SubscriberHandle sub)
{
	FORWARD(cuptiEnableAllDomains, sp_share_enable_all(on, sub, &r), on, sub);
}

SP_EXPORT CUptiResult cuptiGetCallbackState(uint32_t *on, CUpti_SubscriberHandle sub, CUpti_CallbackDomain d,
					    CUpti_CallbackId cbid)
{
	FORWARD(cuptiGetCallbackState, sp_share_callback_state(on, sub, d, cbid, &r), on, sub, d, cbid);
}

SP_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
						     CUpti_BuffersCallbackCompleteFunc comp)
{
	FORWARD(cuptiActivityRegisterCallbacks, sp_share_register_buffers(req, comp, &r), req, comp);
}

SP_EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f)
{
	FORWARD(cuptiActivityRegisterTimestampCallback, sp_share_register_timestamp(f, &r), f);
}

SP_EXPORT CUptiResult cuptiGetTimestamp(uint64_t *t)
{
	FORWARD(cuptiGetTimestamp, sp_share_get_timestamp(t, &r), t);
}

SP_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind k)
{
	FORWARD(cuptiActivityEnable, sp_share_activity(k, 1, &r), k);
}

SP_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind k)
{
	FORWARD(cuptiActivityDisable, sp_share_activity(k, 0, &r), k);
}

SP_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
	FORWARD(cuptiActivityFlushAll, sp_share_flush(flag, &r), flag);
}

SP_EXPORT CUptiResult cuptiFinalize(void)
{
	FORWARD(cuptiFinalize, sp_share_finalize(&r));
}
