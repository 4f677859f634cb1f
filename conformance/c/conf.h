/* Conformance scenarios driven by rabbitmq-c: the helpers every scenario
 * uses to connect, name its queues, read deliveries and check how the broker
 * closed a channel or the connection. Each scenario runs in its own forked
 * process (see main.c), so helpers keep their state in process globals and
 * a failed scenario never leaks into the next one.
 *
 * A scenario is `int fn(void)`: 0 = pass; non-zero = fail, with the reason
 * recorded by conf_fail() (the CHECK macros do that). Every expectation was
 * checked against RabbitMQ 3.10; the broker under test must match it. */
#ifndef WARREN_CONF_H
#define WARREN_CONF_H

#include <stddef.h>
#include <stdint.h>

#if defined(__has_include)
#if __has_include(<rabbitmq-c/amqp.h>)
#define CONF_NEW_RABBITMQ_C_HEADERS 1
#endif
#endif
#ifdef CONF_NEW_RABBITMQ_C_HEADERS
#include <rabbitmq-c/amqp.h>
#include <rabbitmq-c/framing.h>
#include <rabbitmq-c/tcp_socket.h>
#else
#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_tcp_socket.h>
#endif

/* AMQP reply codes the scenarios expect (amqp-rabbitmq-0.9.1.json). */
enum {
    CONF_REPLY_SUCCESS = 200,
    CONF_NO_ROUTE = 312,
    CONF_ACCESS_REFUSED = 403,
    CONF_NOT_FOUND = 404,
    CONF_RESOURCE_LOCKED = 405,
    CONF_PRECONDITION_FAILED = 406,
    CONF_FRAME_ERROR = 501,
    CONF_SYNTAX_ERROR = 502,
    CONF_COMMAND_INVALID = 503,
    CONF_CHANNEL_ERROR = 504,
    CONF_UNEXPECTED_FRAME = 505,
    CONF_NOT_ALLOWED = 530,
    CONF_NOT_IMPLEMENTED = 540,
};

#define CONF_WAIT_MS 3000      /* how long to wait for something that must come */
#define CONF_QUIET_MS 300      /* how long to wait to be sure nothing comes */

/* ------------------------------------------------------------ scenario table */

typedef int (*conf_scenario_fn)(void);

typedef struct conf_scenario {
    const char *id;         /* "<group>.<name>" */
    int quick;              /* 1 = part of the CONF_QUICK subset */
    conf_scenario_fn fn;
} conf_scenario;

/* Each scenario file exports a NULL-terminated table; main.c lists them. */
extern const conf_scenario conf_connection_scenarios[];
extern const conf_scenario conf_exchange_scenarios[];
extern const conf_scenario conf_queue_scenarios[];
extern const conf_scenario conf_basic_scenarios[];
extern const conf_scenario conf_delivery_scenarios[];
extern const conf_scenario conf_errors_scenarios[];
extern const conf_scenario conf_extensions_scenarios[];
extern const conf_scenario conf_edges_scenarios[];

/* ------------------------------------------------------------ failing */

/* Records why the scenario failed (first call wins) and returns 1, so a
 * scenario can `return conf_fail(...)`. */
int conf_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Appends an informational note to the pass detail. */
void conf_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The recorded detail ("" when none). */
const char *conf_detail(void);

#define CHECK(cond, ...) do { if (!(cond)) return conf_fail(__VA_ARGS__); } while (0)

/* ------------------------------------------------------------ environment */

/* Parses CONF_URI and CONF_RUN_ID; returns 0, or -1 with a message on stderr. */
int conf_env_init(void);
/* Sets the scenario whose names conf_queue_name() builds and resets state. */
void conf_begin_scenario(const char *scenario_id);
/* Deletes every queue and exchange the scenario named (best effort). */
void conf_cleanup_scenario(void);

