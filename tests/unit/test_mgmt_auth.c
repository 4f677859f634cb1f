/* Who may act on another user's connection or channel (auth.c): RabbitMQ
 * 3.10's is_authorized_user, tag by tag and method by method. The whole
 * table over HTTP is conformance/mgmt/authz_table.json. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../mgmt-ui/mgmt_int.h"

enum { NONE = 0, MGMT = TAG_MANAGEMENT, PM = TAG_POLICYMAKER, MON = TAG_MONITORING,
       ADMIN = TAG_ADMINISTRATOR };

static const struct {
    unsigned tags;
    http_method method;
    const char *owner; /* the object's user; the request's is "me" */
    bool allowed;
} cases[] = {
    /* one's own: always */
    {MGMT, HTTP_GET, "me", true},
    {MGMT, HTTP_DELETE, "me", true},
    {PM, HTTP_DELETE, "me", true},
    {MON, HTTP_DELETE, "me", true},
    {NONE, HTTP_DELETE, "me", true}, /* the dispatcher refuses it before (no tag) */
    /* another user's: read by monitoring users and administrators */
    {MGMT, HTTP_GET, "other", false},
    {PM, HTTP_GET, "other", false},
    {MGMT | PM, HTTP_GET, "other", false},
    {MON, HTTP_GET, "other", true},
    {ADMIN, HTTP_GET, "other", true},
    {MON, HTTP_HEAD, "other", true},
    /* ... closed by administrators only (issue 17: monitoring closed any) */
    {MGMT, HTTP_DELETE, "other", false},
    {PM, HTTP_DELETE, "other", false},
    {MON, HTTP_DELETE, "other", false},
    {MON | MGMT | PM, HTTP_DELETE, "other", false},
    {ADMIN, HTTP_DELETE, "other", true},
    {ADMIN | MON, HTTP_DELETE, "other", true},
    /* a name that only starts like the user's is another user */
    {MON, HTTP_DELETE, "me2", false},
    {MON, HTTP_DELETE, "m", false},
};

static void test_user_object_allowed(void **state)
{
    (void)state;
    static mgmt_req r; /* large (path buffer): not on the stack */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(&r, 0, sizeof r);
        snprintf(r.user.name, sizeof r.user.name, "me");
        r.user.tags = cases[i].tags;
        r.method = cases[i].method;
        if (mgmt_user_object_allowed(&r, cases[i].owner) != cases[i].allowed)
            fail_msg("case %zu: tags %#x, method %d, owner %s: want %s", i, cases[i].tags,
                     (int)cases[i].method, cases[i].owner, cases[i].allowed ? "allowed" : "refused");
    }
}

/* Lists show another user's objects exactly when a GET of one may read it. */
static void test_lists_follow_reads(void **state)
{
    (void)state;
    static mgmt_req r;
    static const unsigned tags[] = {NONE, MGMT, PM, MON, ADMIN, MGMT | MON};
    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++) {
        memset(&r, 0, sizeof r);
        snprintf(r.user.name, sizeof r.user.name, "me");
        r.user.tags = tags[i];
        r.method = HTTP_GET;
        assert_int_equal(mgmt_sees_user(&r, "other"), mgmt_user_object_allowed(&r, "other"));
        assert_true(mgmt_sees_user(&r, "me"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_user_object_allowed),
        cmocka_unit_test(test_lists_follow_reads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
