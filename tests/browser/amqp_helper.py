#!/usr/bin/python3
"""AMQP side of the browser tests (pika, 127.0.0.1 only).

    amqp_helper.py consume PORT VHOST QUEUE USER PASS
        declares QUEUE, consumes it with prefetch 10 without acking, prints
        "ready" and stays connected until stdin closes (at most 900 s), so
        the connections, channels and consumers pages have something real;
        prints "closed CODE TEXT" when the broker closes the connection.
    amqp_helper.py flow PORT VHOST QUEUE RATE USER PASS
        declares QUEUE and keeps a steady flow through it: RATE msg/s
        published, consumed and acked, until stdin closes (at most 900 s);
        prints "ready" once the first message went round.
    amqp_helper.py stream PORT VHOST QUEUE COUNT USER PASS
        declares the stream QUEUE (x-max-age 7D, x-max-length-bytes
        10000000), publishes COUNT messages "event I" (header i = I) with
        confirms, then consumes it from the first offset with prefetch 3
        without acking (tag console-stream-reader): it reads 0..2 and stays
        there; prints "ready" and stays connected until stdin closes.
    amqp_helper.py mkqueues PORT VHOST PREFIX COUNT USER PASS
        declares COUNT queues PREFIX00000.. and publishes (i % 7) messages
        to every 10th, so sorting by messages has something to sort; prints
        "made COUNT".
"""
import select
import sys
import time

import pika


def connect(port, vhost, user, password):
    params = pika.ConnectionParameters(host='127.0.0.1', port=int(port), virtual_host=vhost,
                                       credentials=pika.PlainCredentials(user, password),
                                       client_properties={'connection_name': 'console browser test'},
                                       heartbeat=0, blocked_connection_timeout=60)
    return pika.BlockingConnection(params)


def consume(port, vhost, queue, user, password):
    conn = connect(port, vhost, user, password)
    ch = conn.channel()
    ch.queue_declare(queue, auto_delete=True)
    ch.basic_qos(prefetch_count=10)
    ch.basic_consume(queue, lambda *a: None, auto_ack=False, consumer_tag='console-test-consumer')
    print('ready', flush=True)
    deadline = time.monotonic() + 900
    try:
        while time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.5)
            r, _, _ = select.select([sys.stdin], [], [], 0)
            if r and not sys.stdin.readline():
                break
        conn.close()
    except pika.exceptions.ConnectionClosedByBroker as e:
        # Closed from the console: say how, for the test to check the reason.
        print('closed %d %s' % (e.reply_code, e.reply_text), flush=True)


def flow(port, vhost, queue, rate, user, password):
    conn = connect(port, vhost, user, password)
    ch = conn.channel()
    ch.queue_declare(queue, auto_delete=True)
    ch.basic_consume(queue, lambda c, m, p, b: c.basic_ack(m.delivery_tag), auto_ack=False)
    every = 1.0 / float(rate)
    start = time.monotonic()
    sent = 0
    while time.monotonic() - start < 900:
        ch.basic_publish('', queue, b'flow')
        sent += 1
        if sent == 1:
            conn.process_data_events(time_limit=0.2)
            print('ready', flush=True)
        due = start + sent * every
        while time.monotonic() < due:  # it returns early whenever a delivery comes
            conn.process_data_events(time_limit=max(0.0, due - time.monotonic()))
        r, _, _ = select.select([sys.stdin], [], [], 0)
        if r and not sys.stdin.readline():
            break
    conn.close()


def stream(port, vhost, queue, count, user, password):
    conn = connect(port, vhost, user, password)
    ch = conn.channel()
    ch.queue_declare(queue, durable=True, arguments={'x-queue-type': 'stream', 'x-max-age': '7D',
                                                      'x-max-length-bytes': 10000000})
    ch.confirm_delivery()
    for i in range(int(count)):
        ch.basic_publish('', queue, b'event %d' % i, pika.BasicProperties(headers={'i': i}))
    reader = conn.channel()
    reader.basic_qos(prefetch_count=3)
    got = []
    reader.basic_consume(queue, lambda c, m, p, b: got.append(b), auto_ack=False,
                         consumer_tag='console-stream-reader', arguments={'x-stream-offset': 'first'})
    deadline = time.monotonic() + 10
    while len(got) < 3 and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.1)
    print('ready', flush=True)
    deadline = time.monotonic() + 900
    try:
        while time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.5)
            r, _, _ = select.select([sys.stdin], [], [], 0)
            if r and not sys.stdin.readline():
                break
        conn.close()
    except pika.exceptions.ConnectionClosedByBroker:
        pass  # the test's vhost was deleted first


def mkqueues(port, vhost, prefix, count, user, password):
    conn = connect(port, vhost, user, password)
    ch = conn.channel()
    for i in range(int(count)):
        name = '%s%05d' % (prefix, i)
        ch.queue_declare(name)
        if i % 10 == 0:
            for _ in range(i % 7):
                ch.basic_publish('', name, b'x')
    conn.close()
    print('made %s' % count, flush=True)


if __name__ == '__main__':
    cmd, args = sys.argv[1], sys.argv[2:]
    {'consume': consume, 'flow': flow, 'stream': stream, 'mkqueues': mkqueues}[cmd](*args)
