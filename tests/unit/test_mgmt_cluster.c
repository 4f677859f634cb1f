/* The cluster's status as the management API shows it (cluster/status_json.c:
 * cluster_status_json, cluster_nodes_json; core's server_cluster_node_name):
 * a leader's view with lag, a follower's without, ISR members without a
 * record, and node names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "../../cluster/cluster.h"

static cluster_node_status node(const char *name, bool connected, uint64_t acked, uint64_t lag_bytes,
                                uint64_t lag_ms)
{
    cluster_node_status n = {.replication_port = 5680, .alive = true, .connected = connected,
                             .snapshot_done = connected, .acked_seq = acked,
                             .lag_bytes = lag_bytes, .lag_ms = lag_ms};
    snprintf(n.name, sizeof n.name, "%s", name);
    snprintf(n.host, sizeof n.host, "10.0.0.%c", name[1]);
    return n;
}

/* n1 leads; n2 is connected and in the ISR, n3 has a record but no session,
 * n4 is in the ISR without a record (its lease lapsed). */
static cluster_status leader_view(void)
{
    cluster_status st = {.role = CLUSTER_LEADER, .leader_view = true, .epoch = 42, .min_isr = 2,
                         .confirms_held = false,
                         .synced_seq = 900, .replicated_seq = 880, .n_nodes = 3, .n_isr = 3};
    strcpy(st.cluster_name, "prod");
    strcpy(st.node_name, "n1");
    strcpy(st.leader, "n1");
    st.nodes[0] = node("n1", false, 0, 0, 0);
    st.nodes[1] = node("n2", true, 880, 4096, 12);
    st.nodes[2] = node("n3", false, 0, 0, 0);
    strcpy(st.isr[0], "n1");
    strcpy(st.isr[1], "n2");
    strcpy(st.isr[2], "n4");
    return st;
}

static json_t *by_name(json_t *arr, const char *name)
{
    size_t i;
    json_t *n;
    json_array_foreach(arr, i, n)
        if (strcmp(json_string_value(json_object_get(n, "name")), name) == 0)
            return n;
    fail_msg("no node %s", name);
    return NULL;
}

static json_int_t int_of(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

static void test_names(void **state)
{
    (void)state;
    char out[160];
    server_cluster_node_name("n1", out, sizeof out);
    assert_string_equal(out, "warren@n1");
    server_cluster_node_name("rabbit@host-a", out, sizeof out);
    assert_string_equal(out, "rabbit@host-a");
}

static void test_leader_status(void **state)
{
    (void)state;
    cluster_status st = leader_view();
    json_t *o = cluster_status_json(&st);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "cluster_name")), "prod");
    assert_string_equal(json_string_value(json_object_get(o, "node")), "warren@n1");
    assert_string_equal(json_string_value(json_object_get(o, "role")), "leader");
    assert_string_equal(json_string_value(json_object_get(o, "leader")), "warren@n1");
    assert_int_equal(int_of(o, "epoch"), 42);
    assert_int_equal(int_of(o, "min_isr"), 2);
    assert_int_equal(int_of(o, "isr_size"), 3);
    assert_true(json_is_false(json_object_get(o, "confirms_held")));
    assert_int_equal(int_of(o, "synced_sequence"), 900);
    assert_int_equal(int_of(o, "replicated_sequence"), 880);
    assert_string_equal(json_string_value(json_array_get(json_object_get(o, "isr"), 2)), "warren@n4");
    json_t *nodes = json_object_get(o, "nodes");
    assert_int_equal(json_array_size(nodes), 4);
    json_t *me = by_name(nodes, "warren@n1"), *n2 = by_name(nodes, "warren@n2");
    json_t *n3 = by_name(nodes, "warren@n3"), *n4 = by_name(nodes, "warren@n4");
    assert_int_equal(int_of(me, "lag_bytes"), 0);
    assert_int_equal(int_of(me, "acked_sequence"), 900);
    assert_null(json_object_get(me, "connected")); /* the leader's view of others only */
    assert_string_equal(json_string_value(json_object_get(n2, "role")), "follower");
    assert_string_equal(json_string_value(json_object_get(n2, "host")), "10.0.0.2");
    assert_int_equal(int_of(n2, "lag_bytes"), 4096);
    assert_int_equal(int_of(n2, "lag_ms"), 12);
    assert_int_equal(int_of(n2, "acked_sequence"), 880);
    assert_true(json_is_true(json_object_get(n2, "in_sync")));
    assert_true(json_is_true(json_object_get(n2, "connected")));
    /* no session: no lag to speak of */
    assert_true(json_is_null(json_object_get(n3, "lag_bytes")));
    assert_true(json_is_false(json_object_get(n3, "in_sync")));
    assert_true(json_is_false(json_object_get(n3, "connected")));
    /* in the ISR without a record */
    assert_true(json_is_false(json_object_get(n4, "alive")));
    assert_true(json_is_null(json_object_get(n4, "host")));
    assert_true(json_is_true(json_object_get(n4, "in_sync")));
    json_decref(o);
}

