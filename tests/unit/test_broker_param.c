/* Runtime parameters in the broker: a vhost's set (sorted, replaced in
 * place, listed by component), the global set with its generated
 * internal_cluster_id, persistence across restarts, and a vhost's
 * parameters going with it -- with a real server but no network. */
#include "test_broker_util.h"

typedef struct seen {
    char text[512];
    size_t n;
} seen;

/* "component/name=value;" for each parameter listed. */
static void note(void *arg, const param_spec *p)
{
    seen *s = arg;
    size_t len = strlen(s->text);
    snprintf(s->text + len, sizeof s->text - len, "%s/%s=%s;", p->component, p->name, p->value);
    s->n++;
}

static seen list(param_set *ps, const char *component)
{
    seen s = {"", 0};
    param_foreach(ps, component, note, &s);
    return s;
}

static void put(param_set *ps, const char *component, const char *name, const char *value,
                bool want_created)
{
    param_spec p = {component, name, value};
    bool created = !want_created;
    assert_true(param_put(ps, &p, &created));
    assert_int_equal(created, want_created);
}

static vhost *fresh_vhost(const char *name)
{
    char err[256];
    meta_vhost v = {name, "", "", "", false};
    assert_true(admin_put_vhost(srv, &v, err, sizeof err));
    return server_vhost(srv, AMQP_CSTR(name));
}

static void test_vhost_set(void **state)
{
    (void)state;
    param_set *ps = vhost_params(fresh_vhost("pv1"));
    param_spec got;
    put(ps, "shovel", "b", "{\"src-uri\":\"amqp://\"}", true);
    put(ps, "federation-upstream", "z", "{\"uri\":\"amqp://z\"}", true);
    put(ps, "federation-upstream", "a", "{\"uri\":\"amqp://a\"}", true);
    put(ps, "federation-upstream", "a", "{\"uri\":\"amqp://a2\"}", false);
    assert_int_equal(param_count(ps), 3);
    assert_string_equal(list(ps, NULL).text,
                        "federation-upstream/a={\"uri\":\"amqp://a2\"};"
                        "federation-upstream/z={\"uri\":\"amqp://z\"};"
                        "shovel/b={\"src-uri\":\"amqp://\"};");
    assert_int_equal(list(ps, "shovel").n, 1);
    assert_int_equal(list(ps, "nothing").n, 0);
    assert_true(param_get(ps, "federation-upstream", "z", &got));
    assert_string_equal(got.value, "{\"uri\":\"amqp://z\"}");
    assert_false(param_get(ps, "shovel", "z", &got)); /* names are per component */
    assert_true(param_delete(ps, "federation-upstream", "a"));
    assert_false(param_delete(ps, "federation-upstream", "a"));
    assert_false(param_delete(ps, "nothing", "b"));
    assert_string_equal(list(ps, NULL).text, "federation-upstream/z={\"uri\":\"amqp://z\"};"
                                             "shovel/b={\"src-uri\":\"amqp://\"};");
    /* many, in any order, come back sorted */
    char name[16];
    for (int i = 99; i >= 0; i--) {
        snprintf(name, sizeof name, "n%03d", (i * 37) % 100);
        put(ps, "shovel", name, "{}", true);
    }
    seen all = list(ps, "shovel");
    assert_int_equal(all.n, 101);
    assert_non_null(strstr(all.text, "shovel/b={\"src-uri\":\"amqp://\"};shovel/n000={};"
                                     "shovel/n001={};shovel/n002={};"));
}

/* The cluster id: RabbitMQ's shape, made once and kept across restarts. */
static void test_global_set_and_cluster_id(void **state)
{
    (void)state;
    param_set *g = server_params(srv);
    param_spec id;
    assert_true(param_get(g, NULL, "internal_cluster_id", &id));
    assert_int_equal(strlen(id.value), 2 + strlen("rabbitmq-cluster-id-") + 22);
    assert_int_equal(strncmp(id.value, "\"rabbitmq-cluster-id-", 21), 0);
    assert_int_equal(strspn(id.value + 21, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                            "0123456789-_"),
                     22);
    char kept[64];
    snprintf(kept, sizeof kept, "%s", id.value);
    put(g, "ignored-for-globals", "cluster_name", "\"east\"", true);
    assert_true(param_get(g, "any", "cluster_name", &id));
    assert_string_equal(id.component, "");
    test_broker_free(srv);
    srv = start_server();
    assert_non_null(srv);
    g = server_params(srv);
    assert_true(param_get(g, NULL, "internal_cluster_id", &id));
    assert_string_equal(id.value, kept);
    assert_true(param_get(g, NULL, "cluster_name", &id));
    assert_string_equal(id.value, "\"east\"");
    assert_true(param_delete(g, NULL, "cluster_name"));
    assert_int_equal(param_count(g), 1);
}

