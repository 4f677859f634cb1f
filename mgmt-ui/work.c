/* The management plane's share of the loop: every request handler, list
 * slice and scrape slice runs as a job step here, round-robin, and a loop
 * turn spends at most about TURN_BUDGET_US on them before the loop polls
 * its sockets again. Twenty clients looping a 10,000-queue listing then
 * cost AMQP clients a millisecond or two per turn, not a turn made of
 * twenty listings (tests/bench/mgmt.sh starve).
 *
 * A step does a bounded piece of work (one slice, one phase) and queues
 * its job again when it has more ready; a job waiting for its client to
 * read is not queued.
 *
 * When a turn runs: a zero-timeout timer at the loop's idle priority
 * fires in the first loop iteration where no client event is active (a
 * timer, not an active event, so the loop polls I/O, without blocking,
 * between turns); and so that a broker busy with clients every iteration
 * still answers its API, a timer at normal priority fires STARVE_MS after
 * work was queued, whichever comes first. Clients then wait at most one
 * turn's budget for the management plane.
 */
#include <event2/event.h>
#include <stdlib.h>
#include <time.h>

#include "mgmt_int.h"

#define TURN_BUDGET_US 1000
#define STARVE_MS 20

struct mgmt_work {
    struct event *idle, *deadline;
    TAILQ_HEAD(, mgmt_job) ready;
};

uint64_t mgmt_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void arm(mgmt_work *w)
{
    static const struct timeval now = {0, 0}, starve = {0, STARVE_MS * 1000};
    if (!evtimer_pending(w->idle, NULL))
        evtimer_add(w->idle, &now);
    if (!evtimer_pending(w->deadline, NULL))
        evtimer_add(w->deadline, &starve);
}

static void run_turn(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    mgmt_work *w = arg;
    evtimer_del(w->idle);
    evtimer_del(w->deadline);
    uint64_t start = mgmt_now_us();
    mgmt_job *j;
    while ((j = TAILQ_FIRST(&w->ready))) {
        TAILQ_REMOVE(&w->ready, j, link);
        j->queued = false;
        j->step(j); /* may free j */
        if (mgmt_now_us() - start >= TURN_BUDGET_US)
            break;
    }
    if (!TAILQ_EMPTY(&w->ready))
        arm(w);
}

mgmt_work *mgmt_work_new(struct event_base *base)
{
    mgmt_work *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    TAILQ_INIT(&w->ready);
    w->idle = evtimer_new(base, run_turn, w);
    w->deadline = evtimer_new(base, run_turn, w);
    if (!w->idle || !w->deadline || event_priority_set(w->idle, LOOP_PRIORITY_IDLE) != 0) {
        mgmt_work_free(w);
        return NULL;
    }
    return w;
}

void mgmt_work_free(mgmt_work *w)
{
    if (!w)
        return;
    if (w->idle)
        event_free(w->idle);
    if (w->deadline)
        event_free(w->deadline);
    free(w);
}

void mgmt_work_queue(mgmt_work *w, mgmt_job *j)
{
    if (j->queued)
        return;
    j->queued = true;
    TAILQ_INSERT_TAIL(&w->ready, j, link);
    arm(w);
}

void mgmt_work_cancel(mgmt_work *w, mgmt_job *j)
{
    if (!j->queued)
        return;
    TAILQ_REMOVE(&w->ready, j, link);
    j->queued = false;
}
