"""A small raw client of RabbitMQ's stream protocol (deps/rabbitmq_stream/
docs/PROTOCOL.adoc) for the stream tests: frames built by hand, responses
parsed just enough to assert codes. The frame layouts are those of
tests/unit/streamproto_live_client.py, which took its bytes from RabbitMQ
3.10.8."""
import socket
import struct
import time

# keys and codes (rabbit_stream.hrl)
DECLARE_PUBLISHER, PUBLISH, PUBLISH_CONFIRM, PUBLISH_ERROR = 0x01, 0x02, 0x03, 0x04
QUERY_PUBLISHER_SEQUENCE, DELETE_PUBLISHER, SUBSCRIBE, DELIVER = 0x05, 0x06, 0x07, 0x08
CREDIT, STORE_OFFSET, QUERY_OFFSET, UNSUBSCRIBE = 0x09, 0x0a, 0x0b, 0x0c
CREATE, DELETE, METADATA, METADATA_UPDATE = 0x0d, 0x0e, 0x0f, 0x10
PEER_PROPERTIES, SASL_HANDSHAKE, SASL_AUTHENTICATE, TUNE, OPEN = 0x11, 0x12, 0x13, 0x14, 0x15
CLOSE, HEARTBEAT, ROUTE, PARTITIONS, CONSUMER_UPDATE = 0x16, 0x17, 0x18, 0x19, 0x1a
EXCHANGE_COMMAND_VERSIONS, STREAM_STATS = 0x1b, 0x1c
CREATE_SUPER_STREAM, DELETE_SUPER_STREAM = 0x1d, 0x1e
RESPONSE = 0x8000

OK, STREAM_DOES_NOT_EXIST, SUBSCRIPTION_ID_ALREADY_EXISTS = 1, 2, 3
SUBSCRIPTION_ID_DOES_NOT_EXIST, STREAM_ALREADY_EXISTS, STREAM_NOT_AVAILABLE = 4, 5, 6
SASL_MECHANISM_NOT_SUPPORTED, AUTHENTICATION_FAILURE, SASL_ERROR = 7, 8, 9
SASL_CHALLENGE, SASL_AUTHENTICATION_FAILURE_LOOPBACK, VHOST_ACCESS_FAILURE = 10, 11, 12
UNKNOWN_FRAME, FRAME_TOO_LARGE, INTERNAL_ERROR, ACCESS_REFUSED = 13, 14, 15, 16
PRECONDITION_FAILED, PUBLISHER_DOES_NOT_EXIST, NO_OFFSET = 17, 18, 19

OFFSET_FIRST, OFFSET_LAST, OFFSET_NEXT, OFFSET_OFFSET, OFFSET_TIMESTAMP = 1, 2, 3, 4, 5


def s16(b):
    if isinstance(b, str):
        b = b.encode()
    return struct.pack('>H', len(b)) + b


def bytes32(b):
    return struct.pack('>I', len(b)) + b


def kv(pairs):
    return struct.pack('>I', len(pairs)) + b''.join(s16(k) + s16(v) for k, v in pairs)


def frame(key, body, version=1):
    return struct.pack('>IHH', 4 + len(body), key, version) + body


class Closed(Exception):
    pass


class Frame:
    def __init__(self, raw):
        self.raw = raw
        self.key, self.version = struct.unpack('>HH', raw[4:8])
        self.body = raw[8:]

    def u8(self, at):
        return self.body[at]

    def u16(self, at):
        return struct.unpack('>H', self.body[at:at + 2])[0]

    def u32(self, at):
        return struct.unpack('>I', self.body[at:at + 4])[0]

    def u64(self, at):
        return struct.unpack('>Q', self.body[at:at + 8])[0]

    @property
    def correlation(self):
        return self.u32(0)

    @property
    def code(self):
        """A response's code (after the correlation id)."""
        return self.u16(4)

    def __repr__(self):
        return 'Frame(key=0x%04x, body=%s)' % (self.key, self.body[:64].hex())


