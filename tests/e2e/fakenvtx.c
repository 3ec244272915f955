/* SPDX-License-Identifier: MIT */
/* fakenvtx.c - a library that calls NVTX as PyTorch's libtorch_cuda does (the header-only NVTX 3,
 * which loads NVTX_INJECTION64_PATH's library at the first call): fake_nvtx_push(message) is
 * nvtxRangePushA, fake_nvtx_pop() nvtxRangePop. The stand-in torch (tests/e2e/pybridge/torch)
 * pushes its operators' ranges through it. Built by the Makefile; used by tests/e2e/pyops.sh. */
#include <nvtx3/nvToolsExt.h>

__attribute__((visibility("default"))) int fake_nvtx_push(const char *message)
{
	return nvtxRangePushA(message);
}

__attribute__((visibility("default"))) int fake_nvtx_pop(void)
{
	return nvtxRangePop();
}
