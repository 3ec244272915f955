/* SPDX-License-Identifier: MIT */
/* fakecupti.c - a stand-in libcupti for host tests of stepprof's CUPTI life cycle (no GPU): every
 * entry point stepprof binds, each logged as one line to $FAKE_CUPTI_LOG ("subscribe", "finalize",
 * "enable_cb D CBID 0|1", "activity_enable K"...). Calls other than cuptiSubscribe after
 * cuptiFinalize are logged as "AFTER_FINALIZE name" (real CUPTI would silently initialise again).
 * The test program fires callbacks through fake_cupti_fire(), which calls stepprof's callback only
 * if stepprof enabled that (domain, cbid), as CUPTI does. FAKE_FINALIZE_US makes cuptiFinalize
 * take that long (the program goes on meanwhile, unseen). Built by tests/e2e/cupti_life.sh. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cupti.h>

#define NCB 2048

static struct {
	pthread_mutex_t lock;
	FILE *log;
	CUpti_CallbackFunc cb;          /* the subscriber's callback, NULL when none */
	int finalized;                  /* cuptiFinalize ran and nothing subscribed since */
	unsigned char on[5][NCB];       /* enabled (domain, cbid) */
	char names[2][NCB][48];
} F = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void note(const char *fn, const char *fmt, ...)
{
	va_list ap;
	pthread_mutex_lock(&F.lock);
	if (!F.log) {
		const char *p = getenv("FAKE_CUPTI_LOG");
		F.log = fopen(p ? p : "/dev/null", "a");
	}
	if (F.finalized && strcmp(fn, "subscribe") && F.log)
		fprintf(F.log, "AFTER_FINALIZE %s\n", fn);
	if (F.log) {
		fputs(fn, F.log);
		va_start(ap, fmt);
		vfprintf(F.log, fmt, ap);
		va_end(ap);
		fputc('\n', F.log);
		fflush(F.log);
	}
	pthread_mutex_unlock(&F.lock);
}

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *ud)
{
	note("subscribe", "");
	if (F.cb)
		return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	F.finalized = 0;
	F.cb = cb;
	*s = (CUpti_SubscriberHandle)&F;
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle s)
{
	note("unsubscribe", "");
	F.cb = NULL;
	memset(F.on, 0, sizeof F.on);
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiFinalize(void)
{
	const char *us = getenv("FAKE_FINALIZE_US"); /* how long a real cuptiFinalize may take */
	note("finalize", "");
	if (us && atoi(us) > 0) {
		struct timespec ts = { atoi(us) / 1000000, atoi(us) % 1000000 * 1000L };
		nanosleep(&ts, NULL);
	}
	F.cb = NULL;
	memset(F.on, 0, sizeof F.on);
	F.finalized = 1;
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle s, CUpti_CallbackDomain d,
					 CUpti_CallbackId cbid)
{
	note("enable_cb", " %d %u %u", (int)d, cbid, enable);
	if (!F.cb || s != (CUpti_SubscriberHandle)&F)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if ((unsigned)d < 5 && cbid < NCB)
		F.on[d][cbid] = enable != 0;
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle s, CUpti_CallbackDomain d)
{
	note("enable_domain", " %d %u", (int)d, enable);
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain d, uint32_t cbid, const char **name)
{
	int k = d == CUPTI_CB_DOMAIN_DRIVER_API;
	if ((d != CUPTI_CB_DOMAIN_RUNTIME_API && !k) || cbid >= NCB)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (F.finalized)
		note("get_callback_name", "");
	if (!F.names[k][cbid][0]) {
		if (!k && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020)
			snprintf(F.names[k][cbid], 48, "cudaDeviceSynchronize_v3020");
		else if (!k && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020)
			snprintf(F.names[k][cbid], 48, "cudaStreamSynchronize_v3020");
		else if (!k && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000)
			snprintf(F.names[k][cbid], 48, "cudaLaunchKernel_v7000");
		else if (k && cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel)
			snprintf(F.names[k][cbid], 48, "cuLaunchKernel");
		else
			snprintf(F.names[k][cbid], 48, "%s_other_%u", k ? "cu" : "cuda", cbid);
	}
	*name = F.names[k][cbid];
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetDeviceId(CUcontext c, uint32_t *dev)
{
	note("get_device_id", "");
	*dev = 0;
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind k)
{
	note("activity_enable", " %d", (int)k);
	return F.cb ? CUPTI_SUCCESS : CUPTI_ERROR_NOT_INITIALIZED;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind k)
{
	note("activity_disable", " %d", (int)k);
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc r,
						    CUpti_BuffersCallbackCompleteFunc c)
{
	note("register_buffers", "");
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f)
{
	note("register_timestamp", "");
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag)
{
	note("flush", "");
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t *buf, size_t valid, CUpti_Activity **rec)
{
	return CUPTI_ERROR_MAX_LIMIT_REACHED;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext c, uint32_t s, size_t *n)
{
	*n = 0;
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute a, size_t *size, void *v)
{
	note("set_attribute", "");
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult r, const char **s)
{
	*s = "fake CUPTI error";
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t *v)
{
	*v = 130000;
	return CUPTI_SUCCESS;
}

/* The test program's side: one API callback (site 0 enter, 1 exit) or a resource callback, delivered
 * only if stepprof enabled it. Returns 1 if delivered. */
__attribute__((visibility("default"))) int fake_cupti_fire(int domain, unsigned cbid, int site, unsigned corr)
{
	static const char *name = "fake";
	uint64_t stamp = 0;
	int ret = 0;
	CUpti_CallbackFunc cb = F.cb;
	if (!cb || (unsigned)domain >= 5 || cbid >= NCB || !F.on[domain][cbid])
		return 0;
	if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
		CUpti_ResourceData rd = { 0 };
		cb(NULL, (CUpti_CallbackDomain)domain, cbid, &rd);
		return 1;
	}
	CUpti_CallbackData cd = { .callbackSite = site ? CUPTI_API_EXIT : CUPTI_API_ENTER, .functionName = name,
				  .correlationId = corr, .correlationData = &stamp, .functionReturnValue = &ret };
	cb(NULL, (CUpti_CallbackDomain)domain, cbid, &cd);
	return 1;
}
