/* SPDX-License-Identifier: MIT */
/* test_ring.c - per-thread rings: with many producers and one consumer every event arrives in
 * its thread's order or is counted as dropped (pushed == received + dropped, exactly); a rewind to
 * the ring's start keeps order and capacity; exited
 * threads' rings are freed once drained; a fork child's pushes touch nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "collector/out/ring.h"

enum { MAXT = 32 };
#define WAIT_S 30 /* bound of every wait on producers: ample on a loaded machine */

/* Monotonic milliseconds. This function can't fail. */
static uint64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

struct check {
	uint64_t next[MAXT];     /* expected minimum next sequence number per producer */
	uint64_t received[MAXT];
	int out_of_order;
};

static void consume(void *ctx, const struct sp_event *ev)
{
	struct check *c = ctx;
	uint32_t t = ev->tid;
	uint64_t seq = ev->start;
	if (t >= MAXT || seq < c->next[t] || ev->end != seq * 3 || ev->corr != (uint32_t)seq)
		c->out_of_order++;
	else
		c->next[t] = seq + 1;
	c->received[t]++;
}

struct producer {
	uint32_t id;
	uint64_t n;
	uint64_t dropped;        /* pushes that returned -1 */
	atomic_int *go;
};

static void *produce(void *arg)
{
	struct producer *p = arg;
	while (p->go && !atomic_load(p->go))
		;
	for (uint64_t i = 0; i < p->n; i++) {
		struct sp_event ev = { .kind = SP_EV_API, .tid = p->id, .start = i, .end = i * 3, .corr = (uint32_t)i };
		if (sp_ring_push(&ev) < 0)
			p->dropped++;
	}
	return NULL;
}

static void test_many_producers_one_consumer(void **state)
{
	enum { T = 16, N = 200000 };
	sp_ring_configure(8192);
	uint64_t pushed0 = sp_ring_pushed(), dropped0 = sp_ring_dropped();
	struct check c = { 0 };
	struct producer p[T];
	pthread_t th[T];
	atomic_int go = 0;
	int made = 0;
	for (; made < T; made++) {
		p[made] = (struct producer){ .id = (uint32_t)made, .n = N, .go = &go };
		if (pthread_create(&th[made], NULL, produce, &p[made]))
			break;
	}
	atomic_store(&go, 1); /* also when a create failed: the others must not spin on */
	uint64_t got = 0, give_up = now_ms() + WAIT_S * 1000;
	int joined[T] = { 0 };
	for (int done = 0; done < made;) { /* drain while they push and exit */
		got += sp_ring_drain(consume, &c);
		for (int t = 0; t < made; t++)
			if (!joined[t] && pthread_tryjoin_np(th[t], NULL) == 0)
				joined[t] = 1, done++;
		if (done < made && now_ms() > give_up)
			fail_msg("gave up after %d s waiting for producers to exit: %d of %d joined", WAIT_S, done,
				 made);
	}
	assert_int_equal(made, T); /* else pthread_create failed */
	got += sp_ring_drain(consume, &c);

	uint64_t received = 0, dropped = 0;
	assert_int_equal(c.out_of_order, 0);
	for (int t = 0; t < T; t++) {
		assert_int_equal(c.received[t] + p[t].dropped, N);
		received += c.received[t];
		dropped += p[t].dropped;
	}
	print_message("received %llu, dropped %llu of %d\n", (unsigned long long)received, (unsigned long long)dropped,
		      T * N);
	assert_int_equal(got, received);
	assert_int_equal(sp_ring_pushed() - pushed0, received + dropped);
	assert_int_equal(sp_ring_dropped() - dropped0, dropped);
	assert_int_equal(sp_ring_count(), 0); /* every producer exited: all freed */
}

static void test_full_ring_drops_exactly(void **state)
{
	enum { S = 64 };
	sp_ring_configure(50); /* rounded up to 64 */
	struct check c = { 0 };
	uint64_t dropped0 = sp_ring_dropped();
	struct producer p = { .id = 0, .n = 1000 };
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, produce, &p), 0); /* nothing drains meanwhile */
	pthread_join(th, NULL);
	assert_int_equal(p.dropped, 1000 - S);
	assert_int_equal(sp_ring_dropped() - dropped0, 1000 - S);
	assert_int_equal(sp_ring_count(), 1); /* dead, not drained yet: still there */
	assert_int_equal(sp_ring_drain(consume, &c), S);
	assert_int_equal(c.received[0], S);
	assert_int_equal(c.next[0], S); /* the first S, in order */
	assert_int_equal(sp_ring_count(), 0);
	assert_int_equal(sp_ring_dropped() - dropped0, 1000 - S); /* freed ring's counts kept */
}

struct rewind_result {
	uint64_t pushed, received, dropped;
	int out_of_order;
};

/* Runs in a thread of its own (a fresh ring of 64 slots): pushes 40, drains (the ring is empty
 * at 40: a rewind is offered), then fills the ring to the brim from the next lap's start and
 * drains, twice over. Nothing may be dropped (a rewind keeps the full capacity) and nothing
 * but the events pushed may come out (the slots jumped over hold an earlier lap's events). */
