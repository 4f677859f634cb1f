"""The Celery application of the framework scenarios (scen_celery.py). The
scenario process sets CONF_CELERY_BROKER and CONF_CELERY_QUEUE, starts a
real worker on this module and sends tasks; results come back through the
rpc:// backend (a reply queue per client)."""
import os

from celery import Celery

app = Celery("conformance")
_queue = os.environ.get("CONF_CELERY_QUEUE", "conf.celery")
app.conf.update(
    broker_url=os.environ.get("CONF_CELERY_BROKER", "pyamqp://guest:guest@127.0.0.1:5672//"),
    result_backend="rpc://",
    task_default_queue=_queue,
    task_default_exchange=_queue,
    task_default_routing_key=_queue,
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    worker_enable_remote_control=False,   # no pidbox exchanges left behind
    worker_send_task_events=False,
    worker_hijack_root_logger=False,
    # Unlimited prefetch: with prefetch 1 a solo worker sometimes leaves its ack
    # unsent until its 10 s poll timeout (a kombu hub quirk seen with both
    # brokers), which would make these scenarios time out.
    worker_prefetch_multiplier=0,
    broker_connection_retry_on_startup=True,
    broker_connection_max_retries=3,
)


@app.task
def add(x, y):
    return x + y


@app.task
def fail(message):
    raise ValueError(message)


@app.task(bind=True)
def whoami(self):
    return {"id": self.request.id, "routing_key": self.request.delivery_info.get("routing_key")}
