/* SPDX-License-Identifier: MIT */
/* flops.c - FLOPs of torch operators from their input sizes, and peaks of known GPUs (see
 * flops.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "flops.h"

int sp_shapes_parse(const char *s, struct sp_shapes *sh)
{
	const char *p = s;
	memset(sh, 0, sizeof *sh);
	while (*p == ' ')
		p++;
	if (*p++ != '[')
		return -1;
	for (int k = 0;; k++) {
		while (*p == ' ' || (k && *p == ','))
			p++;
		if (*p == ']')
			return 0;
		if (*p++ != '[')
			return -1;
		int t = sh->n < SP_SHAPES_MAX ? sh->n++ : -1, d = 0;
		for (;;) {
			while (*p == ' ' || *p == ',')
				p++;
			if (*p == ']') {
				p++;
				break;
			}
			char *end;
			long long v = strtoll(p, &end, 10);
			if (end == p || d == SP_DIMS_MAX)
				return -1;
			if (t >= 0)
				sh->dim[t][d] = v;
			d++;
			p = end;
		}
		if (t >= 0)
			sh->ndim[t] = d;
	}
}

/* The product of tensor t's sizes. */
static double numel(const struct sp_shapes *sh, int t)
{
	double v = 1;
	for (int d = 0; d < sh->ndim[t]; d++)
		v *= (double)sh->dim[t][d];
	return v;
}

/* torch's gemm count (mm, addmm): 2 * prod(mat1) / mat1's last size * prod(mat2); bmm, baddbmm
 * also divide by the batch (mat1's first size). Returns -1 where torch returns 0. */
static int gemm(const struct sp_shapes *sh, int a, int b, int batched, double *flops)
{
	if (sh->n <= a || sh->n <= b || !sh->ndim[a] || !sh->ndim[b])
		return -1;
	double k = (double)sh->dim[a][sh->ndim[a] - 1], batch = (double)sh->dim[a][0];
	if (k <= 0 || (batched && batch <= 0))
		return -1;
	*flops = 2 * numel(sh, a) / k / (batched ? batch : 1) * numel(sh, b);
	return 1;
}

/* Parses "key=a,b" of conv into v (n values wanted; "same"/"valid" give *word). Returns 0 or -1. */
static int conv_param(const char *conv, const char *key, long long *v, int n, char *word, size_t wn)
{
	char pat[32];
	snprintf(pat, sizeof pat, "%s=", key);
	const char *p = strstr(conv, pat);
	if (!p)
		return -1;
	p += strlen(pat);
	if (word && (!strncmp(p, "same", 4) || !strncmp(p, "valid", 5))) {
		snprintf(word, wn, "%s", *p == 's' ? "same" : "valid");
		return 0;
	}
	for (int i = 0; i < n; i++) {
		char *end;
		v[i] = strtoll(p, &end, 10);
		if (end == p)
			return -1;
		p = *end == ',' ? end + 1 : end;
	}
	return 0;
}

/* torch's conv2d count: 2 * N * Hout * Wout * kh * kw * Cin * Cout / groups, Hout from the input,
 * the kernel and the module's stride, padding and dilation. */
static int conv2d(const struct sp_shapes *sh, const char *conv, double *flops)
{
	long long st[2], pad[2] = { 0, 0 }, dil[2], g[1];
	char word[8] = "";
	if (!conv || sh->n < 2 || sh->ndim[0] != 4 || sh->ndim[1] != 4 || conv_param(conv, "stride", st, 2, NULL, 0) ||
	    conv_param(conv, "padding", pad, 2, word, sizeof word) || conv_param(conv, "dilation", dil, 2, NULL, 0) ||
	    conv_param(conv, "groups", g, 1, NULL, 0) || st[0] <= 0 || st[1] <= 0 || g[0] <= 0)
		return -1;
	const int64_t *in = sh->dim[0], *w = sh->dim[1];
	double out[2];
	for (int i = 0; i < 2; i++) {
		if (!strcmp(word, "same")) /* torch allows it with stride 1 only: the output keeps the size */
			out[i] = (double)in[2 + i];
		else
			out[i] = (double)((in[2 + i] + 2 * pad[i] - dil[i] * (w[2 + i] - 1) - 1) / st[i] + 1);
		if (out[i] <= 0)
			return -1;
	}
	*flops = 2.0 * (double)in[0] * out[0] * out[1] * (double)w[2] * (double)w[3] * (double)in[1] * (double)w[0] /
		 (double)g[0];
	return 1;
}

