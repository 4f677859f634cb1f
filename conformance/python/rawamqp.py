"""A byte-exact AMQP 0-9-1 client on a plain socket, for the raw scenarios
and for Warren's Python integration tests (tests/integration/py/harness.py
puts this folder on sys.path and subclasses RawClient), so the frame, method
and field-table bytes and the frame reader exist once. It needs only pika and
the standard library: it must not import anything from either tree.

Well-formed frames are encoded with pika's codec (pika.frame / pika.spec);
malformed ones are built by hand with raw_frame(). Reading is tolerant:
frames pika cannot decode come back as RawFrame objects instead of raising
(unless the client is STRICT).
"""
import contextlib
import select
import socket
import struct
import time

import pika.frame
import pika.spec as S

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT = 1, 2, 3, 8
FRAME_END = 0xCE


class Closed(Exception):
    """The peer closed the TCP connection."""


class RawFrame:
    """A frame pika could not decode: type, channel and payload bytes."""

    def __init__(self, ftype, channel, payload):
        self.frame_type, self.channel_number, self.payload = ftype, channel, payload

    def __repr__(self):
        return "<RawFrame type=%d ch=%d %r>" % (self.frame_type, self.channel_number, self.payload[:40])


def raw_frame(ftype, channel, payload, end=FRAME_END):
    """A frame with an arbitrary type, channel, payload and end octet."""
    return struct.pack(">BHL", ftype, channel, len(payload)) + payload + bytes([end])


def method_bytes(channel, method):
    return pika.frame.Method(channel, method).marshal()


def method_payload(method):
    """class id + method id + arguments of a pika method."""
    return method_bytes(0, method)[7:-1]


def header_bytes(channel, size, class_id=60, weight=0, props=b"\x00\x00"):
    """A content header frame with hand-made property bytes (flags + list)."""
    return raw_frame(FRAME_HEADER, channel, struct.pack(">HHQ", class_id, weight, size) + props)


def body_bytes(channel, data):
    return raw_frame(FRAME_BODY, channel, data)


def shortstr(b):
    return bytes([len(b)]) + b


def longstr(b):
    return struct.pack(">I", len(b)) + b


def amqplain_response(user, password):
    """AMQPLAIN's response: a field table without its length prefix."""
    return (shortstr(b"LOGIN") + b"S" + longstr(user.encode())
            + shortstr(b"PASSWORD") + b"S" + longstr(password.encode()))


def decode_frame(buf, strict=False):
    """(consumed, frame) from buf, or (0, None) when incomplete. A content
    header also keeps its undecoded property bytes as frame.prop_bytes. A frame
    pika cannot decode comes back as a RawFrame, or with strict raises pika's
    error."""
    if len(buf) < 8:
        return 0, None
    ftype, channel, size = struct.unpack(">BHL", buf[:7])
    if len(buf) < 8 + size:
        return 0, None
    payload = buf[7:7 + size]
    try:
        consumed, frame = pika.frame.decode_frame(buf)
        if frame is not None:
            if ftype == FRAME_HEADER:
                frame.prop_bytes = payload[12:]
            return consumed, frame
    except Exception:  # noqa: BLE001 - anything pika cannot decode stays raw
        if strict:
            raise
    return 8 + size, RawFrame(ftype, channel, payload)