/* "conf.<run_id>.<scenario-id>.<suffix>". The returned string lives until the
 * scenario ends. conf_queue_name / conf_exchange_name also register the name
 * for deletion at the end of the scenario. */
const char *conf_name(const char *suffix);
const char *conf_queue_name(const char *suffix);
const char *conf_exchange_name(const char *suffix);

/* ------------------------------------------------------------ connections */

typedef struct conf_open_opts {
    int frame_max;          /* 0 = rabbitmq-c default (131072) */
    int channel_max;        /* 0 = accept the server's */
    int heartbeat;          /* seconds, 0 = none */
    const char *user;       /* NULL = from CONF_URI */
    const char *password;
    const char *vhost;
} conf_open_opts;

/* Opens a TCP connection (bounded connect and RPC timeouts) without logging
 * in. Returns NULL and records a failure when the socket cannot open. */
amqp_connection_state_t conf_socket(void);
/* Logs in on a socket from conf_socket(); returns the raw reply. */
amqp_rpc_reply_t conf_login(amqp_connection_state_t conn, const conf_open_opts *opts);
/* Connects and logs in; NULL (failure recorded) on any error. opts may be NULL. */
amqp_connection_state_t conf_open_with(const conf_open_opts *opts);
/* conf_open_with(NULL) plus channel 1 opened. */
amqp_connection_state_t conf_open(void);
/* Opens channel ch; 0 or a recorded failure. */
int conf_channel_open(amqp_connection_state_t conn, amqp_channel_t ch);
/* Closes (politely, ignoring errors) and destroys the connection. */
void conf_close(amqp_connection_state_t conn);

/* 1 (failure recorded, naming `what`) unless the last RPC reply was normal. */
int conf_rpc_failed(amqp_connection_state_t conn, const char *what);
/* A one-line description of an RPC reply, for failure details. */
const char *conf_reply_text(amqp_rpc_reply_t reply);

/* The reply must be a channel.close with `code`; answers close-ok.
 * Returns 0 or a recorded failure. */
int conf_expect_channel_close(amqp_connection_state_t conn, amqp_channel_t ch,
                              amqp_rpc_reply_t reply, int code);
/* The reply must be a connection.close with `code`; answers close-ok. */
int conf_expect_connection_close(amqp_connection_state_t conn, amqp_rpc_reply_t reply, int code);
/* Sends a no-op RPC (queue.declare passive of a server-named queue) to
 * flush errors caused by asynchronous methods; returns its reply. */
amqp_rpc_reply_t conf_sync(amqp_connection_state_t conn, amqp_channel_t ch);

/* ------------------------------------------------------------ declare helpers */

/* Declares a queue with flags and optional args; 0 or a recorded failure. */
int conf_declare_queue(amqp_connection_state_t conn, amqp_channel_t ch, const char *name,
                       int durable, int exclusive, int auto_delete, amqp_table_t args);
int conf_declare_exchange(amqp_connection_state_t conn, amqp_channel_t ch, const char *name,
                          const char *type, amqp_table_t args);
int conf_bind(amqp_connection_state_t conn, amqp_channel_t ch, const char *queue,
              const char *exchange, const char *key, amqp_table_t args);
/* Message count of a queue via passive declare, or -1 (failure recorded). */
int conf_queue_count(amqp_connection_state_t conn, amqp_channel_t ch, const char *queue);

/* ------------------------------------------------------------ messages */

/* Publishes a text body with optional properties; 0 or a recorded failure. */
int conf_publish(amqp_connection_state_t conn, amqp_channel_t ch, const char *exchange,
                 const char *key, const char *body, const amqp_basic_properties_t *props);
int conf_publish_bytes(amqp_connection_state_t conn, amqp_channel_t ch, const char *exchange,
                       const char *key, amqp_bytes_t body, int mandatory,
                       const amqp_basic_properties_t *props);

