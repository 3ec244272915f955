/* SPDX-License-Identifier: MIT */
/* cupti.c - hooks on libcupti for the program's own profiler (torch.profiler/Kineto reaches
 * libcupti through the dynamic linker). While stepprof holds CUPTI in this process each hook
 * forwards to collector/cupti_share.c, which serves the call; otherwise it calls the real
 * libcupti. Hooks hold no policy. stepprof's own CUPTI calls never come here (cupti_api.c binds
 * libcupti's symbols directly). */
#include <cupti.h>
#include "collector/cupti_share.h"
#include "resolve.h"

#define SP_EXPORT __attribute__((visibility("default")))

static const char *const cupti_libs[] = { "libcupti.so.13", "libcupti.so", NULL };

/* The real libcupti function behind a hook, resolved once (NULL if no libcupti is loaded: the
 * hook then returns CUPTI_ERROR_NOT_INITIALIZED, as a program without CUPTI would fail). */
#define REAL(fn)                                                                      \
	static __typeof__(fn) *real_##fn;                                             \
	if (!real_##fn)                                                               \
		real_##fn = (__typeof__(fn) *)sp_resolve(#fn, cupti_libs);            \
	if (!real_##fn)                                                               \
		return CUPTI_ERROR_NOT_INITIALIZED

SP_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb, void *ud)
{
	CUptiResult r;
	if (sp_share_subscribe(sub, cb, ud, &r))
		return r;
	REAL(cuptiSubscribe);
	return real_cuptiSubscribe(sub, cb, ud);
}

SP_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle sub)
{
	CUptiResult r;
	if (sp_share_unsubscribe(sub, &r))
		return r;
	REAL(cuptiUnsubscribe);
	return real_cuptiUnsubscribe(sub);
}

SP_EXPORT CUptiResult cuptiEnableCallback(uint32_t on, CUpti_SubscriberHandle sub, CUpti_CallbackDomain d,
					  CUpti_CallbackId cbid)
{
	CUptiResult r;
	if (sp_share_enable_callback(on, sub, d, cbid, &r))
		return r;
	REAL(cuptiEnableCallback);
	return real_cuptiEnableCallback(on, sub, d, cbid);
}

SP_EXPORT CUptiResult cuptiEnableDomain(uint32_t on, CUpti_SubscriberHandle sub, CUpti_CallbackDomain d)
{
	CUptiResult r;
	if (sp_share_enable_domain(on, sub, d, &r))
		return r;
	REAL(cuptiEnableDomain);
	return real_cuptiEnableDomain(on, sub, d);
}

SP_EXPORT CUptiResult cuptiEnableAllDomains(uint32_t on, CUpti_SubscriberHandle sub)
{
	CUptiResult r;
	if (sp_share_enable_all(on, sub, &r))
		return r;
	REAL(cuptiEnableAllDomains);
	return real_cuptiEnableAllDomains(on, sub);
}

SP_EXPORT CUptiResult cuptiGetCallbackState(uint32_t *on, CUpti_SubscriberHandle sub, CUpti_CallbackDomain d,
					    CUpti_CallbackId cbid)
{
	CUptiResult r;
	if (sp_share_callback_state(on, sub, d, cbid, &r))
		return r;
	REAL(cuptiGetCallbackState);
	return real_cuptiGetCallbackState(on, sub, d, cbid);
}

SP_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
						     CUpti_BuffersCallbackCompleteFunc comp)
{
	CUptiResult r;
	if (sp_share_register_buffers(req, comp, &r))
		return r;
	REAL(cuptiActivityRegisterCallbacks);
	return real_cuptiActivityRegisterCallbacks(req, comp);
}

SP_EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f)
{
	CUptiResult r;
	if (sp_share_register_timestamp(f, &r))
		return r;
	REAL(cuptiActivityRegisterTimestampCallback);
	return real_cuptiActivityRegisterTimestampCallback(f);
}

SP_EXPORT CUptiResult cuptiGetTimestamp(uint64_t *t)
{
	CUptiResult r;
	if (sp_share_get_timestamp(t, &r))
		return r;
	REAL(cuptiGetTimestamp);
	return real_cuptiGetTimestamp(t);
}

SP_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind k)
{
	CUptiResult r;
	if (sp_share_activity(k, 1, &r))
		return r;
	REAL(cuptiActivityEnable);
	return real_cuptiActivityEnable(k);
}

SP_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind k)
{
	CUptiResult r;
	if (sp_share_activity(k, 0, &r))
		return r;
	REAL(cuptiActivityDisable);
	return real_cuptiActivityDisable(k);
}

SP_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
	CUptiResult r;
	if (sp_share_flush(flag, &r))
		return r;
	REAL(cuptiActivityFlushAll);
	return real_cuptiActivityFlushAll(flag);
}

SP_EXPORT CUptiResult cuptiFinalize(void)
{
	CUptiResult r;
	if (sp_share_finalize(&r))
		return r;
	REAL(cuptiFinalize);
	return real_cuptiFinalize();
}
