"""The vLLM end-to-end benchmark's own parts: the ground truth's window arithmetic and the
locally built model folder (the benchmark itself runs a real vLLM: ``make bench-vllm``)."""

from __future__ import annotations

import json

import pytest
from vllm_cpu import loadgen, tiny_model


def done(first: float, end: float, tokens: int) -> loadgen.Completion:
    return loadgen.Completion(start=first - 1.0, first_token=first, end=end, prompt_tokens=16, completion_tokens=tokens)


def test_tokens_inside_the_window_count_whole():
    # Two requests wholly inside [0, 10]: 64 + 32 tokens over 10 s.
    got = loadgen.tokens_per_second([done(1, 5, 64), done(2, 9, 32)], 0, 10)
    assert got == pytest.approx(9.6)


def test_a_request_straddling_the_edge_counts_its_share():
    # Tokens spread over [8, 12]: half of 40 falls in [0, 10]; queueing before the first
    # token (start = 7) does not count.
    assert loadgen.tokens_per_second([done(8, 12, 40)], 0, 10) == pytest.approx(2.0)
    assert loadgen.tokens_per_second([done(8, 12, 40)], 10, 20) == pytest.approx(2.0)


def test_shares_add_up_over_adjacent_windows():
    reqs = [done(t, t + 3.7, 64) for t in (0.3, 1.1, 2.9, 4.4, 6.0, 7.7)]
    whole = loadgen.tokens_per_second(reqs, 0, 12) * 12
    parts = sum(loadgen.tokens_per_second(reqs, a, a + 3) * 3 for a in (0, 3, 6, 9))
    assert whole == pytest.approx(64 * 6)
    assert parts == pytest.approx(whole)


def test_a_request_outside_the_window_counts_nothing():
    assert loadgen.tokens_per_second([done(11, 15, 64)], 0, 10) == 0.0


def test_an_empty_window_is_refused():
    with pytest.raises(ValueError, match="after its start"):
        loadgen.tokens_per_second([], 5, 5)


def test_the_model_folder_is_a_small_llama_with_a_tokenizer(tmp_path):
    from transformers import AutoTokenizer

    out = tiny_model.build(tmp_path / "m")
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["num_hidden_layers"] == 2
    assert config["vocab_size"] == tiny_model.VOCAB_SIZE
    tok = AutoTokenizer.from_pretrained(str(out))
    assert len(tok) == tiny_model.VOCAB_SIZE
    ids = tok(tiny_model.prompt(16))["input_ids"]
    assert len(ids) == 16 and tok.unk_token_id not in ids
    assert tok.decode(ids) == tiny_model.prompt(16)


def _first(gen, n: int) -> list[int]:
    return [next(gen) for _ in range(n)]


def test_request_lengths_fixed_without_spread():
    lg = loadgen.LoadGenerator("http://127.0.0.1:1", "m", "p", concurrency=2, max_tokens=64)
    assert _first(lg.lengths(0), 50) == [64] * 50


def test_request_lengths_spread_uniform_within_bounds_and_seeded():
    lg = loadgen.LoadGenerator("http://127.0.0.1:1", "m", "p", concurrency=2, max_tokens=64, spread=0.5, seed=3)
    got = _first(lg.lengths(0), 4000)
    assert min(got) == 32 and max(got) == 96
    # The mean of the uniform integers on [32, 96] is 64; its standard error over 4000 draws is about 0.3.
    assert abs(sum(got) / len(got) - 64) < 1.5
    assert _first(lg.lengths(0), 20) == got[:20]
    assert _first(lg.lengths(1), 20) != got[:20]


def test_request_lengths_spread_rejected_outside_unit_interval():
    with pytest.raises(ValueError, match="spread"):
        loadgen.LoadGenerator("http://127.0.0.1:1", "m", "p", concurrency=1, max_tokens=64, spread=1.0)
