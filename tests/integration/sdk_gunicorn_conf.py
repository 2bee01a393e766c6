"""gunicorn hooks for the SDK's multiprocess mode (as the README shows them): wipe the
directory at start, serve the aggregate from the master, drop an exited worker's live gauges."""

import os

from obsctl.exporters import sdk


def on_starting(server):
    sdk.prepare_multiprocess_dir()


def when_ready(server):
    sdk.serve_multiprocess(int(os.environ["OBSCTL_TEST_MASTER_METRICS_PORT"]))


def child_exit(server, worker):
    sdk.mark_process_dead(worker.pid)
