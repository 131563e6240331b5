"""A tiny BERT-shaped model with random weights, written in the real model's file format.

It makes the semantic channel's code paths (safetensors reading, the tokenizer, the encoder,
the vector store, fusion in search) testable on any machine; the real model's numbers are
checked against reference vectors in test_embed.py where the model is installed.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

WORDS = ["cache", "ttl", "seconds", "release", "build", "##s", "##ing", "the", "is", "a",
         "deploy", "speed", "clock", "game", "hack", ".", ",", "!", "cafe", "60"]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def write_tiny_model(folder: Path, *, seed: int = 5, width: int = 8, heads: int = 2,
                     layers: int = 2) -> Path:
    """vocab.txt, config.json and model.safetensors of a random 2-layer encoder."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = SPECIAL + WORDS
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = {"hidden_size": width, "num_attention_heads": heads, "num_hidden_layers": layers,
              "intermediate_size": 2 * width, "vocab_size": len(vocab)}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    tensors: dict[str, np.ndarray] = {
        "embeddings.word_embeddings.weight": rng.normal(size=(len(vocab), width)),
        "embeddings.position_embeddings.weight": rng.normal(size=(512, width)) * 0.1,
        "embeddings.token_type_embeddings.weight": rng.normal(size=(2, width)) * 0.1,
        "embeddings.LayerNorm.weight": np.ones(width),
        "embeddings.LayerNorm.bias": np.zeros(width),
    }
    for n in range(layers):
        p = f"encoder.layer.{n}."
        for part in ("query", "key", "value"):
            tensors[f"{p}attention.self.{part}.weight"] = rng.normal(size=(width, width)) * 0.3
            tensors[f"{p}attention.self.{part}.bias"] = rng.normal(size=width) * 0.1
        tensors[f"{p}attention.output.dense.weight"] = rng.normal(size=(width, width)) * 0.3
        tensors[f"{p}attention.output.dense.bias"] = np.zeros(width)
        tensors[f"{p}attention.output.LayerNorm.weight"] = np.ones(width)
        tensors[f"{p}attention.output.LayerNorm.bias"] = np.zeros(width)
        tensors[f"{p}intermediate.dense.weight"] = rng.normal(size=(2 * width, width)) * 0.3
        tensors[f"{p}intermediate.dense.bias"] = np.zeros(2 * width)
        tensors[f"{p}output.dense.weight"] = rng.normal(size=(width, 2 * width)) * 0.3
        tensors[f"{p}output.dense.bias"] = np.zeros(width)
        tensors[f"{p}output.LayerNorm.weight"] = np.ones(width)
        tensors[f"{p}output.LayerNorm.bias"] = np.zeros(width)
    write_safetensors(folder / "model.safetensors",
                      {name: value.astype(np.float32) for name, value in tensors.items()})
    return folder


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    blobs, offset = [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))
