# A raw stream-protocol client: how the "live" byte vectors of
# test_streamproto_encode.c / _decode.c were taken from RabbitMQ 3.10.8's
# rabbitmq_stream (a node with stream.listeners.tcp.default = PORT and
# loopback_users = none). It sends hand-built frames and prints every frame
# the server sends as hex ("S<"), or EOF / TIMEOUT. Not run by make test.
#
# Usage: /usr/bin/python3 streamproto_live_client.py MODE [PORT]
#   main: handshake, create, metadata, publish, subscribe, ... close
#   unknown_post, badver_post, trailing_post, truncated_post, xcv_post:
#     a bad frame after Open (3.10.8: Close(1, 13, "unknown frame"))
#   unknown_pre, big_pre, tiny_pre: a bad frame before (3.10.8: socket closed)
#   badauth, badmech: refused SASL (code 8 / 7, then the socket closes)
import socket, struct, sys, time
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 25812
def s16(b): return struct.pack('>H', len(b)) + b
def frame(key, ver, body): return struct.pack('>IHH', 4 + len(body), key, ver) + body
def kv(d): return struct.pack('>I', len(d)) + b''.join(s16(k) + s16(v) for k, v in d)
class C:
    def __init__(s):
        s.s = socket.create_connection(('127.0.0.1', PORT)); s.s.settimeout(3); s.buf = b''
    def send(s, b, label):
        print('C>', label, b.hex()); s.s.sendall(b)
    def recv(s, label=''):
        while True:
            if len(s.buf) >= 4:
                n = struct.unpack('>I', s.buf[:4])[0]
                if len(s.buf) >= 4 + n:
                    f, s.buf = s.buf[:4 + n], s.buf[4 + n:]
                    print('S<', label, f.hex()); return f
            try:
                d = s.s.recv(65536)
            except socket.timeout:
                print('S<', label, 'TIMEOUT'); return None
            if not d:
                print('S<', label, 'EOF'); return None
            s.buf += d
    def handshake(s):
        s.send(frame(0x11, 1, struct.pack('>I', 1) + kv([(b'product', b'raw')])), 'peer_properties'); s.recv('peer_properties')
        s.send(frame(0x12, 1, struct.pack('>I', 2)), 'sasl_handshake'); s.recv('sasl_handshake')
        s.send(frame(0x13, 1, struct.pack('>I', 3) + s16(b'PLAIN') + struct.pack('>I', 12) + b'\0guest\0guest'), 'sasl_authenticate'); s.recv('sasl_authenticate')
        s.recv('tune')
        s.send(frame(0x8014, 1, struct.pack('>II', 1048576, 60)), 'tune_ok')
        s.send(frame(0x15, 1, struct.pack('>I', 4) + s16(b'/')), 'open'); s.recv('open')
