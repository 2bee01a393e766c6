"""A tiny Llama-architecture model folder built locally, for vLLM's ``--load-format dummy``.

No download: the folder holds a ``config.json`` (a 2-layer Llama, hidden size 64, two heads of 32, a vocabulary
of :data:`VOCAB_SIZE` tokens) and a fast tokenizer trained here with the ``tokenizers``
library on a fixed synthetic corpus (word-level, whitespace split), saved as
``tokenizer.json`` with a ``tokenizer_config.json`` that names
``PreTrainedTokenizerFast``. vLLM reads the architecture from ``config.json`` and, with
``--load-format dummy``, initialises the weights at random, so no weight file exists.

The model is small enough that two busy CPU cores give each request several tokens per
second; the per-step cost is then mostly the engine's own overhead, so the batch size
(``--max-num-seqs``) sets the throughput.

Runs in any environment that has ``tokenizers`` (vLLM's venv has it; the project's venv
through ``transformers``). Usage: ``python tiny_model.py OUT_DIR``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

#: Tokens of the vocabulary (special tokens included).
VOCAB_SIZE = 512
#: Longest sequence (prompt + output) the model accepts.
MAX_POSITIONS = 512
SPECIAL = ("<unk>", "<s>", "</s>")


def corpus_words(n: int) -> list[str]:
    """``n`` distinct pronounceable words, the same on every run (no randomness)."""
    consonants, vowels = "bdfgklmnprstvz", "aeiou"
    words = []
    for i in range(n):
        a, b, c = i % len(consonants), (i // len(consonants)) % len(vowels), (i // (len(consonants) * len(vowels)))
        words.append(f"{consonants[a]}{vowels[b]}{consonants[c % len(consonants)]}{vowels[(a + c) % len(vowels)]}")
    return list(dict.fromkeys(words))


def llama_config() -> dict:
    """``config.json`` of the tiny Llama (float32: the CPU build's safe dtype)."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": 32,  # the CPU attention kernels take head sizes 32, 64, 80, ...
        "hidden_act": "silu",
        "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "vocab_size": VOCAB_SIZE,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 0,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
    }


def build(out: Path) -> Path:
    """Write the model folder ``out`` (created; existing files of the same names replaced).

    Returns:
        ``out``.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    words = corpus_words(VOCAB_SIZE - len(SPECIAL))
    trainer = trainers.WordLevelTrainer(vocab_size=VOCAB_SIZE, special_tokens=list(SPECIAL), min_frequency=1)
    tokenizer.train_from_iterator([" ".join(words[i:i + 16]) for i in range(0, len(words), 16)], trainer)
    tokenizer.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<unk>",
        "model_max_length": MAX_POSITIONS,
    }, indent=1))
    (out / "config.json").write_text(json.dumps(llama_config(), indent=1))
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}, indent=1))
    return out


def prompt(words: int = 16) -> str:
    """A fixed prompt of ``words`` in-vocabulary words (one token each)."""
    return " ".join(corpus_words(words))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: tiny_model.py OUT_DIR")
    print(build(Path(sys.argv[1])))
