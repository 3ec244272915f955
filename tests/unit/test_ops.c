/* SPDX-License-Identifier: MIT */
/* test_ops.c - torch operators offline and their messages: torch's NVTX message taken apart
 * (collector/base/opmsg.c), input sizes and FLOP formulas as torch counts them, GPU peaks by name
 * (cli/flops.c), and GPU records to ops and modules (cli/opattr.c) on a small written trace. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "cli/flops.h"
#include "cli/opattr.h"
#include "cli/report_ops.h"
#include "cli/windows.h"
#include "collector/base/opmsg.h"
#include "scratch.h"

static void test_opmsg(void **state)
{
	struct sp_opmsg m;
	const char *a = "aten::mm, seq = 12, op_id = 34, sizes = [[2, 3], [3, 4]], input_op_ids = [(7, 0), (0, -1)]";
	sp_opmsg_parse(a, &m);
	assert_int_equal(m.op, 1);
	assert_int_equal(m.name_len, strlen("aten::mm"));
	assert_int_equal(m.has_seq, 1);
	assert_int_equal(m.seq, 12);
	assert_non_null(m.sizes);
	assert_int_equal(m.sizes_len, strlen("[[2, 3], [3, 4]]"));
	assert_memory_equal(m.sizes, "[[2, 3], [3, 4]]", m.sizes_len);

	sp_opmsg_parse("Optimizer.step#Adam.step, op_id = 5", &m); /* a record_function: no seq, no sizes */
	assert_int_equal(m.op, 1);
	assert_int_equal(m.has_seq, 0);
	assert_int_equal(m.name_len, strlen("Optimizer.step#Adam.step"));
	assert_null(m.sizes);

	sp_opmsg_parse("train_step", &m); /* the program's own range */
	assert_int_equal(m.op, 0);
	assert_int_equal(m.name_len, strlen("train_step"));

	sp_opmsg_parse("x, seq = many, op_id = 1", &m); /* not a number: no seq, the name still cut there */
	assert_int_equal(m.op, 1);
	assert_int_equal(m.has_seq, 0);
	assert_int_equal(m.name_len, 1);

	sp_opmsg_parse("aten::cat, seq = -1, op_id = 9, sizes = [[1, 2], [", &m); /* cut: the rest */
	assert_int_equal(m.has_seq, 1);
	assert_int_equal(m.seq, -1);
	assert_string_equal(m.sizes, "[[1, 2], [");
	assert_int_equal(m.sizes_len, strlen("[[1, 2], ["));
}

static void test_shapes(void **state)
{
	struct sp_shapes sh;
	assert_int_equal(sp_shapes_parse("[[8, 64], [], [64, 32]]", &sh), 0);
	assert_int_equal(sh.n, 3);
	assert_int_equal(sh.ndim[0], 2);
	assert_int_equal(sh.dim[0][1], 64);
	assert_int_equal(sh.ndim[1], 0);
	assert_int_equal(sh.dim[2][0], 64);
	assert_int_equal(sp_shapes_parse("[]", &sh), 0);
	assert_int_equal(sh.n, 0);
	assert_int_equal(sp_shapes_parse("[[1, 2], [", &sh), -1);           /* cut */
	assert_int_equal(sp_shapes_parse("[[1, 2, 3, 4, 5, 6, 7, 8, 9]]", &sh), -1); /* too many dimensions */
	assert_int_equal(sp_shapes_parse("[[a]]", &sh), -1);
	assert_int_equal(sp_shapes_parse("[[1], [2], [3], [4], [5], [6], [7], [8], [9], [10], [11], [12], [13], [14], "
					 "[15], [16], [17], [18]]",
					 &sh),
			 0);
	assert_int_equal(sh.n, SP_SHAPES_MAX); /* the rest are left out */
	assert_int_equal(sh.dim[15][0], 16);
}

