"""A WSGI app instrumented with the SDK in multiprocess mode, for gunicorn with several
workers (tests/integration/test_sdk_gunicorn.py). ``/work?n=N&sleep=S`` handles one
request: N input and 2N output tokens, queue depth 3 in this worker, and answers the
worker's pid; ``/metrics`` answers the aggregate of every worker."""

from __future__ import annotations

import os
import time
from urllib.parse import parse_qs

from obsctl.exporters.sdk import Workload, make_wsgi_app

wl = Workload("mp-web", labels={"model": "tiny"})
metrics = make_wsgi_app()


def app(environ, start_response):
    if environ["PATH_INFO"] == "/metrics":
        return metrics(environ, start_response)
    query = parse_qs(environ.get("QUERY_STRING", ""))
    with wl.request():
        wl.set_queue_depth(3)
        time.sleep(float(query.get("sleep", ["0"])[0]))
        n = int(query.get("n", ["1"])[0])
        wl.count_input_tokens(n)
        wl.count_output_tokens(2 * n)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [str(os.getpid()).encode()]
