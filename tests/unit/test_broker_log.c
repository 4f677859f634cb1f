/* The log writer (log.c): every line is escaped as a whole, so bytes a
 * client sent can neither forge a line nor reach a terminal as control
 * codes, while valid UTF-8 is kept. Each test sends stderr to a temp file,
 * logs, and reads back exactly what was written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_broker_start.h"

static char written[16384];

/* Logs one line (fmt + a string argument) with stderr sent to a temp file
 * and returns the text after "[warning] ", checking the line's shape:
 * exactly one newline, at the end. */
static const char *logged(const char *fmt, const char *arg)
{
    char path[] = "/tmp/warren-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    int saved = dup(STDERR_FILENO);
    assert_true(dup2(fd, STDERR_FILENO) >= 0);
    log_msg(LOG_WARNING, fmt, arg);
    dup2(saved, STDERR_FILENO);
    close(saved);
    ssize_t n = pread(fd, written, sizeof written - 1, 0);
    close(fd);
    assert_true(n > 0);
    written[n] = 0;
    assert_ptr_equal(strchr(written, '\n'), written + n - 1);
    written[n - 1] = 0;
    /* "YYYY-MM-DD hh:mm:ss.mmm [warning] " */
    const char *text = strstr(written, "] ");
    assert_non_null(text);
    assert_int_equal(text - written, 32);
    return text + 2;
}

static void test_the_issue_forged_line(void **state)
{
    (void)state;
    const char *t = logged("queue.declare: unknown field type in table key '%s'",
                           "k\n2026-12-01 00:00:00.000 [error] FORGED LOG LINE");
    assert_string_equal(t, "queue.declare: unknown field type in table key "
                           "'k\\x0a2026-12-01 00:00:00.000 [error] FORGED LOG LINE'");
}

static void test_control_bytes(void **state)
{
    (void)state;
    assert_string_equal(logged("%s", "a\rb\tc\x1b[31md\x7f" "e\x01"),
                        "a\\x0db\\x09c\\x1b[31md\\x7fe\\x01");
    /* the format's own text is escaped too: nothing bypasses the writer */
    assert_string_equal(logged("two\nlines %s", ""), "two\\x0alines ");
}

static void test_valid_utf8_is_kept(void **state)
{
    (void)state;
    const char *s = "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf \xee\x80\x80";
    assert_string_equal(logged("%s", s), s);
}

static void test_invalid_utf8_is_escaped(void **state)
{
    (void)state;
    static const struct { const char *in, *out; } cases[] = {
        {"\xff", "\\xff"},
        {"\x80", "\\x80"},                                  /* stray continuation */
        {"\xc0\xaf", "\\xc0\\xaf"},                         /* overlong '/' */
        {"\xe0\x80\xaf", "\\xe0\\x80\\xaf"},                /* overlong, 3 bytes */
        {"\xf0\x80\x80\xaf", "\\xf0\\x80\\x80\\xaf"},       /* overlong, 4 bytes */
        {"\xed\xa0\x80", "\\xed\\xa0\\x80"},                /* surrogate D800 */
        {"\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"},       /* above U+10FFFF */
        {"\xf5\x80\x80\x80", "\\xf5\\x80\\x80\\x80"},
        {"ab\xe2\x82", "ab\\xe2\\x82"},                     /* cut off at the end */
        {"\xe2\x82z", "\\xe2\\x82z"},                       /* cut off mid-text */
        {"\xc3\xa9\xa9", "\xc3\xa9\\xa9"},                  /* one too many */
        {"\xc2\x85", "\\xc2\\x85"},                         /* C1 control NEL */
        {"\xc2\x9b" "31m", "\\xc2\\x9b31m"},                /* C1 CSI */
        {"\xc2\xa0", "\xc2\xa0"},                           /* U+00A0 is fine */
        {"a\xe2\x80\xa8" "b\xe2\x80\xa9", "a\\xe2\\x80\\xa8b\\xe2\\x80\\xa9"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_string_equal(logged("%s", cases[i].in), cases[i].out);
}

/* A text of nothing but bytes to escape, longer than a line holds: cut,
 * never past the buffer, still one line. */
static void test_long_text_is_cut_cleanly(void **state)
{
    (void)state;
    static char big[5000];
    memset(big, 0xff, sizeof big - 1);
    const char *t = logged("%s", big);
    size_t n = strlen(t);
    assert_true(n > 1000 && n % 4 == 0);
    for (size_t i = 0; i < n; i += 4)
        assert_memory_equal(t + i, "\\xff", 4);
    memset(big, '\n', sizeof big - 1);
    assert_true(strlen(logged("%s", big)) > 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_issue_forged_line),
        cmocka_unit_test(test_control_bytes),
        cmocka_unit_test(test_valid_utf8_is_kept),
        cmocka_unit_test(test_invalid_utf8_is_escaped),
        cmocka_unit_test(test_long_text_is_cut_cleanly),
    };
    return cmocka_run_group_tests_name("broker_log", tests, NULL, NULL);
}