class Client:
    def __init__(self, port, host='127.0.0.1', timeout=5.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b''
        self.corr = 0
        self.pushed = []  # server-initiated frames read while waiting for a response

    def close_socket(self):
        self.sock.close()

    def send(self, raw):
        self.sock.sendall(raw)

    def next_corr(self):
        self.corr += 1
        return self.corr

    def recv(self, timeout=5.0):
        """The next frame; Closed at EOF, socket.timeout when none comes."""
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buf) >= 4:
                n = struct.unpack('>I', self.buf[:4])[0]
                if len(self.buf) >= 4 + n:
                    raw, self.buf = self.buf[:4 + n], self.buf[4 + n:]
                    return Frame(raw)
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout()
            self.sock.settimeout(left)
            try:
                d = self.sock.recv(1 << 20)
            except ConnectionResetError:
                d = b''
            if not d:
                raise Closed()
            self.buf += d

    def expect(self, key, timeout=5.0):
        """The next frame of `key` (server pushes of other keys are kept in pushed)."""
        for i, f in enumerate(self.pushed):
            if f.key == key:
                return self.pushed.pop(i)
        while True:
            f = self.recv(timeout)
            if f.key == key:
                return f
            if f.key == HEARTBEAT:
                continue
            self.pushed.append(f)

    def closed(self, timeout=5.0):
        """True when the server closes the socket (frames before it are dropped)."""
        try:
            while True:
                self.recv(timeout)
        except Closed:
            return True
        except socket.timeout:
            return False

    def request(self, key, body, version=1):
        """Sends a request with a new correlation id before `body`; returns the response."""
        c = self.next_corr()
        self.send(frame(key, struct.pack('>I', c) + body, version))
        f = self.expect(key | RESPONSE)
        assert f.correlation == c, (f, c)
        return f

    # ---- the handshake ----
    def peer_properties(self, props=((b'product', b'streamraw'),)):
        return self.request(PEER_PROPERTIES, kv(list(props)))

    def sasl_handshake(self):
        f = self.request(SASL_HANDSHAKE, b'')
        n, at, mechs = f.u32(6), 10, []
        for _ in range(n):
            ln = f.u16(at)
            mechs.append(f.body[at + 2:at + 2 + ln].decode())
            at += 2 + ln
        return f.code, mechs

    def authenticate(self, user='guest', password='guest', mechanism='PLAIN', data=None):
        if data is None:
            data = b'\0' + user.encode() + b'\0' + password.encode()
        return self.request(SASL_AUTHENTICATE, s16(mechanism) + bytes32(data)).code

    def tune(self, frame_max=1048576, heartbeat=60):
        """Reads the server's Tune, answers with these values; returns the server's."""
        f = self.expect(TUNE)
        self.send(frame(TUNE | RESPONSE, struct.pack('>II', frame_max, heartbeat)))
        return f.u32(0), f.u32(4)

    def open(self, vhost='/'):
        f = self.request(OPEN, s16(vhost))
        props = {}
        if f.code == OK and len(f.body) > 6:
            n, at = f.u32(6), 10
            for _ in range(n):
                kl = f.u16(at)
                k = f.body[at + 2:at + 2 + kl].decode()
                at += 2 + kl
                vl = f.u16(at)
                props[k] = f.body[at + 2:at + 2 + vl].decode()
                at += 2 + vl
        return f.code, props

    def handshake(self, user='guest', password='guest', vhost='/', frame_max=1048576,
                  heartbeat=60):
        assert self.peer_properties().code == OK
        self.sasl_handshake()
        code = self.authenticate(user, password)
        assert code == OK, code
        self.tune(frame_max, heartbeat)
        code, props = self.open(vhost)
        assert code == OK, code
        return props

    # ---- commands ----
    def create(self, stream, args=()):
        return self.request(CREATE, s16(stream) + kv(list(args))).code

    def delete(self, stream):
        return self.request(DELETE, s16(stream)).code

    def metadata(self, streams):
        """(brokers {ref: (host, port)}, streams {name: (code, leader, replicas)})."""
        f = self.request(METADATA, struct.pack('>I', len(streams)) + b''.join(s16(s) for s in streams))
        at, brokers = 8, {}
        for _ in range(f.u32(4)):
            ref = f.u16(at)
            hl = f.u16(at + 2)
            host = f.body[at + 4:at + 4 + hl].decode()
            at += 4 + hl
            brokers[ref] = (host, f.u32(at))
            at += 4
        out = {}
        for _ in range(f.u32(at)):
            at += 4 if not out else 0
            nl = f.u16(at)
            name = f.body[at + 2:at + 2 + nl].decode()
            at += 2 + nl
            code, leader, nrep = f.u16(at), f.u16(at + 2), f.u32(at + 4)
            at += 8
            reps = [f.u16(at + 2 * i) for i in range(nrep)]
            at += 2 * nrep
            out[name] = (code, leader, reps)
        return brokers, out

    def declare_publisher(self, pid, stream, reference=b''):
        return self.request(DECLARE_PUBLISHER, bytes([pid]) + s16(reference) + s16(stream)).code

    def delete_publisher(self, pid):
        return self.request(DELETE_PUBLISHER, bytes([pid])).code

    def publish(self, pid, messages, version=1):
        """messages: [(publishing_id, bytes)] or, for version 2, [(id, filter or None, bytes)]."""
        body = bytes([pid]) + struct.pack('>I', len(messages))
        for m in messages:
            if version == 1:
                body += struct.pack('>Q', m[0]) + bytes32(m[1])
            else:
                flt = struct.pack('>h', -1) if m[1] is None else s16(m[1])
                body += struct.pack('>Q', m[0]) + flt + bytes32(m[2])
        self.send(frame(PUBLISH, body, version))

    def confirms(self, count, timeout=5.0):
        """Reads PublishConfirm frames until `count` ids came: [(publisher, id)]."""
        got = []
        while len(got) < count:
            f = self.expect(PUBLISH_CONFIRM, timeout)
            pid, n = f.u8(0), f.u32(1)
            got += [(pid, f.u64(5 + 8 * i)) for i in range(n)]
        return got

    def query_publisher_sequence(self, reference, stream):
        f = self.request(QUERY_PUBLISHER_SEQUENCE, s16(reference) + s16(stream))
        return f.code, f.u64(6)

    def store_offset(self, reference, stream, offset):
        self.send(frame(STORE_OFFSET, s16(reference) + s16(stream) + struct.pack('>Q', offset)))

    def query_offset(self, reference, stream):
        f = self.request(QUERY_OFFSET, s16(reference) + s16(stream))
        return f.code, f.u64(6)

    def subscribe(self, sid, stream, offset_type=OFFSET_FIRST, offset=0, credit=10, props=()):
        spec = struct.pack('>H', offset_type)
        if offset_type in (OFFSET_OFFSET, OFFSET_TIMESTAMP):
            spec += struct.pack('>q' if offset_type == OFFSET_TIMESTAMP else '>Q', offset)
        body = bytes([sid]) + s16(stream) + spec + struct.pack('>H', credit)
        if props:
            body += kv(list(props))
        return self.request(SUBSCRIBE, body).code

    def unsubscribe(self, sid):
        return self.request(UNSUBSCRIBE, bytes([sid])).code

    def credit(self, sid, credit):
        self.send(frame(CREDIT, bytes([sid]) + struct.pack('>H', credit)))

    def deliver(self, timeout=5.0):
        """The next Deliver: (subscription id, chunk) with chunk a dict of the
        osiris header's fields and its messages (simple entries) as bytes."""
        f = self.expect(DELIVER, timeout)
        sid = f.u8(0)
        h = f.body[1:]
        chunk = {'magic_version': h[0], 'type': h[1], 'entries': struct.unpack('>H', h[2:4])[0],
                 'records': struct.unpack('>I', h[4:8])[0],
                 'timestamp': struct.unpack('>q', h[8:16])[0],
                 'epoch': struct.unpack('>Q', h[16:24])[0],
                 'chunk_id': struct.unpack('>Q', h[24:32])[0],
                 'crc': struct.unpack('>I', h[32:36])[0],
                 'data_len': struct.unpack('>I', h[36:40])[0]}
        data = h[48:]
        assert len(data) == chunk['data_len'], (len(data), chunk)
        msgs, at = [], 0
        while at < len(data):
            if data[at] & 0x80:  # a sub-batch entry: kept whole
                n = struct.unpack('>I', data[at + 7:at + 11])[0]
                msgs.append(data[at:at + 15 + n])
                at += 15 + n
            else:
                n = struct.unpack('>I', data[at:at + 4])[0]
                msgs.append(data[at + 4:at + 4 + n])
                at += 4 + n
        chunk['messages'] = msgs
        return sid, chunk

    def consumer_update(self, timeout=5.0):
        """The server's ConsumerUpdate: (correlation id, subscription id, active)."""
        f = self.expect(CONSUMER_UPDATE, timeout)
        return f.u32(0), f.u8(4), f.u8(5)

    def consumer_update_response(self, correlation, offset_type=OFFSET_NEXT, offset=0):
        spec = struct.pack('>H', offset_type)
        if offset_type in (OFFSET_OFFSET, OFFSET_TIMESTAMP):
            spec += struct.pack('>Q', offset)
        self.send(frame(CONSUMER_UPDATE | RESPONSE, struct.pack('>IH', correlation, OK) + spec))

    def exchange_command_versions(self, versions=((PUBLISH, 1, 2),)):
        body = struct.pack('>I', len(versions)) + b''.join(struct.pack('>HHH', *v) for v in versions)
        f = self.request(EXCHANGE_COMMAND_VERSIONS, body)
        n, out = f.u32(6), []
        for i in range(n):
            out.append(struct.unpack('>HHH', f.body[10 + 6 * i:16 + 6 * i]))
        return f.code, out

    def stream_stats(self, stream):
        f = self.request(STREAM_STATS, s16(stream))
        stats, at = {}, 10
        for _ in range(f.u32(6) if f.code == OK else 0):
            kl = f.u16(at)
            k = f.body[at + 2:at + 2 + kl].decode()
            at += 2 + kl
            stats[k] = struct.unpack('>q', f.body[at:at + 8])[0]
            at += 8
        return f.code, stats

    def streams_request(self, key, body):
        """Route or Partitions: (code, [stream names])."""
        f = self.request(key, body)
        names, at = [], 10
        for _ in range(f.u32(6)):
            n = f.u16(at)
            names.append(f.body[at + 2:at + 2 + n].decode())
            at += 2 + n
        return f.code, names

    def route(self, routing_key, super_stream):
        return self.streams_request(ROUTE, s16(routing_key) + s16(super_stream))

    def partitions(self, super_stream):
        return self.streams_request(PARTITIONS, s16(super_stream))

    def create_super_stream(self, name, partitions, keys, args=()):
        strings = lambda l: struct.pack('>I', len(l)) + b''.join(s16(x) for x in l)
        return self.request(CREATE_SUPER_STREAM, s16(name) + strings(partitions) + strings(keys) +
                            kv(list(args))).code

    def delete_super_stream(self, name):
        return self.request(DELETE_SUPER_STREAM, s16(name)).code

    def close(self, code=OK, reason='bye'):
        return self.request(CLOSE, struct.pack('>H', code) + s16(reason)).code
