/* The resource alarms: memory (the measure of vm_memory_calculation_strategy
 * against the high watermark) and disk (data_dir's free space against
 * disk_free_limit), checked on the housekeeping timer, never per message.
 * Either one blocks publishers (conn_set_alarm with the set in effect);
 * the log says what RabbitMQ's says when one is set or cleared.
 */
#include <malloc.h>

#include "admin.h"

/* RabbitMQ's disk monitor checks again after the time the space left above
 * the limit would take to fill at this rate (bytes per ms, its FAST_RATE). */
#define DISK_FILL_RATE (250u * 1000u)
#define DISK_MIN_INTERVAL_MS 100

static void tell_conn(void *arg, conn *c) { conn_set_alarm(c, *(unsigned *)arg); }

static void set_alarm(server *s, unsigned alarm, bool on, const char *resource)
{
    server_set_alarm(s, alarm, on);
    /* RabbitMQ 3.10's words, its banner included */
    log_msg(LOG_WARNING, "%s resource limit alarm %s on node %s.", resource,
            on ? "set" : "cleared", server_node_name(s));
    if (on)
        log_msg(LOG_WARNING, "*** Publishers will be blocked until this alarm clears ***");
    unsigned alarms = server_alarms(s);
    admin_foreach_conn(s, NULL, tell_conn, &alarms);
    if (server_stream_hub(s))
        sconn_hub_set_alarm(server_stream_hub(s), alarms);
}

void admin_check_memory(server *s)
{
    size_t used = server_measure_memory(s), limit = server_memory_limit(s);
    if (server_paging(s) && server_config(s)->memory_strategy == CONFIG_MEMORY_RSS) {
        malloc_trim(0); /* freed pages back to the system, so RSS shows what is held */
        used = server_measure_memory(s);
    }
    bool alarm = used > limit;
    if (alarm == server_memory_alarm(s))
        return;
    log_msg(LOG_INFO, "vm_memory_high_watermark %s. Memory used:%zu allowed:%zu",
            alarm ? "set" : "clear", used, limit);
    set_alarm(s, SERVER_ALARM_MEMORY, alarm, "memory");
}

uint64_t admin_check_disk(server *s)
{
    uint64_t max = server_config(s)->disk_check_max_interval_ms, limit = server_disk_free_limit(s);
    if (!server_measure_disk(s))
        return max; /* as RabbitMQ: an unreadable figure changes nothing */
    uint64_t free = server_disk_free(s);
    bool alarm = free < limit;
    if (alarm != server_disk_alarm(s)) {
        log_msg(LOG_INFO, "Free disk space is %s. Free bytes: %llu. Limit: %llu",
                alarm ? "insufficient" : "sufficient", (unsigned long long)free,
                (unsigned long long)limit);
        set_alarm(s, SERVER_ALARM_DISK, alarm, "disk");
    }
    uint64_t wait = alarm ? 0 : (free - limit) / DISK_FILL_RATE;
    return wait < DISK_MIN_INTERVAL_MS ? DISK_MIN_INTERVAL_MS : wait > max ? max : wait;
}

static void limit_changed(void *arg, conn *c) { (void)arg, conn_content_limit_changed(c); }

void admin_set_memory_watermark(server *s, double relative, uint64_t absolute)
{
    server_set_watermark(s, relative, absolute);
    log_msg(LOG_INFO, "memory high watermark set to %zu bytes (%s)", server_memory_limit(s),
            absolute ? "absolute" : "relative to the RAM");
    admin_foreach_conn(s, NULL, limit_changed, NULL);
    admin_check_memory(s);
}