static void test_follower_status(void **state)
{
    (void)state;
    cluster_status st = leader_view();
    st.role = CLUSTER_FOLLOWER;
    st.leader_view = false; /* the leader's status not read (yet) */
    strcpy(st.node_name, "n2");
    st.synced_seq = 870;
    for (unsigned i = 0; i < st.n_nodes; i++) /* a follower has no sessions */
        st.nodes[i] = node(st.nodes[i].name, false, 0, 0, 0);
    json_t *o = cluster_status_json(&st);
    assert_string_equal(json_string_value(json_object_get(o, "role")), "follower");
    assert_string_equal(json_string_value(json_object_get(o, "leader")), "warren@n1");
    assert_true(json_is_null(json_object_get(o, "confirms_held")));
    assert_true(json_is_null(json_object_get(o, "replicated_sequence")));
    json_t *nodes = json_object_get(o, "nodes");
    json_t *me = by_name(nodes, "warren@n2"), *lead = by_name(nodes, "warren@n1");
    assert_int_equal(int_of(me, "acked_sequence"), 870);
    assert_true(json_is_null(json_object_get(me, "lag_bytes")));
    assert_true(json_is_null(json_object_get(lead, "acked_sequence")));
    assert_string_equal(json_string_value(json_object_get(lead, "role")), "leader");
    json_decref(o);
}

/* A follower that read the leader's view from etcd shows the lag too. */
static void test_follower_with_the_leaders_view(void **state)
{
    (void)state;
    cluster_status lead = leader_view();
    char *text = cluster_view_encode(&lead);
    assert_non_null(text);
    cluster_status st = leader_view();
    st.role = CLUSTER_FOLLOWER;
    st.leader_view = false;
    strcpy(st.node_name, "n2");
    st.synced_seq = 870;
    for (unsigned i = 0; i < st.n_nodes; i++)
        st.nodes[i] = node(st.nodes[i].name, false, 0, 0, 0);
    st.epoch = 41; /* another leadership's view is not taken */
    assert_false(cluster_view_decode(text, strlen(text), &st));
    assert_false(st.leader_view);
    st.epoch = 42;
    assert_true(cluster_view_decode(text, strlen(text), &st));
    assert_false(cluster_view_decode("{", 1, &st));
    free(text);
    json_t *o = cluster_status_json(&st);
    assert_true(json_is_false(json_object_get(o, "confirms_held")));
    assert_int_equal(int_of(o, "replicated_sequence"), 880);
    json_t *nodes = json_object_get(o, "nodes");
    json_t *me = by_name(nodes, "warren@n2"), *n3 = by_name(nodes, "warren@n3");
    assert_int_equal(int_of(me, "lag_bytes"), 4096);
    assert_int_equal(int_of(me, "lag_ms"), 12);
    assert_int_equal(int_of(me, "acked_sequence"), 870); /* its own, not the leader's older one */
    assert_true(json_is_null(json_object_get(n3, "lag_bytes")));
    assert_int_equal(int_of(by_name(nodes, "warren@n1"), "lag_bytes"), 0);
    json_decref(o);
}

static void test_api_nodes(void **state)
{
    (void)state;
    cluster_status st = leader_view();
    json_t *a = cluster_nodes_json(&st);
    assert_int_equal(json_array_size(a), 4);
    json_t *me = json_array_get(a, 0), *n2 = by_name(a, "warren@n2"), *n4 = by_name(a, "warren@n4");
    assert_string_equal(json_string_value(json_object_get(me, "name")), "warren@n1");
    assert_string_equal(json_string_value(json_object_get(me, "cluster_role")), "leader");
    assert_string_equal(json_string_value(json_object_get(n2, "type")), "disc");
    assert_true(json_is_true(json_object_get(n2, "running")));
    assert_int_equal(int_of(n2, "replication_lag_bytes"), 4096);
    assert_int_equal(int_of(n2, "replication_lag_ms"), 12);
    assert_true(json_is_false(json_object_get(n4, "running")));
    json_decref(a);

    /* before its own record is read back, the node is listed first anyway */
    st.n_nodes = 0;
    st.n_isr = 0;
    a = cluster_nodes_json(&st);
    assert_int_equal(json_array_size(a), 1);
    assert_true(json_is_true(json_object_get(json_array_get(a, 0), "running")));
    json_decref(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_leader_status),
        cmocka_unit_test(test_follower_status),
        cmocka_unit_test(test_follower_with_the_leaders_view),
        cmocka_unit_test(test_api_nodes),
    };
    cmocka_set_message_output(CM_OUTPUT_TAP);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
