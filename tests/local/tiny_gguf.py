"""Writes a tiny but loadable GGUF model (a one-layer llama with zero weights), in pure Python.

llama.cpp loads it in milliseconds and answers requests with nonsense, which is all the tests
of the real server's HTTP side (API key, CORS, health) need.
"""

import struct
from pathlib import Path

_U32, _F32, _STRING, _ARRAY, _F32_TENSOR = 4, 6, 8, 9, 0
_ALIGN = 32
_EMBD, _HEADS, _FF, _CONTEXT = 8, 2, 16, 512


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def _value(value: object) -> bytes:
    if isinstance(value, str):
        return struct.pack("<I", _STRING) + _string(value)
    if isinstance(value, float):
        return struct.pack("<If", _F32, value)
    if isinstance(value, int):
        return struct.pack("<II", _U32, value)
    assert isinstance(value, list)
    if isinstance(value[0], str):
        items = b"".join(_string(v) for v in value)
        return struct.pack("<IIQ", _ARRAY, _STRING, len(value)) + items
    if isinstance(value[0], float):
        return struct.pack(f"<IIQ{len(value)}f", _ARRAY, _F32, len(value), *value)
    return struct.pack(f"<IIQ{len(value)}i", _ARRAY, 5, len(value), *value)  # int32


def _metadata(vocab: list[str]) -> dict[str, object]:
    return {
        "general.architecture": "llama",
        "general.name": "tiny",
        "llama.context_length": _CONTEXT,
        "llama.embedding_length": _EMBD,
        "llama.block_count": 1,
        "llama.feed_forward_length": _FF,
        "llama.attention.head_count": _HEADS,
        "llama.attention.head_count_kv": _HEADS,
        "llama.attention.layer_norm_rms_epsilon": 1e-5,
        "llama.rope.dimension_count": _EMBD // _HEADS,
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": vocab,
        "tokenizer.ggml.scores": [0.0] * len(vocab),
        "tokenizer.ggml.token_type": [2, 3, 3] + [6] * 256 + [1] * (len(vocab) - 259),
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.unknown_token_id": 0,
        "tokenizer.chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}",
    }


def _tensors(n_vocab: int) -> list[tuple[str, tuple[int, ...], float]]:
    """``(name, dims innermost first, fill value)`` of each tensor."""
    square = (_EMBD, _EMBD)
    return [
        ("token_embd.weight", (_EMBD, n_vocab), 0.0),
        ("output_norm.weight", (_EMBD,), 1.0),
        ("output.weight", (_EMBD, n_vocab), 0.0),
        ("blk.0.attn_norm.weight", (_EMBD,), 1.0),
        ("blk.0.attn_q.weight", square, 0.0),
        ("blk.0.attn_k.weight", square, 0.0),
        ("blk.0.attn_v.weight", square, 0.0),
        ("blk.0.attn_output.weight", square, 0.0),
        ("blk.0.ffn_norm.weight", (_EMBD,), 1.0),
        ("blk.0.ffn_gate.weight", (_EMBD, _FF), 0.0),
        ("blk.0.ffn_up.weight", (_EMBD, _FF), 0.0),
        ("blk.0.ffn_down.weight", (_FF, _EMBD), 0.0),
    ]


def _pad(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % _ALIGN)


def write_tiny_gguf(path: Path) -> Path:
    """Write the tiny model to `path` and return `path`."""
    vocab = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    vocab += ["\u2581hello", "\u2581world", "\u2581", "a", "b"]
    metadata = _metadata(vocab)
    tensors = _tensors(len(vocab))
    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata))
    header += b"".join(_string(key) + _value(value) for key, value in metadata.items())
    infos, blobs, offset = b"", b"", 0
    for name, dims, fill in tensors:
        count = 1
        for dim in dims:
            count *= dim
        shape = struct.pack(f"<I{len(dims)}Q", len(dims), *dims)
        infos += _string(name) + shape + struct.pack("<IQ", _F32_TENSOR, offset)
        blob = _pad(struct.pack(f"<{count}f", *([fill] * count)))
        blobs += blob
        offset += len(blob)
    path.write_bytes(_pad(header + infos) + blobs)
    return path