typedef enum conf_event_kind {
    CONF_EV_TIMEOUT,
    CONF_EV_ERROR,          /* socket closed or library error */
    CONF_EV_DELIVER,
    CONF_EV_RETURN,
    CONF_EV_ACK,
    CONF_EV_NACK,
    CONF_EV_CANCEL,
    CONF_EV_CHANNEL_CLOSE,
    CONF_EV_CONNECTION_CLOSE,
    CONF_EV_OTHER,
} conf_event_kind;

/* One thing the broker sent, with the fields the scenarios compare.
 * `message` is valid for DELIVER, RETURN and a successful conf_get(); free it
 * with conf_event_free(). */
typedef struct conf_event {
    conf_event_kind kind;
    amqp_channel_t channel;
    amqp_method_number_t method;   /* for OTHER */
    uint64_t delivery_tag;
    int redelivered;
    int multiple;
    int reply_code;                /* RETURN and the closes */
    uint32_t message_count;        /* basic.get-ok */
    char routing_key[256];
    char exchange[256];
    char consumer_tag[256];
    char reply_text[256];
    amqp_message_t message;
    int has_message;
} conf_event;

/* Waits up to timeout_ms for the next method the broker sends on any channel
 * (reading a delivery's or return's content). */
conf_event_kind conf_wait_event(amqp_connection_state_t conn, int timeout_ms, conf_event *ev);
/* Waits for a DELIVER and checks the body is `body` (NULL = any); fills ev
 * when non-NULL (then the caller frees it). 0 or a recorded failure. */
int conf_expect_delivery(amqp_connection_state_t conn, const char *body, conf_event *ev);
/* Asserts nothing arrives within CONF_QUIET_MS; 0 or a recorded failure. */
int conf_expect_quiet(amqp_connection_state_t conn);
void conf_event_free(conf_event *ev);

/* basic.get: 1 = got a message (ev filled, free it), 0 = empty, -1 = error
 * (described in ev->reply_text). */
int conf_get(amqp_connection_state_t conn, amqp_channel_t ch, const char *queue, int no_ack,
             conf_event *ev);
/* Gets one message into *ev (free it with conf_event_free); 0, or a
 * recorded failure if the queue was empty or the get failed. */
int conf_get_one(amqp_connection_state_t conn, amqp_channel_t ch, const char *queue, int no_ack,
                 conf_event *ev);
/* Gets one message and checks its body; 0 or a recorded failure. */
int conf_get_expect(amqp_connection_state_t conn, amqp_channel_t ch, const char *queue,
                    const char *body);
/* Gets and checks the queue is empty; 0 or a recorded failure. */
int conf_get_empty(amqp_connection_state_t conn, amqp_channel_t ch, const char *queue);

/* 1 when the message body equals the text. */
int conf_body_is(const amqp_message_t *m, const char *text);

/* Puts channel ch in confirm mode; 0 or a recorded failure. */
int conf_confirm_select(amqp_connection_state_t conn, amqp_channel_t ch);
/* Waits until basic.ack covers every tag from first_tag to last_tag (fails
 * on a nack or anything else arriving); 0 or a recorded failure. */
int conf_wait_confirms(amqp_connection_state_t conn, uint64_t first_tag, uint64_t last_tag);

/* Starts a consumer (no_ack flag, server-named tag when tag is NULL); the
 * tag actually used is copied into tag_out when non-NULL (256 bytes). */
int conf_consume(amqp_connection_state_t conn, amqp_channel_t ch, const char *queue,
                 const char *tag, int no_ack, int exclusive, char *tag_out);

/* Writes raw bytes on the connection's socket; 0 or a recorded failure. */
int conf_send_raw(amqp_connection_state_t conn, const void *bytes, size_t len);

/* Milliseconds on a monotonic clock. */
long long conf_now_ms(void);
void conf_sleep_ms(int ms);

/* Empty table, for declare and bind calls. */
extern const amqp_table_t conf_no_args;

#endif
