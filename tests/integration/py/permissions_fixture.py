"""The users, vhost and permissions the permission tests run with, made
either in a stopped Warren's data_dir/metadata.db (sqlite3, the schema of
store/meta.c -- so Warren's load path reads them at start) or, for a
reference run against RabbitMQ (WARREN_TEST_TARGET), with rabbitmqctl.

Used by py/test_permissions.py and, as a command, by the rabbitmq-c tests
(test_permissions.c):

    permissions_fixture.py seed DATA_DIR SUFFIX    # Warren, broker stopped
    permissions_fixture.py rabbitmq-setup SUFFIX   # RabbitMQ via rabbitmqctl
    permissions_fixture.py rabbitmq-teardown SUFFIX

Every name ends in SUFFIX so runs never collide on a shared RabbitMQ.
"""
import base64
import hashlib
import os
import sqlite3
import subprocess
import sys

PASSWORD = "pw"
# user: (configure, write, read); topic permissions on amq.topic: (write, read)
NARROW, TOPIC_USER, NO_PERMS, NO_PASSWORD = "narrow", "topical", "noperm", "nopw"
PERMISSIONS = {
    NARROW: ("^cfg", "^wr", "^rd"),
    TOPIC_USER: (".*", "^(wr|amq\\.topic|q1|sc|x\\.topic)", ".*"),
}
TOPIC_PERMISSIONS = {
    NARROW: ("^allowed\\.", "^allowed\\."),
    TOPIC_USER: ("^allowed\\.", "^allowed\\."),
}


def names(suffix):
    """vhost and user names for a run."""
    return {"vhost": "access-itest-" + suffix,
            **{u: "access-itest-%s-%s" % (u, suffix) for u in (NARROW, TOPIC_USER, NO_PERMS, NO_PASSWORD)}}


def rabbit_hash(password, salt=None):
    """rabbit_password_hashing_sha256: base64(salt ++ sha256(salt ++ password))."""
    salt = salt or os.urandom(4)
    return base64.b64encode(salt + hashlib.sha256(salt + password.encode()).digest()).decode()


def seed(data_dir, suffix):
    n = names(suffix)
    db = sqlite3.connect(os.path.join(data_dir, "metadata.db"))
    with db:
        db.execute("INSERT INTO vhosts VALUES (?, 'permission tests', '', '', 0)", (n["vhost"],))
        add_user = ("INSERT INTO users (name, password_hash, hashing_algorithm, tags)"
                    " VALUES (?, ?, 'rabbit_password_hashing_sha256', '')")
        for u in (NARROW, TOPIC_USER, NO_PERMS):
            db.execute(add_user, (n[u], rabbit_hash(PASSWORD)))
        db.execute(add_user, (n[NO_PASSWORD], ""))
        for u, (c, w, r) in PERMISSIONS.items():
            db.execute("INSERT INTO permissions VALUES (?, ?, ?, ?, ?)", (n[u], n["vhost"], c, w, r))
        db.execute("INSERT INTO permissions VALUES ('guest', ?, '.*', '.*', '.*')", (n["vhost"],))
        for u, (w, r) in TOPIC_PERMISSIONS.items():
            db.execute("INSERT INTO topic_permissions VALUES (?, ?, 'amq.topic', ?, ?)",
                       (n[u], n["vhost"], w, r))
    db.close()


def ctl(*args):
    subprocess.run(["rabbitmqctl", *args], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=60)


def rabbitmq_setup(suffix):
    n = names(suffix)
    ctl("add_vhost", n["vhost"])
    ctl("set_permissions", "-p", n["vhost"], "guest", ".*", ".*", ".*")
    for u in (NARROW, TOPIC_USER, NO_PERMS, NO_PASSWORD):
        ctl("add_user", n[u], PASSWORD)
    ctl("clear_password", n[NO_PASSWORD])
    for u, (c, w, r) in PERMISSIONS.items():
        ctl("set_permissions", "-p", n["vhost"], n[u], c, w, r)
    for u, (w, r) in TOPIC_PERMISSIONS.items():
        ctl("set_topic_permissions", "-p", n["vhost"], n[u], "amq.topic", w, r)


def rabbitmq_teardown(suffix):
    n = names(suffix)
    for u in (NARROW, TOPIC_USER, NO_PERMS, NO_PASSWORD):
        subprocess.run(["rabbitmqctl", "delete_user", n[u]], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60)
    subprocess.run(["rabbitmqctl", "delete_vhost", n["vhost"]], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=60)


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "seed" and len(sys.argv) == 4:
        seed(sys.argv[2], sys.argv[3])
    elif cmd == "rabbitmq-setup" and len(sys.argv) == 3:
        rabbitmq_setup(sys.argv[2])
    elif cmd == "rabbitmq-teardown" and len(sys.argv) == 3:
        rabbitmq_teardown(sys.argv[2])
    else:
        sys.exit("usage: permissions_fixture.py seed DATA_DIR SUFFIX | rabbitmq-setup SUFFIX | "
                 "rabbitmq-teardown SUFFIX")
