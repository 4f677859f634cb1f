"""Super streams over the stream protocol (RabbitMQ 3.11+; 3.10 has none, so
3.13's rabbit_stream_reader is the reference): CreateSuperStream,
Partitions, Route, DeleteSuperStream with their response codes and
permissions, and the partitions visible as streams over AMQP too.
test_stream_js.py drives the same through RabbitMQ's JavaScript client
(hash routing, a consumer group sharing the partitions)."""
import struct
import unittest
import urllib.request
import base64
import json

import harness as h
import streamraw as sr

CREATE_SUPER, DELETE_SUPER = 0x1d, 0x1e


def strings(items):
    return struct.pack('>I', len(items)) + b''.join(sr.s16(i) for i in items)


def streams_of(f):
    """A Route / Partitions response: (code, [names])."""
    code, n, at, out = f.u16(4), f.u32(6), 10, []
    for _ in range(n):
        ln = f.u16(at)
        out.append(f.body[at + 2:at + 2 + ln].decode())
        at += 2 + ln
    return code, out


class SuperStreams(unittest.TestCase):
    def client(self, user='guest', password='guest'):
        host, port = h.stream_address()
        c = sr.Client(port, host=host)
        c.handshake(user, password)
        self.addCleanup(c.close_socket)
        return c

    def create(self, c, name, keys, partitions=None, args=()):
        parts = partitions if partitions is not None else [b'%s-%s' % (name, k) for k in keys]
        body = sr.s16(name) + strings(parts) + strings(keys) + sr.kv(list(args))
        return c.request(CREATE_SUPER, body).code

    def delete(self, c, name):
        return c.request(DELETE_SUPER, sr.s16(name)).code

    def partitions(self, c, name):
        return streams_of(c.request(sr.PARTITIONS, sr.s16(name)))

    def route(self, c, key, name):
        return streams_of(c.request(sr.ROUTE, sr.s16(key) + sr.s16(name)))

    def test_create_route_partitions_delete(self):
        c = self.client()
        name = h.unique('ss').encode()
        self.assertEqual(self.create(c, name, [b'0', b'1', b'2'], args=[(b'max-age', b'1h')]), sr.OK)
        self.addCleanup(lambda: self.delete(self.client(), name))
        n = name.decode()
        self.assertEqual(self.partitions(c, name), (sr.OK, ['%s-0' % n, '%s-1' % n, '%s-2' % n]))
        self.assertEqual(self.route(c, b'1', name), (sr.OK, ['%s-1' % n]))
        self.assertEqual(self.route(c, b'nope', name), (sr.OK, []))
        # the partitions are streams: usable as any (AMQP declares them passively)
        conn = h.connect()
        ok = conn.channel().queue_declare('%s-2' % n, passive=True)
        self.assertEqual(ok.method.message_count, 0)
        conn.close()
        self.assertEqual(self.create(c, name, [b'0', b'1', b'2']), sr.STREAM_ALREADY_EXISTS)
        self.assertEqual(self.delete(c, name), sr.OK)
        self.assertEqual(self.partitions(c, name), (sr.STREAM_DOES_NOT_EXIST, []))
        self.assertEqual(self.route(c, b'0', name), (sr.STREAM_DOES_NOT_EXIST, []))
        self.assertEqual(self.delete(c, name), sr.STREAM_DOES_NOT_EXIST)
        self.assertEqual(c.metadata(['%s-0' % n])[1]['%s-0' % n][0], sr.STREAM_DOES_NOT_EXIST)

    def test_binding_keys_name_the_partitions(self):
        c = self.client()
        name = h.unique('ss').encode()
        self.assertEqual(self.create(c, name, [b'eu', b'us']), sr.OK)
        self.addCleanup(lambda: self.delete(self.client(), name))
        n = name.decode()
        self.assertEqual(self.route(c, b'us', name), (sr.OK, ['%s-us' % n]))
        self.assertEqual(self.partitions(c, name), (sr.OK, ['%s-eu' % n, '%s-us' % n]))

    def test_bad_requests(self):
        c = self.client()
        name = h.unique('ss').encode()
        # more partitions than keys, none, amq.*, a bad argument
        self.assertEqual(self.create(c, name, [b'0'], partitions=[name + b'-0', name + b'-1']),
                         sr.PRECONDITION_FAILED)
        self.assertEqual(self.create(c, name, [], partitions=[]), sr.PRECONDITION_FAILED)
        self.assertEqual(self.create(c, b'amq.x', [b'0']), sr.PRECONDITION_FAILED)
        self.assertEqual(self.create(c, name, [b'0'], args=[(b'max-age', b'10x')]), sr.PRECONDITION_FAILED)
        self.assertEqual(self.partitions(c, name), (sr.STREAM_DOES_NOT_EXIST, []))  # nothing made

    def test_permissions(self):
        """A user with read only on everything may list partitions but not
        route (write), create or delete (configure)."""
        name = h.unique('ss').encode()
        self.assertEqual(self.create(self.client(), name, [b'0', b'1']), sr.OK)
        self.addCleanup(lambda: self.delete(self.client(), name))
        host, port = h.mgmt_address()

        def api(method, path, body):
            req = urllib.request.Request('http://%s:%d%s' % (host, port, path), method=method,
                                         data=json.dumps(body).encode(),
                                         headers={'Content-Type': 'application/json',
                                                  'Authorization': 'Basic ' + base64.b64encode(b'guest:guest').decode()})
            urllib.request.urlopen(req, timeout=10).read()
        user = h.unique('reader')
        api('PUT', '/api/users/%s' % user, {'password': 'pw', 'tags': ''})
        self.addCleanup(lambda: urllib.request.urlopen(urllib.request.Request(
            'http://%s:%d/api/users/%s' % (host, port, user), method='DELETE',
            headers={'Authorization': 'Basic ' + base64.b64encode(b'guest:guest').decode()}), timeout=10))
        api('PUT', '/api/permissions/%%2F/%s' % user, {'configure': '', 'write': '', 'read': '.*'})
        c = self.client(user, 'pw')
        self.assertEqual(self.partitions(c, name)[0], sr.OK)
        self.assertEqual(self.route(c, b'0', name), (sr.ACCESS_REFUSED, []))
        self.assertEqual(self.delete(c, name), sr.ACCESS_REFUSED)
        self.assertEqual(self.create(c, h.unique('ss').encode(), [b'0']), sr.ACCESS_REFUSED)


if __name__ == '__main__':
    unittest.main()