static void *rewind_thread(void *arg)
{
	struct rewind_result *r = arg;
	struct check c = { 0 };
	uint64_t seq = 0;
	for (int round = 0; round < 3; round++) {
		int n = round ? 64 : 40;
		for (int i = 0; i < n; i++, seq++) {
			struct sp_event ev = { .kind = SP_EV_API,
					       .tid = 0,
					       .start = seq,
					       .end = seq * 3,
					       .corr = (uint32_t)seq };
			r->dropped += sp_ring_push(&ev) < 0;
		}
		r->received += sp_ring_drain(consume, &c);
		if (round == 0) { /* a second push after the offer: the one that rewinds, then more */
			for (int i = 0; i < 10; i++, seq++) {
				struct sp_event ev = { .kind = SP_EV_API,
						       .start = seq,
						       .end = seq * 3,
						       .corr = (uint32_t)seq };
				r->dropped += sp_ring_push(&ev) < 0;
			}
			r->received += sp_ring_drain(consume, &c);
		}
	}
	r->pushed = seq;
	r->out_of_order = c.out_of_order + (c.next[0] != seq);
	return NULL;
}

static void test_rewind_keeps_order_and_capacity(void **state)
{
	sp_ring_configure(64);
	uint64_t pushed0 = sp_ring_pushed();
	struct rewind_result r = { 0 };
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, rewind_thread, &r), 0);
	pthread_join(th, NULL);
	sp_ring_drain(consume, &(struct check){ 0 }); /* frees the dead ring */
	assert_int_equal(r.dropped, 0);
	assert_int_equal(r.out_of_order, 0);
	assert_int_equal(r.received, r.pushed);
	assert_int_equal(sp_ring_pushed() - pushed0, r.pushed); /* slots jumped over are not pushes */
}

/* Short-lived threads come and go while long ones push; all their rings end up freed. */
static void test_exiting_threads_freed(void **state)
{
	enum { LONG = 2, WAVES = 20, SHORT = 8, N = 5000 };
	sp_ring_configure(65536);
	uint64_t pushed0 = sp_ring_pushed();
	struct check c = { 0 };
	/* static: a producer outliving a failed assertion writes here, not into a dead frame */
	static struct producer lp[LONG], sp[SHORT];
	pthread_t lt[LONG], st[SHORT];
	for (int i = 0; i < LONG; i++) {
		lp[i] = (struct producer){ .id = (uint32_t)i, .n = 50 * N };
		assert_int_equal(pthread_create(&lt[i], NULL, produce, &lp[i]), 0);
	}
	uint64_t short_received = 0;
	for (int w = 0; w < WAVES; w++) {
		for (int i = 0; i < SHORT; i++) {
			sp[i] = (struct producer){ .id = (uint32_t)(LONG + i), .n = N };
			assert_int_equal(pthread_create(&st[i], NULL, produce, &sp[i]), 0);
		}
		for (int i = 0; i < SHORT; i++)
			pthread_join(st[i], NULL);
		sp_ring_drain(consume, &c);
		for (int i = 0; i < SHORT; i++) {
			assert_int_equal(sp[i].dropped, 0);
			short_received += c.received[LONG + i];
			c.received[LONG + i] = 0;
			c.next[LONG + i] = 0;
		}
		assert_true(sp_ring_count() <= LONG); /* the wave's rings are gone */
	}
	for (int i = 0; i < LONG; i++)
		pthread_join(lt[i], NULL);
	sp_ring_drain(consume, &c);
	assert_int_equal(c.out_of_order, 0);
	assert_int_equal(short_received, (uint64_t)WAVES * SHORT * N);
	for (int i = 0; i < LONG; i++)
		assert_int_equal(c.received[i] + lp[i].dropped, 50 * N);
	assert_int_equal(sp_ring_count(), 0);
	assert_int_equal(sp_ring_pushed() - pushed0,
			 short_received + c.received[0] + c.received[1] + lp[0].dropped + lp[1].dropped);
}

/* In a fork child, after sp_ring_disable_all, pushes fail silently and the inherited ring (with
 * queued events) is neither drained into nor counted. */
static void test_fork_child_disabled(void **state)
{
	struct sp_event ev = { .kind = SP_EV_MARKER };
	assert_int_equal(sp_ring_push(&ev), 0); /* this thread's ring now holds one event */
	pid_t pid = fork();
	if (pid == 0) {
		uint64_t pushed = sp_ring_pushed(), dropped = sp_ring_dropped();
		sp_ring_disable_all();
		int ok = sp_ring_push(&ev) == -1 && sp_ring_pushed() == pushed && sp_ring_dropped() == dropped;
		_exit(ok ? 0 : 1);
	}
	int status;
	waitpid(pid, &status, 0);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	struct check c = { 0 };
	assert_int_equal(sp_ring_drain(consume, &c), 1); /* the parent is unaffected */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_many_producers_one_consumer),
		cmocka_unit_test(test_full_ring_drops_exactly),
		cmocka_unit_test(test_rewind_keeps_order_and_capacity),
		cmocka_unit_test(test_exiting_threads_freed),
		cmocka_unit_test(test_fork_child_disabled),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