def all_types_table():
    """A field table holding every field type RabbitMQ 3.10 knows, as bytes
    (pika can encode only some of them), plus the uncommon 'L'."""
    def entry(key, tag, value):
        return shortstr(key.encode()) + tag + value
    inner = entry("k", b"S", longstr(b"v"))
    array = b"I" + struct.pack(">i", 1) + b"S" + longstr(b"two") + b"V" + b"t\x00"
    body = b"".join([
        entry("bool", b"t", b"\x01"), entry("int8", b"b", struct.pack(">b", -5)),
        entry("uint8", b"B", b"\xfe"), entry("int16", b"s", struct.pack(">h", -300)),
        entry("uint16", b"u", struct.pack(">H", 65000)), entry("int32", b"I", struct.pack(">i", -70000)),
        entry("uint32", b"i", struct.pack(">I", 4000000000)), entry("int64", b"l", struct.pack(">q", -2 ** 40)),
        entry("uint64", b"L", struct.pack(">Q", 2 ** 63 + 5)),
        entry("float", b"f", struct.pack(">f", 1.5)), entry("double", b"d", struct.pack(">d", 2.25)),
        entry("decimal", b"D", b"\x02" + struct.pack(">i", 12345)),
        entry("longstr", b"S", longstr("h\u00e9llo".encode())), entry("bytes", b"x", longstr(b"\x00\x01\xff")),
        entry("timestamp", b"T", struct.pack(">Q", 1700000000)), entry("void", b"V", b""),
        entry("table", b"F", longstr(inner)), entry("array", b"A", longstr(array)),
        entry("empty-table", b"F", longstr(b"")), entry("empty-array", b"A", longstr(b"")),
    ])
    return longstr(body)


def all_properties_bytes(user):
    """Property flags and values with all 14 basic properties set; user_id is
    `user` (the broker checks it against the connection's user)."""
    ss = lambda s: shortstr(s.encode())  # noqa: E731
    return (struct.pack(">H", 0xFFFC) + ss("application/json") + ss("gzip") + all_types_table()
            + b"\x02" + b"\x07" + ss("corr-1") + ss("reply.q") + ss("60000") + ss("msg-1")
            + struct.pack(">Q", 1700000001) + ss("kind") + ss(user) + ss("app") + ss("cluster"))


class Content:
    """A delivered message: its method, header and body frames."""

    def __init__(self, mframe, hframe, bframes):
        self.method = mframe.method
        self.channel = mframe.channel_number
        self.props = hframe.properties
        self.prop_bytes = getattr(hframe, "prop_bytes", None)
        self.body_size = hframe.body_size
        self.body_frames = bframes
        self.body = b"".join(f.fragment for f in bframes)


def watch_closes(clients, timeout):
    """Watches several clients' sockets at once until each is closed by the
    peer (or `timeout` s pass): {client: time.monotonic() it closed, or None},
    and {client: the bytes it sent meanwhile, after what it had buffered}.
    At once, so the close of one is not seen late while waiting on another
    (several held connections overlap)."""
    left = {r.sock: r for r in clients}
    closed = {r: None for r in clients}
    sent = {r: r.buf for r in clients}
    deadline = time.monotonic() + timeout
    while left and time.monotonic() < deadline:
        ready, _, _ = select.select(list(left), [], [], max(0.0, deadline - time.monotonic()))
        now = time.monotonic()
        for s in ready:
            r = left[s]
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                chunk = b""
            if chunk:
                sent[r] += chunk
            else:
                closed[r] = now
                del left[s]
    return closed, sent


