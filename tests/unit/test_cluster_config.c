/* The cluster's pieces that need no etcd: its settings (core/config_cluster.c)
 * and the ISR record as etcd holds it (cluster/isr.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../cluster/cluster_int.h"

static bool set(config *c, const char *k, const char *v, char *err)
{
    return config_set(c, k, v, "--set", err, 300);
}

static void test_no_endpoint_is_a_single_node(void **state)
{
    (void)state;
    config c;
    config_defaults(&c);
    assert_int_equal(c.cluster.n_endpoints, 0);
    assert_string_equal(c.cluster.name, "warren");
    assert_int_equal(c.cluster.replication_port, 5680);
    assert_int_equal(c.cluster.min_isr, 2);
    assert_int_equal(c.cluster.lease_ttl_s, 3);
    assert_int_equal(c.cluster.isr_timeout_ms, 5000);
}

static void test_settings(void **state)
{
    (void)state;
    config c;
    char err[300];
    config_defaults(&c);
    assert_true(set(&c, "cluster.etcd.endpoints.2", "http://10.0.0.2:2379", err));
    assert_true(set(&c, "cluster.etcd.endpoints.1", "https://10.0.0.1:2379", err));
    assert_int_equal(c.cluster.n_endpoints, 2);
    assert_string_equal(c.cluster.endpoints[0], "https://10.0.0.1:2379");
    assert_true(set(&c, "cluster.name", "prod", err));
    assert_true(set(&c, "cluster.node_name", "n1", err));
    assert_true(set(&c, "cluster.advertised_host", "10.0.0.1", err));
    assert_true(set(&c, "cluster.replication.port", "6000", err));
    assert_true(set(&c, "cluster.min_isr", "3", err));
    assert_true(set(&c, "cluster.lease_ttl", "5", err));
    assert_true(set(&c, "cluster.isr_timeout", "1.5", err));
    assert_int_equal(c.cluster.isr_timeout_ms, 1500);
    assert_int_equal(c.cluster.min_isr, 3);
    assert_int_equal(c.cluster.lease_ttl_s, 5);
    assert_int_equal(c.cluster.replication_port, 6000);
}

static void test_bad_values_say_why(void **state)
{
    (void)state;
    config c;
    char err[300];
    config_defaults(&c);
    static const char *const bad[][2] = {
        {"cluster.etcd.endpoints.1", "10.0.0.1:2379"}, /* no scheme */
        {"cluster.etcd.endpoints.0", "http://10.0.0.1:2379"},
        {"cluster.etcd.endpoints.10", "http://10.0.0.1:2379"},
        {"cluster.name", ""},
        {"cluster.min_isr", "0"},
        {"cluster.lease_ttl", "1"},
        {"cluster.isr_timeout", "0"},
        {"cluster.isr_timeout", "soon"},
        {"cluster.replication.port", "70000"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        assert_false(set(&c, bad[i][0], bad[i][1], err));
        assert_non_null(strstr(err, bad[i][0]));
        assert_non_null(strstr(err, "bad value"));
    }
    assert_false(set(&c, "cluster.nonsense", "1", err));
    assert_non_null(strstr(err, "unknown key"));
    assert_int_equal(c.cluster.n_endpoints, 0);
}

static void test_isr_record(void **state)
{
    (void)state;
    isr_set s = {.epoch = 42};
    assert_true(isr_add(&s, "n1"));
    assert_true(isr_add(&s, "n2"));
    assert_true(isr_add(&s, "n2")); /* once */
    assert_int_equal(s.n, 2);
    char *text = isr_encode(&s);
    assert_string_equal(text, "{\"epoch\":42,\"nodes\":[\"n1\",\"n2\"]}");
    isr_set back = {.mod_revision = 7};
    assert_true(isr_decode(text, strlen(text), &back));
    free(text);
    assert_int_equal(back.epoch, 42);
    assert_int_equal(back.mod_revision, 7); /* kept: etcd says it, not the value */
    assert_true(isr_has(&back, "n1") && isr_has(&back, "n2") && !isr_has(&back, "n3"));
    isr_remove(&back, "n1");
    assert_int_equal(back.n, 1);
    assert_string_equal(back.names[0], "n2");
    isr_remove(&back, "n9");
    assert_int_equal(back.n, 1);
}

static void test_isr_refuses_bad_records(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "", "[]", "{\"nodes\":[]}", "{\"epoch\":1}", "{\"epoch\":\"1\",\"nodes\":[]}",
        "{\"epoch\":1,\"nodes\":[1]}",
        "{\"epoch\":1,\"nodes\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\"]}",
        "{\"epoch\":1,\"nodes\":[\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        isr_set s = {.epoch = 5, .n = 1};
        strcpy(s.names[0], "kept");
        assert_false(isr_decode(bad[i], strlen(bad[i]), &s));
        assert_int_equal(s.epoch, 5); /* untouched */
        assert_string_equal(s.names[0], "kept");
    }
    isr_set full = {0};
    char name[16];
    for (int i = 0; i < CLUSTER_MAX_NODES; i++) {
        snprintf(name, sizeof name, "n%d", i);
        assert_true(isr_add(&full, name));
    }
    assert_false(isr_add(&full, "one-more"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_endpoint_is_a_single_node),
        cmocka_unit_test(test_settings),
        cmocka_unit_test(test_bad_values_say_why),
        cmocka_unit_test(test_isr_record),
        cmocka_unit_test(test_isr_refuses_bad_records),
    };
    return cmocka_run_group_tests_name("cluster: settings and ISR record", tests, NULL, NULL);
}