static void test_flops(void **state)
{
	double f = 0;
	assert_int_equal(sp_flops("aten::mm", "[[32, 64], [64, 128]]", NULL, &f), 1);
	assert_true(f == 2.0 * 32 * 64 * 128);
	assert_int_equal(sp_flops("aten::addmm", "[[128], [32, 64], [64, 128], [], []]", NULL, &f), 1);
	assert_true(f == 2.0 * 32 * 64 * 128);
	assert_int_equal(sp_flops("aten::bmm", "[[4, 32, 64], [4, 64, 16]]", NULL, &f), 1);
	assert_true(f == 2.0 * 4 * 32 * 64 * 16);
	assert_int_equal(sp_flops("aten::baddbmm", "[[4, 32, 16], [4, 32, 64], [4, 64, 16], [], []]", NULL, &f), 1);
	assert_true(f == 2.0 * 4 * 32 * 64 * 16);
	/* ResNet's stem: 224x224 input, 7x7 kernel, stride 2, padding 3: a 112x112 output */
	assert_int_equal(sp_flops("aten::conv2d", "[[8, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], []]",
				  "stride=2,2 padding=3,3 dilation=1,1 groups=1", &f),
			 1);
	assert_true(f == 2.0 * 8 * 112 * 112 * 7 * 7 * 3 * 64);
	assert_int_equal(sp_flops("aten::conv2d", "[[8, 32, 56, 56], [32, 1, 3, 3], []]",
				  "stride=1,1 padding=same dilation=1,1 groups=32", &f),
			 1);
	assert_true(f == 2.0 * 8 * 56 * 56 * 3 * 3 * 32 * 32 / 32);
	assert_int_equal(sp_flops("aten::conv2d", "[[8, 3, 224, 224], [64, 3, 7, 7]]", NULL, &f), -1); /* no module */
	assert_int_equal(sp_flops("aten::_scaled_dot_product_flash_attention",
				  "[[2, 12, 1024, 64], [2, 12, 1024, 64], [2, 12, 1024, 64], [], []]", NULL, &f),
			 1);
	assert_true(f == 4.0 * 2 * 12 * 1024 * 1024 * 64);
	assert_int_equal(sp_flops("aten::_scaled_dot_product_efficient_attention_backward",
				  "[[2, 12, 1024, 64], [2, 12, 1024, 64], [2, 12, 1024, 64], [2, 12, 1024, 64], []]",
				  NULL, &f),
			 1);
	assert_true(f == 2.0 * 2 * 12 * 1024 * 1024 * (3 * 64 + 2 * 64)); /* 2.5 times the forward */
	assert_int_equal(sp_flops("aten::relu", "[[8, 64]]", NULL, &f), 0);
	assert_int_equal(sp_flops("aten::linear", "[[8, 64], [32, 64], [32]]", NULL, &f), 0); /* its addmm counts */
	assert_int_equal(sp_flops("aten::mm", "[[1, 2], [", NULL, &f), -1);
	assert_int_equal(sp_flops("aten::mm", NULL, NULL, &f), -1);
	assert_int_equal(sp_flops("aten::mm", "[[32, 0], [0, 8]]", NULL, &f), -1); /* torch: 0 */
}

static void test_peaks(void **state)
{
	assert_true(sp_flops_peak("NVIDIA H200") == 989.4);
	assert_true(sp_flops_peak("NVIDIA H100 80GB HBM3") == 989.4);
	assert_true(sp_flops_peak("NVIDIA H100 PCIe") == 756.5);
	assert_true(sp_flops_peak("NVIDIA H200 NVL") == 0);
	assert_true(sp_flops_peak("NVIDIA A100-SXM4-80GB") == 312);
	assert_true(sp_flops_peak("NVIDIA L4") == 121);
	assert_true(sp_flops_peak("NVIDIA L40") == 0);
	assert_true(sp_flops_peak("NVIDIA L40S") == 362.05);
	assert_true(sp_flops_peak("NVIDIA GeForce RTX 4090") == 0);
	assert_true(sp_flops_peak(NULL) == 0);
}

/* ---- attribution on a written trace ---- */

enum { N_LAUNCH = 1, N_FWD_OP, N_INNER, N_EVAL, N_NODE, N_MM, N_MOD, N_SUB, N_LATE, N_MUL, N_SUM, N_FILL, N_NSTR };
static const char *const names[N_NSTR] = { [N_LAUNCH] = "cudaLaunchKernel",
					   [N_FWD_OP] = "aten::linear",
					   [N_INNER] = "aten::addmm",
					   [N_EVAL] = "autograd::engine::evaluate_function: AddmmBackward0",
					   [N_NODE] = "AddmmBackward0",
					   [N_MM] = "aten::mm",
					   [N_MOD] = "Net",
					   [N_SUB] = "Net.fc",
					   [N_LATE] = "aten::add_",
					   [N_MUL] = "aten::mul",
					   [N_SUM] = "aten::sum",
					   [N_FILL] = "aten::fill_" };

static const char *lookup(void *ctx, uint32_t id)
{
	return id < N_NSTR ? names[id] : NULL;
}

static struct sp_trace_writer *tw;

