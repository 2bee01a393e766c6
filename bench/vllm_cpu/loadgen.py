"""A closed-loop load generator for an OpenAI-compatible ``/v1/completions`` endpoint, and the
ground truth it counts.

``concurrency`` client threads each send one streamed completion request at a time, back to
back (a fixed number of requests in flight: the offered load does not depend on the
server's speed). Each request asks for exactly its length in tokens (``max_tokens`` with
``ignore_eos``, a vLLM sampling parameter) and ``stream_options.include_usage``, so the last
chunk carries the server's ``usage`` (``prompt_tokens``, ``completion_tokens``).

Lengths: ``max_tokens`` for every request when ``spread`` is 0; otherwise each request's
length is drawn uniformly from the integers in ``[max_tokens (1 - spread), max_tokens (1 +
spread)]`` by a per-client seeded generator (the same sequence on every run). Equal lengths
keep requests that started together in step: after a restart, the first batch starts at once,
finishes at once and hands its slots to the next batch together, so throughput pulses with
the request's duration for as long as the batches stay aligned. Real traffic's lengths vary
and drift out of step; a spread reproduces that.

Ground truth: a finished request's ``usage.completion_tokens`` are spread evenly over the
time from its first streamed token to its end (the tokens were generated in that span, one
per engine step); :meth:`LoadGenerator.tokens_per_second` sums the share of each request
that falls in a window and divides by the window's length. A request that failed (the
server restarting, a connection refused) counts no tokens and is retried after
:data:`RETRY_PAUSE` seconds.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass

import requests

#: Seconds a client waits after a failed request before the next one.
RETRY_PAUSE = 0.5


@dataclass(frozen=True)
class Completion:
    """One finished request: wall-clock times (Unix seconds) and the server's ``usage``."""

    start: float
    first_token: float
    end: float
    prompt_tokens: int
    completion_tokens: int


class LoadGenerator:
    """``concurrency`` threads sending completions to ``url`` until :meth:`stop`.

    Args:
        url: the server's base URL (``http://127.0.0.1:8000``).
        model: the served model name.
        prompt: the prompt text of every request.
        concurrency: requests in flight.
        max_tokens: mean tokens generated per request (exactly, per request: ``ignore_eos``).
        spread: relative half-width of the uniform length distribution, in ``[0, 1)`` (module doc).
        seed: seeds the clients' length generators.

    Raises:
        ValueError: ``spread`` outside ``[0, 1)`` or ``max_tokens`` below 1.
    """

    def __init__(self, url: str, model: str, prompt: str, concurrency: int, max_tokens: int,
                 spread: float = 0.0, seed: int = 0) -> None:
        if not 0.0 <= spread < 1.0 or max_tokens < 1:
            raise ValueError(f"need max_tokens >= 1 and 0 <= spread < 1, got {max_tokens} and {spread}")
        self.url, self.model, self.prompt = url.rstrip("/"), model, prompt
        self.concurrency, self.max_tokens, self.spread, self.seed = concurrency, max_tokens, spread, seed
        self.completions: list[Completion] = []
        self.failures = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._client, args=(i,), name=f"client-{i}", daemon=True)
                         for i in range(concurrency)]

    def start(self) -> LoadGenerator:
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        """Ask every client to stop after its request and wait for them."""
        self._stop.set()
        for t in self._threads:
            t.join()

    def lengths(self, client: int):
        """The request lengths (tokens) client number ``client`` sends, in order (endless)."""
        rng = random.Random(f"{self.seed}-{client}")
        low = max(1, round(self.max_tokens * (1.0 - self.spread)))
        high = round(self.max_tokens * (1.0 + self.spread))
        while True:
            yield rng.randint(low, high)

    def _client(self, client: int) -> None:
        session = requests.Session()
        lengths = self.lengths(client)
        while not self._stop.is_set():
            body = {"model": self.model, "prompt": self.prompt, "max_tokens": next(lengths), "ignore_eos": True,
                    "temperature": 1.0, "stream": True, "stream_options": {"include_usage": True}}
            try:
                done = self._one(session, body)
            except (requests.RequestException, ValueError, KeyError):
                done = None
            if done is None:
                with self._lock:
                    self.failures += 1
                self._stop.wait(RETRY_PAUSE)
                continue
            with self._lock:
                self.completions.append(done)

    def _one(self, session: requests.Session, body: dict) -> Completion | None:
        start = time.time()
        first = None
        usage = None
        with session.post(f"{self.url}/v1/completions", json=body, stream=True, timeout=(5, 600)) as resp:
            if resp.status_code != 200:
                return None
            for line in resp.iter_lines():
                if not line.startswith(b"data: "):
                    continue
                data = line[6:]
                if data == b"[DONE]":
                    break
                chunk = json.loads(data)
                if first is None and chunk.get("choices"):
                    first = time.time()
                if chunk.get("usage"):
                    usage = chunk["usage"]
        end = time.time()
        if usage is None or first is None:
            return None
        return Completion(start, first, end, int(usage["prompt_tokens"]), int(usage["completion_tokens"]))

    def snapshot(self) -> list[Completion]:
        with self._lock:
            return list(self.completions)

    def tokens_per_second(self, t0: float, t1: float) -> float:
        """Output tokens per second generated in ``[t0, t1]`` (Unix seconds), from the
        ``usage`` of the finished requests (module doc)."""
        return tokens_per_second(self.snapshot(), t0, t1)


def tokens_per_second(completions: list[Completion], t0: float, t1: float) -> float:
    """Sum over ``completions`` of ``completion_tokens`` times the fraction of
    ``[first_token, end]`` inside ``[t0, t1]``, divided by ``t1 - t0`` (tokens/s)."""
    if t1 <= t0:
        raise ValueError("window end must be after its start")
    total = 0.0
    for c in completions:
        span = c.end - c.first_token
        if span <= 0:
            total += c.completion_tokens if t0 <= c.end <= t1 else 0
            continue
        overlap = max(0.0, min(c.end, t1) - max(c.first_token, t0))
        total += c.completion_tokens * overlap / span
    return total / (t1 - t0)