class RawClient:
    """One socket to host:port. The class attributes are what a user of it
    (the integration harness) may override: the client properties of
    handshake(), the default wait of expect_*_close(), and STRICT, which
    makes a frame pika cannot decode raise instead of coming back raw."""
    CLIENT_PROPERTIES = {
        "product": "warren-conformance",
        "capabilities": {"authentication_failure_close": True, "consumer_cancel_notify": True,
                         "basic.nack": True, "publisher_confirms": True}}
    CLOSE_TIMEOUT = 10.0
    STRICT = False

    def __init__(self, host, port, user="guest", password="guest", vhost="/", timeout=5.0):
        self.host, self.port = host, port
        self.user, self.password, self.vhost = user, password, vhost
        self.timeout = timeout
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.start = self.tune = None
        self.frame_max = 131072

    def close(self):
        with contextlib.suppress(OSError):
            self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- sending
    def send(self, data):
        self.sock.sendall(data)

    def send_frame(self, ftype, channel, payload, end=FRAME_END):
        self.send(raw_frame(ftype, channel, payload, end))

    def send_method(self, channel, method):
        self.send(method_bytes(channel, method))

    def send_content(self, channel, method, body=b"", props=None, frame_max=None, prop_bytes=None):
        """A content method, its header and the body split to fit frame_max.
        prop_bytes replaces the encoded property list (flags + values)."""
        frame_max = frame_max or self.frame_max
        out = [method_bytes(channel, method)]
        if prop_bytes is None:
            out.append(pika.frame.Header(channel, len(body), props or S.BasicProperties()).marshal())
        else:
            out.append(header_bytes(channel, len(body), props=prop_bytes))
        step = frame_max - 8
        for i in range(0, len(body), step):
            out.append(pika.frame.Body(channel, body[i:i + step]).marshal())
        self.send(b"".join(out))

    def publish(self, channel, exchange, key, body=b"", props=None, mandatory=False, immediate=False, **kw):
        """basic.publish through send_content (kw: frame_max, prop_bytes)."""
        m = S.Basic.Publish(exchange=exchange, routing_key=key, mandatory=mandatory, immediate=immediate)
        self.send_content(channel, m, body, props, **kw)

    # -- receiving
    def recv_bytes(self, n=65536, timeout=None):
        """Raw bytes, buffered ones first (b'' at EOF); socket.timeout on silence."""
        if self.buf:
            data, self.buf = self.buf[:n], self.buf[n:]
            return data
        self.sock.settimeout(timeout if timeout is not None else self.timeout)
        try:
            return self.sock.recv(n)
        except (ConnectionResetError, BrokenPipeError):
            return b""

    def recv_frame(self, timeout=None):
        """The next frame. Raises Closed at EOF, socket.timeout on silence."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        while True:
            consumed, frame = decode_frame(self.buf, self.STRICT)
            if frame is not None:
                self.buf = self.buf[consumed:]
                return frame
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("no frame within timeout")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(262144)
            except (ConnectionResetError, BrokenPipeError):
                data = b""
            if not data:
                raise Closed("connection closed by peer (%d unparsed bytes)" % len(self.buf))
            self.buf += data

    def recv_until_closed(self, timeout=5.0):
        """Every byte the peer sends until it closes the socket; AssertionError
        if it is still open after timeout, socket.timeout if it falls silent."""
        data = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            chunk = self.recv_bytes(timeout=timeout)
            if not chunk:
                return data
            data += chunk
        raise AssertionError("socket still open after %.0f s" % timeout)

    def recv_method(self, timeout=None):
        """The next frame that is not a heartbeat."""
        while True:
            f = self.recv_frame(timeout)
            if not isinstance(f, pika.frame.Heartbeat):
                return f

    def expect(self, method_cls, channel=None, timeout=None):
        f = self.recv_method(timeout)
        got = getattr(f, "method", f)
        if not isinstance(got, method_cls) or (channel is not None and f.channel_number != channel):
            raise AssertionError("expected %s on channel %s, got %r on channel %s"
                                 % (method_cls.NAME, channel, got, getattr(f, "channel_number", "?")))
        return got

    def rpc(self, channel, method, reply_cls):
        self.send_method(channel, method)
        return self.expect(reply_cls, channel)

    def recv_content(self, timeout=None):
        mf = self.recv_method(timeout)
        if not isinstance(getattr(mf, "method", None), (S.Basic.Deliver, S.Basic.GetOk, S.Basic.Return)):
            raise AssertionError("expected a content-bearing method, got %r" % (mf,))
        hf = self.recv_method(timeout)
        bodies, got = [], 0
        while got < hf.body_size:
            bf = self.recv_method(timeout)
            bodies.append(bf)
            got += len(bf.fragment)
        return Content(mf, hf, bodies)

    def wait_closed(self, timeout=5.0):
        """True when the peer closes the socket within timeout (input is discarded)."""
        deadline = time.monotonic() + timeout
        self.buf = b""
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                return False
            except (ConnectionResetError, BrokenPipeError):
                return True
            if not data:
                return True
        return False

    def expect_connection_close(self, code, timeout=None):
        """The server must send connection.close(code) within timeout (default
        CLOSE_TIMEOUT); we answer close-ok and the socket must then close.
        Returns the close method."""
        timeout = self.CLOSE_TIMEOUT if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            f = self.recv_method(max(0.01, deadline - time.monotonic()))
            if isinstance(getattr(f, "method", None), S.Connection.Close):
                break
        m = f.method
        if m.reply_code != code:
            raise AssertionError("got connection.close %d %r, expected %d" % (m.reply_code, m.reply_text, code))
        if f.channel_number != 0:
            raise AssertionError("connection.close on channel %d" % f.channel_number)
        with contextlib.suppress(OSError):
            self.send_method(0, S.Connection.CloseOk())
        if not self.wait_closed(timeout):
            raise AssertionError("socket still open after connection.close-ok")
        return m

    def expect_channel_close(self, channel, code, timeout=None):
        """The server must close `channel` with `code` (frames on other channels
        are skipped); we answer close-ok. Returns the close method."""
        timeout = self.CLOSE_TIMEOUT if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            f = self.recv_method(max(0.01, deadline - time.monotonic()))
            m = getattr(f, "method", None)
            if isinstance(m, S.Connection.Close):
                raise AssertionError("connection closed %d %r, expected channel close %d"
                                     % (m.reply_code, m.reply_text, code))
            if isinstance(m, S.Channel.Close) and f.channel_number == channel:
                break
        if m.reply_code != code:
            raise AssertionError("got channel.close %d %r, expected %d" % (m.reply_code, m.reply_text, code))
        self.send_method(channel, S.Channel.CloseOk())
        return m

    def expect_silent_close(self, timeout=10.0):
        """The server must close the socket without sending connection.close."""
        try:
            f = self.recv_method(timeout)
        except Closed:
            return
        except socket.timeout:
            raise AssertionError("socket still open after %.0f s, expected a bare TCP close" % timeout)
        raise AssertionError("expected a bare TCP close, got %r" % (getattr(f, "method", f),))

    # -- handshake
    def handshake(self, mechanism="PLAIN", frame_max=None, channel_max=None, heartbeat=0, open_vhost=True,
                  client_properties=None, user=None, password=None, vhost=None):
        """Header, start/start-ok, tune/tune-ok (our values, or the server's when
        None), and connection.open unless open_vhost is False. user, password
        and vhost default to the client's. Returns connection.tune."""
        user = self.user if user is None else user
        password = self.password if password is None else password
        self.send(PROTOCOL_HEADER)
        self.start = self.expect(S.Connection.Start, 0)
        if mechanism == "PLAIN":
            response = b"\0" + user.encode() + b"\0" + password.encode()
        elif mechanism == "AMQPLAIN":
            response = amqplain_response(user, password)
        else:
            response = b""
        props = client_properties if client_properties is not None else self.CLIENT_PROPERTIES
        self.send_method(0, S.Connection.StartOk(client_properties=props, mechanism=mechanism,
                                                 response=response, locale="en_US"))
        self.tune = self.expect(S.Connection.Tune, 0)
        fm = self.tune.frame_max if frame_max is None else frame_max
        cm = self.tune.channel_max if channel_max is None else channel_max
        self.frame_max = fm
        self.send_method(0, S.Connection.TuneOk(channel_max=cm, frame_max=fm, heartbeat=heartbeat))
        if open_vhost:
            self.send_method(0, S.Connection.Open(virtual_host=self.vhost if vhost is None else vhost))
            self.expect(S.Connection.OpenOk, 0)
        return self.tune

    def open_channel(self, channel=1):
        self.rpc(channel, S.Channel.Open(), S.Channel.OpenOk)
        return channel

    def close_cleanly(self):
        self.send_method(0, S.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0))
        while True:
            f = self.recv_method()
            if isinstance(getattr(f, "method", None), S.Connection.CloseOk):
                break
        self.close()