/* Parameters survive a restart; a deleted vhost's are gone, in memory and
 * in the store, and a vhost of the same name starts without them. */
static void test_restart_and_vhost_delete(void **state)
{
    (void)state;
    char err[256];
    put(vhost_params(fresh_vhost("pv2")), "shovel", "s1", "{\"a\":1}", true);
    put(vhost_params(fresh_vhost("pv3")), "shovel", "s1", "{\"b\":2}", true);
    test_broker_free(srv);
    srv = start_server();
    assert_non_null(srv);
    param_spec got;
    assert_true(param_get(vhost_params(server_vhost(srv, AMQP_CSTR("pv2"))), "shovel", "s1", &got));
    assert_string_equal(got.value, "{\"a\":1}");
    assert_true(admin_delete_vhost(srv, "pv2", err, sizeof err));
    assert_int_equal(param_count(vhost_params(fresh_vhost("pv2"))), 0);
    test_broker_free(srv);
    srv = start_server();
    assert_non_null(srv);
    assert_int_equal(param_count(vhost_params(server_vhost(srv, AMQP_CSTR("pv2")))), 0);
    assert_true(param_get(vhost_params(server_vhost(srv, AMQP_CSTR("pv3"))), "shovel", "s1", &got));
    assert_string_equal(got.value, "{\"b\":2}");
}

/* A vhost's limits follow its (vhost-limits, limits) parameter: set,
 * changed, cleared ([] or deleted), and restored at start; the checks
 * count its connections and queues. */
static void test_vhost_limits(void **state)
{
    (void)state;
    vhost *v = fresh_vhost("pv4");
    param_set *ps = vhost_params(v);
    assert_int_equal(vhost_max_connections(v), -1);
    assert_int_equal(vhost_max_queues(v), -1);
    put(ps, "vhost-limits", "limits", "{\"max-connections\":2,\"max-queues\":0}", true);
    assert_int_equal(vhost_max_connections(v), 2);
    assert_int_equal(vhost_max_queues(v), 0);
    assert_true(vhost_queue_limit_reached(v)); /* 0: none allowed */
    assert_true(vhost_connection_take(v));
    assert_true(vhost_connection_take(v));
    assert_false(vhost_connection_take(v));
    assert_int_equal(vhost_connection_count(v), 2);
    vhost_connection_left(v);
    assert_true(vhost_connection_take(v));
    put(ps, "vhost-limits", "limits", "{\"max-connections\":-7}", false); /* negative: none */
    assert_int_equal(vhost_max_connections(v), -1);
    assert_int_equal(vhost_max_queues(v), -1);
    assert_false(vhost_queue_limit_reached(v));
    assert_true(vhost_connection_take(v));
    put(ps, "vhost-limits", "other", "{\"max-queues\":1}", true); /* only "limits" counts */
    assert_int_equal(vhost_max_queues(v), -1);
    put(ps, "vhost-limits", "limits", "{\"max-queues\":5}", false);
    test_broker_free(srv); /* the connections taken go with the server */
    srv = start_server();
    assert_non_null(srv);
    v = server_vhost(srv, AMQP_CSTR("pv4"));
    assert_int_equal(vhost_max_queues(v), 5);
    assert_int_equal(vhost_connection_count(v), 0);
    put(vhost_params(v), "vhost-limits", "limits", "[]", false);
    assert_int_equal(vhost_max_queues(v), -1);
    put(vhost_params(v), "vhost-limits", "limits", "{\"max-queues\":1}", false);
    assert_true(param_delete(vhost_params(v), "vhost-limits", "limits"));
    assert_int_equal(vhost_max_queues(v), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vhost_set),
        cmocka_unit_test(test_global_set_and_cluster_id),
        cmocka_unit_test(test_restart_and_vhost_delete),
        cmocka_unit_test(test_vhost_limits),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