static void put(struct sp_event e)
{
	e.device = e.kind == SP_EV_KERNEL ? 0 : SP_NO_DEVICE;
	assert_true(sp_trace_write(tw, &e) > 0);
}

static void range(uint32_t tid, uint64_t a, uint64_t b, uint32_t name, uint32_t flags, int64_t seq)
{
	put((struct sp_event){
		.kind = SP_EV_MARKER,
		.tid = tid,
		.start = a,
		.end = b,
		.name = name,
		.u.marker = { .flags = flags | (seq >= 0 ? SP_MARKF_SEQ : 0), .seq = seq > 0 ? seq : 0 } });
}

static void call(uint32_t tid, uint64_t t, uint32_t corr)
{
	put((struct sp_event){ .kind = SP_EV_API,
			       .tid = tid,
			       .start = t,
			       .end = t + 5,
			       .corr = corr,
			       .name = N_LAUNCH });
	put((struct sp_event){ .kind = SP_EV_KERNEL, .start = t + 100, .end = t + 200, .corr = corr, .name = N_MM });
}

static void test_attribution(void **state)
{
	char path[256], err[256];
	snprintf(path, sizeof path, "%s/ops.sptrace", dir);
	struct sp_trace_meta m = { .pid = 1, .rank = -1, .world_size = -1, .local_rank = -1 };
	assert_non_null(tw = sp_trace_create(path, &m, lookup, NULL, 0));
	put((struct sp_event){ .kind = SP_EV_WINDOW_BEGIN, .start = 1000, .end = 1000 });
	range(1, 1100, 1900, N_MOD, SP_MARKF_MODULE, -1);
	range(1, 1200, 1500, N_SUB, SP_MARKF_MODULE, -1);
	range(1, 1210, 1490, N_FWD_OP, SP_MARKF_OP, 7);
	range(1, 1210, 1480, N_INNER, SP_MARKF_OP, 7); /* same start as its parent: the longer one encloses */
	call(1, 1300, 10);        /* in addmm, in Net.fc */
	call(1, 1600, 11);        /* in Net only, no op */
	range(2, 3000, 3900, N_EVAL, SP_MARKF_OP, -1); /* autograd's thread: no module around */
	range(2, 3010, 3890, N_NODE, SP_MARKF_OP, 7);
	range(2, 3020, 3500, N_MM, SP_MARKF_OP, 40);
	call(2, 3100, 12); /* the backward of seq 7: Net.fc */
	call(2, 3600, 13); /* in the node, after the mm */
	range(1, 5000, 5000, N_LATE, SP_MARKF_OP, -1); /* an instant op */
	call(1, 6000, 14);       /* outside everything */
	put((struct sp_event){ .kind = SP_EV_WINDOW_END, .start = 9000, .end = 9000 });
	assert_int_equal(sp_trace_close(tw), 0);

	struct sp_trace_reader *r = sp_trace_open(path, err, sizeof err);
	assert_non_null(r);
	struct sp_windows *g = sp_windows_open(r);
	const struct sp_window *w;
	assert_int_equal(sp_windows_next(g, &w), 1);
	struct sp_opattr a = { 0 };
	sp_opattr_build(&a, r, g);
	assert_int_equal(a.nop, 6);
	assert_int_equal(a.nmod, 2);
	assert_int_equal(a.ncalls, 4); /* the call outside every range is not kept */
	int i = sp_opattr_op_of(&a, 10), bwd = -1;
	assert_true(i >= 0);
	assert_int_equal(a.op[i].e->name, N_INNER);
	assert_int_equal(a.op[a.op[i].parent].e->name, N_FWD_OP);
	assert_int_equal(sp_opattr_module_of(&a, 10, &bwd), N_SUB);
	assert_int_equal(bwd, 0);
	assert_int_equal(sp_opattr_op_of(&a, 11), -1);
	assert_int_equal(sp_opattr_module_of(&a, 11, &bwd), N_MOD);
	i = sp_opattr_op_of(&a, 12);
	assert_int_equal(a.op[i].e->name, N_MM);
	assert_int_equal(a.op[a.op[i].node].e->name, N_NODE);
	assert_int_equal(sp_opattr_module_of(&a, 12, &bwd), N_SUB); /* through seq 7 */
	assert_int_equal(bwd, 1);
	assert_int_equal(a.op[sp_opattr_op_of(&a, 13)].e->name, N_NODE);
	assert_int_equal(sp_opattr_module_of(&a, 13, &bwd), N_SUB);
	int node = a.op[sp_opattr_op_of(&a, 13)].node, fwd = sp_opattr_fwd_of(&a, node);
	assert_true(fwd >= 0);
	assert_int_equal(a.op[fwd].e->name, N_FWD_OP); /* the first forward op of seq 7 */
	assert_int_equal(sp_opattr_op_of(&a, 14), -1);
	assert_int_equal(sp_opattr_module_of(&a, 14, &bwd), 0);
	assert_int_equal(sp_opattr_op_of(&a, 99), -1); /* no call in the window */
	for (size_t k = 0; k < a.nop; k++)
		assert_int_equal(sp_opattr_index(&a, a.op[k].e), (int)k);
	sp_opattr_free(&a);
	sp_windows_close(g);
	sp_trace_close_reader(r);
}

