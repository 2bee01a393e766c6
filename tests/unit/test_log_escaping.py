"""Log lines stay one logfmt record each whatever text they quote: control bytes from a
client's request line (terminal escapes, carriage returns, line breaks) are escaped."""

from __future__ import annotations

import io
import logging
import socket

from obsctl.exporters.main import LogfmtFormatter
from obsctl.exporters.server import ExporterServer


def record(message: str) -> logging.LogRecord:
    return logging.LogRecord("obsctl.exporter", logging.INFO, __file__, 1, message, None, None)


def test_formatter_escapes_control_bytes() -> None:
    line = LogfmtFormatter().format(record('a "q" \\ \x1b[2J\rts=0 level=error msg="forged"\nnext\x00\x85'))
    assert line.endswith('msg="a \\"q\\" \\\\ \\x1b[2J\\rts=0 level=error msg=\\"forged\\"\\nnext\\x00\\u0085"')
    assert not any(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f for c in line)


def test_request_line_control_bytes_are_escaped_in_the_debug_log() -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(LogfmtFormatter())
    logger = logging.getLogger("obsctl.exporter")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    server = ExporterServer(lambda budget: [], "127.0.0.1:0").start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(b"GET /\x1b[2J\rx HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            while sock.recv(65536):
                pass
    finally:
        server.stop()
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    text = out.getvalue()
    assert "\\x1b[2J\\rx" in text, text
    assert "\x1b" not in text and "\r" not in text