mode = sys.argv[1]
c = C()
if mode == 'main':
    c.handshake()
    c.send(frame(0x0e, 1, struct.pack('>I', 5) + s16(b'cap-s')), 'delete'); c.recv('delete')
    c.send(frame(0x0d, 1, struct.pack('>I', 6) + s16(b'cap-s') + kv([])), 'create'); c.recv('create')
    c.send(frame(0x0d, 1, struct.pack('>I', 7) + s16(b'cap-s') + kv([])), 'create again'); c.recv('create again')
    c.send(frame(0x0f, 1, struct.pack('>I', 8) + struct.pack('>I', 2) + s16(b'cap-s') + s16(b'nope')), 'metadata'); c.recv('metadata')
    c.send(frame(0x01, 1, struct.pack('>I', 9) + b'\x07' + s16(b'ref1') + s16(b'cap-s')), 'declare_publisher'); c.recv('declare_publisher')
    c.send(frame(0x02, 1, b'\x07' + struct.pack('>I', 2) + struct.pack('>Q', 1) + struct.pack('>I', 3) + b'abc' + struct.pack('>Q', 2) + struct.pack('>I', 2) + b'de'), 'publish'); c.recv('publish_confirm')
    c.send(frame(0x02, 1, b'\x08' + struct.pack('>I', 1) + struct.pack('>Q', 5) + struct.pack('>I', 1) + b'x'), 'publish unknown publisher'); c.recv('publish_error')
    c.send(frame(0x05, 1, struct.pack('>I', 10) + s16(b'ref1') + s16(b'cap-s')), 'query_publisher_sequence'); c.recv('query_publisher_sequence')
    c.send(frame(0x0b, 1, struct.pack('>I', 11) + s16(b'cons') + s16(b'cap-s')), 'query_offset none'); c.recv('query_offset')
    c.send(frame(0x0a, 1, s16(b'cons') + s16(b'cap-s') + struct.pack('>Q', 1)), 'store_offset')
    time.sleep(0.3)
    c.send(frame(0x0b, 1, struct.pack('>I', 12) + s16(b'cons') + s16(b'cap-s')), 'query_offset'); c.recv('query_offset')
    c.send(frame(0x07, 1, struct.pack('>I', 13) + b'\x03' + s16(b'cap-s') + struct.pack('>H', 1) + struct.pack('>H', 10) + kv([(b'x', b'y')])), 'subscribe first'); c.recv('subscribe'); c.recv('deliver')
    c.send(frame(0x07, 1, struct.pack('>I', 14) + b'\x04' + s16(b'nope') + struct.pack('>H', 4) + struct.pack('>Q', 0) + struct.pack('>H', 10)), 'subscribe missing'); c.recv('subscribe missing')
    c.send(frame(0x09, 1, b'\x09' + struct.pack('>H', 1)), 'credit unknown'); c.recv('credit response')
    c.send(frame(0x0c, 1, struct.pack('>I', 15) + b'\x03'), 'unsubscribe'); c.recv('unsubscribe')
    c.send(frame(0x06, 1, struct.pack('>I', 16) + b'\x07'), 'delete_publisher'); c.recv('delete_publisher')
    c.send(frame(0x18, 1, struct.pack('>I', 17) + s16(b'rk') + s16(b'nosuper')), 'route'); c.recv('route')
    c.send(frame(0x19, 1, struct.pack('>I', 18) + s16(b'nosuper')), 'partitions'); c.recv('partitions')
    c.send(frame(0x17, 1, b''), 'heartbeat')
    c.send(frame(0x0e, 1, struct.pack('>I', 19) + s16(b'cap-s')), 'delete'); c.recv('delete')
    c.send(frame(0x16, 1, struct.pack('>I', 20) + struct.pack('>H', 1) + s16(b'bye')), 'close'); c.recv('close'); c.recv('after close')
elif mode == 'unknown_post':
    c.handshake(); c.send(frame(0x7f, 1, struct.pack('>I', 77)), 'unknown key'); c.recv('reply'); c.recv('after')
elif mode == 'badver_post':
    c.handshake(); c.send(frame(0x0b, 9, struct.pack('>I', 77) + s16(b'c') + s16(b's')), 'query_offset v9'); c.recv('reply'); c.recv('after')
elif mode == 'trailing_post':
    c.handshake(); c.send(frame(0x0b, 1, struct.pack('>I', 77) + s16(b'c') + s16(b's') + b'\0'), 'query_offset trailing'); c.recv('reply'); c.recv('after')
elif mode == 'truncated_post':
    c.handshake(); c.send(frame(0x0b, 1, struct.pack('>I', 77) + s16(b'c') + b'\0\x05s'), 'query_offset truncated'); c.recv('reply'); c.recv('after')
elif mode == 'xcv_post':
    c.handshake(); c.send(frame(0x1b, 1, struct.pack('>I', 77) + struct.pack('>I', 1) + struct.pack('>HHH', 8, 1, 2)), 'exchange_command_versions'); c.recv('reply'); c.recv('after')
elif mode == 'unknown_pre':
    c.send(frame(0x7f, 1, struct.pack('>I', 77)), 'unknown key pre-auth'); c.recv('reply')
elif mode == 'big_pre':
    c.send(struct.pack('>I', 100000) + b'\0\x11\0\x01' + b'\0' * 9000, 'big frame pre-auth'); c.recv('reply')
elif mode == 'tiny_pre':
    c.send(struct.pack('>I', 1) + b'\0', 'size-1 frame pre-auth'); c.recv('reply')
elif mode == 'badauth':
    c.send(frame(0x11, 1, struct.pack('>I', 1) + kv([])), 'peer_properties'); c.recv('peer_properties')
    c.send(frame(0x12, 1, struct.pack('>I', 2)), 'sasl_handshake'); c.recv('sasl_handshake')
    c.send(frame(0x13, 1, struct.pack('>I', 3) + s16(b'PLAIN') + struct.pack('>I', 12) + b'\0guest\0wrong'), 'sasl_authenticate bad'); c.recv('sasl_authenticate'); c.recv('after')
elif mode == 'badmech':
    c.send(frame(0x13, 1, struct.pack('>I', 3) + s16(b'FOO') + struct.pack('>I', 1) + b'x'), 'sasl_authenticate FOO'); c.recv('sasl_authenticate'); c.recv('after')