/* The op table's JSON of the one window of the trace at path. */
static void ops_json(const char *path, char *buf, size_t n)
{
	char err[256];
	struct sp_trace_reader *r = sp_trace_open(path, err, sizeof err);
	assert_non_null(r);
	struct sp_windows *g = sp_windows_open(r);
	const struct sp_window *w;
	assert_int_equal(sp_windows_next(g, &w), 1);
	struct sp_opstats *s = sp_opstats_new(0);
	sp_opstats_add_window(s, r, g, w);
	FILE *f = tmpfile();
	assert_non_null(f);
	struct sp_out *x = sp_out_stream(f);
	sp_opstats_json(s, NULL, x);
	assert_int_equal(sp_out_close(x, 1), 0);
	rewind(f);
	size_t got = fread(buf, 1, n - 1, f);
	buf[got] = 0;
	fclose(f);
	sp_opstats_free(s);
	sp_windows_close(g);
	sp_trace_close_reader(r);
}

/* key_averages' counting: an op whose only op inside is one of its own name and which launched
 * nothing itself (mul.Scalar around mul.Tensor, sum around sum.dim_IntList) is one call. */
static void test_same_name_nesting(void **state)
{
	char path[256], json[8192];
	snprintf(path, sizeof path, "%s/nest.sptrace", dir);
	struct sp_trace_meta m = { .pid = 1, .rank = -1, .world_size = -1, .local_rank = -1 };
	assert_non_null(tw = sp_trace_create(path, &m, lookup, NULL, 0));
	put((struct sp_event){ .kind = SP_EV_WINDOW_BEGIN, .start = 1000, .end = 1000 });
	range(1, 1100, 1400, N_MUL, SP_MARKF_OP, -1); /* folds: one call */
	range(1, 1150, 1350, N_MUL, SP_MARKF_OP, -1);
	call(1, 1200, 20);
	range(1, 2000, 2600, N_MUL, SP_MARKF_OP, -1); /* launched a kernel itself: two calls */
	call(1, 2050, 21);
	range(1, 2100, 2500, N_MUL, SP_MARKF_OP, -1);
	call(1, 2200, 22);
	range(1, 3000, 3600, N_SUM, SP_MARKF_OP, -1); /* two ops inside: two sums */
	range(1, 3050, 3200, N_SUM, SP_MARKF_OP, -1);
	call(1, 3100, 23);
	range(1, 3300, 3400, N_FILL, SP_MARKF_OP, -1);
	range(2, 4000, 4900, N_MUL, SP_MARKF_OP, -1); /* a chain of three: one call */
	range(2, 4100, 4800, N_MUL, SP_MARKF_OP, -1);
	range(2, 4200, 4700, N_MUL, SP_MARKF_OP, -1);
	call(2, 4300, 24);
	put((struct sp_event){ .kind = SP_EV_WINDOW_END, .start = 9000, .end = 9000 });
	assert_int_equal(sp_trace_close(tw), 0);
	ops_json(path, json, sizeof json);
	assert_non_null(strstr(json, "{\"name\":\"aten::mul\",\"shapes\":null,\"calls\":4,\"kernels\":4,"
				     "\"self_ns\":400,\"total_ns\":500,"));
	assert_non_null(strstr(json, "{\"name\":\"aten::sum\",\"shapes\":null,\"calls\":2,\"kernels\":1,"
				     "\"self_ns\":100,\"total_ns\":200,"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_opmsg),       cmocka_unit_test(test_shapes),
		cmocka_unit_test(test_flops),       cmocka_unit_test(test_peaks),
		cmocka_unit_test(test_attribution), cmocka_unit_test(test_same_name_nesting),
	};
	if (make_scratch("ops") < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, remove_scratch);
}
