#!/usr/bin/python3
"""Development server for the console (not shipped): serves mgmt-ui/www/
with the same headers Warren sends and proxies /api/* to a management API
(RabbitMQ's on 127.0.0.1:15672 by default, or Warren's), so the console can
be driven in a browser against real data before Warren serves it.

    tests/browser/devserver.py [--port 0] [--api http://127.0.0.1:15672]

Prints "dev console listening on 127.0.0.1:PORT" once it accepts requests.
Talks to 127.0.0.1 only.
"""
import argparse
import http.client
import http.server
import os
import sys
import urllib.parse

WWW = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'mgmt-ui', 'www')
TYPES = {'.html': 'text/html; charset=utf-8', '.css': 'text/css; charset=utf-8',
         '.js': 'text/javascript; charset=utf-8', '.svg': 'image/svg+xml', '.json': 'application/json'}
# Keep in step with mgmt-ui/console.c's headers.
SECURITY = {
    'Content-Security-Policy': "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
                               "frame-ancestors 'none'",
    'X-Content-Type-Options': 'nosniff',
    'X-Frame-Options': 'DENY',
    'Referrer-Policy': 'no-referrer',
}
PASS_REQUEST = ('authorization', 'content-type', 'x-reason', 'accept')
PASS_RESPONSE = ('content-type', 'www-authenticate', 'location', 'content-disposition')


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    api = None

    def log_message(self, fmt, *args):
        if os.environ.get('DEVSERVER_LOG'):
            sys.stderr.write('devserver: ' + fmt % args + '\n')

    def do_any(self):
        if self.path.startswith('/api/') or self.path == '/api':
            self.proxy()
        elif self.command in ('GET', 'HEAD'):
            self.static()
        else:
            self.reply(405, b'method not allowed', 'text/plain')

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = do_any

    def reply(self, status, body, ctype, extra=None):
        self.send_response(status)
        self.send_header('Content-Type', ctype)
        self.send_header('Content-Length', str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != 'HEAD':
            self.wfile.write(body)

    def static(self):
        path = urllib.parse.urlsplit(self.path).path
        if path == '/':
            path = '/index.html'
        full = os.path.realpath(os.path.join(WWW, path.lstrip('/')))
        if not full.startswith(os.path.realpath(WWW) + os.sep) or not os.path.isfile(full):
            full = os.path.join(WWW, 'index.html')
        with open(full, 'rb') as f:
            body = f.read()
        ctype = TYPES.get(os.path.splitext(full)[1], 'application/octet-stream')
        self.reply(200, body, ctype, {**SECURITY, 'Cache-Control': 'no-cache'})

    def proxy(self):
        length = int(self.headers.get('Content-Length') or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() in PASS_REQUEST}
        conn = http.client.HTTPConnection(self.api.hostname, self.api.port or 80, timeout=120)
        try:
            conn.request(self.command, self.api.path.rstrip('/') + self.path, body=body, headers=headers)
            res = conn.getresponse()
            data = res.read()
        except OSError as e:
            self.reply(502, ('{"error":"bad_gateway","reason":"%s"}' % e).encode(), 'application/json')
            return
        finally:
            conn.close()
        extra = {k: v for k, v in res.getheaders() if k.lower() in PASS_RESPONSE and k.lower() != 'content-type'}
        self.reply(res.status, data, res.getheader('Content-Type', 'application/json'), extra)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--port', type=int, default=0)
    ap.add_argument('--api', default='http://127.0.0.1:15672')
    args = ap.parse_args()
    Handler.api = urllib.parse.urlsplit(args.api)
    if Handler.api.hostname not in ('127.0.0.1', 'localhost', '::1'):
        sys.exit('devserver: the API must be on this machine (127.0.0.1)')
    server = http.server.ThreadingHTTPServer(('127.0.0.1', args.port), Handler)
    server.daemon_threads = True
    print('dev console listening on 127.0.0.1:%d' % server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == '__main__':
    main()