/* torch.utils.flop_counter's attention counts, q, k, v [b, h, s, d] at q..q+2 (grad_out before
 * them in backward): forward 2 b h s_q s_k (d_q + d_v), backward 2 b h s_q s_k (3 d_q + 2 d_v). */
static int sdpa(const struct sp_shapes *sh, int q, int backward, double *flops)
{
	if (sh->n < q + 3 || sh->ndim[q] != 4 || sh->ndim[q + 1] != 4 || sh->ndim[q + 2] != 4)
		return -1;
	double b = (double)sh->dim[q][0], h = (double)sh->dim[q][1], sq = (double)sh->dim[q][2];
	double dq = (double)sh->dim[q][3], sk = (double)sh->dim[q + 1][2], dv = (double)sh->dim[q + 2][3];
	*flops = 2 * b * h * sq * sk * (backward ? 3 * dq + 2 * dv : dq + dv);
	return 1;
}

static const char *const sdpa_ops[] = { "aten::_scaled_dot_product_flash_attention",
					"aten::_scaled_dot_product_efficient_attention",
					"aten::_scaled_dot_product_cudnn_attention" };

/* 0 not attention; 1 forward; 2 backward (the name with "_backward"). */
static int sdpa_kind(const char *op)
{
	for (size_t i = 0; i < sizeof sdpa_ops / sizeof *sdpa_ops; i++) {
		size_t n = strlen(sdpa_ops[i]);
		if (!strncmp(op, sdpa_ops[i], n))
			return !op[n] ? 1 : !strcmp(op + n, "_backward") ? 2 : 0;
	}
	return 0;
}

int sp_flops_counted(const char *op)
{
	return !strcmp(op, "aten::mm") || !strcmp(op, "aten::addmm") || !strcmp(op, "aten::bmm") ||
	       !strcmp(op, "aten::baddbmm") || !strcmp(op, "aten::conv2d") || sdpa_kind(op);
}

int sp_flops(const char *op, const char *shapes, const char *conv, double *flops)
{
	struct sp_shapes sh;
	if (!sp_flops_counted(op))
		return 0;
	if (!shapes || sp_shapes_parse(shapes, &sh) < 0)
		return -1;
	if (!strcmp(op, "aten::mm"))
		return gemm(&sh, 0, 1, 0, flops);
	if (!strcmp(op, "aten::addmm"))
		return gemm(&sh, 1, 2, 0, flops);
	if (!strcmp(op, "aten::bmm"))
		return gemm(&sh, 0, 1, 1, flops);
	if (!strcmp(op, "aten::baddbmm"))
		return gemm(&sh, 1, 2, 1, flops);
	if (!strcmp(op, "aten::conv2d"))
		return conv2d(&sh, conv, flops);
	int k = sdpa_kind(op);
	return sdpa(&sh, k == 2 ? 1 : 0, k == 2, flops);
}

double sp_flops_peak(const char *name)
{
	/* first match wins: the more specific names first */
	static const struct {
		const char *part;
		double tflops;
	} peaks[] = {
		{ "H200 NVL", 0 }, { "H200", 989.4 }, { "H100 PCIe", 756.5 }, { "H100 NVL", 0 },   { "H100", 989.4 },
		{ "B200", 2250 },  { "A100", 312 },   { "L40S", 362.05 },     { "V100-SXM", 125 }, { "V100-PCIE", 112 },
	};
	if (!name)
		return 0;
	for (size_t i = 0; i < sizeof peaks / sizeof *peaks; i++)
		if (strstr(name, peaks[i].part))
			return peaks[i].tflops;
	size_t n = strlen(name);
	return n >= 9 && !strcmp(name + n - 9, "NVIDIA L4") ? 121 : 0; /* not the L40 */
}
