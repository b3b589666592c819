"""The cl100k_base helpers, and where a model server's tokenizer is asked and how its answers are
read (``llm/tokens.py``)."""

from __future__ import annotations

import pytest

from workbench.llm.tokens import DIALECTS, count_tokens, encoding, server_root, truncate_tokens


@pytest.mark.parametrize(("chat_url", "root"), [
    ("http://127.0.0.1:9600/v1/chat/completions", "http://127.0.0.1:9600"),
    ("https://gpu.example/llm/v1/chat/completions", "https://gpu.example/llm"),
    ("http://vllm:8000/chat/completions", "http://vllm:8000"),
])
def test_the_tokenize_paths_sit_beside_v1(chat_url: str, root: str) -> None:
    assert server_root(chat_url) == root


def test_each_dialects_body_and_answer() -> None:
    (llama_py, _, llama_body, llama_read), (_, path, cpp_body, cpp_read), \
        (_, vllm_path, vllm_body, vllm_read) = DIALECTS
    assert llama_py.startswith("llama.cpp (Python server)")
    assert llama_body("red shoes", "m") == {"input": "red shoes"}
    assert llama_read({"count": 6}) == 6
    assert path == vllm_path == "/tokenize"
    assert cpp_body("red shoes", "m") == {"content": "red shoes"}
    assert cpp_read({"tokens": [1, 2, 3]}) == 3
    assert vllm_body("red shoes", "m") == {"model": "m", "prompt": "red shoes"}
    assert vllm_read({"count": 4, "max_model_len": 8192, "tokens": [1, 2, 3, 4]}) == 4
    # anything else is no count: the next dialect is tried, then cl100k_base
    for answer in ({"count": True}, {"count": "6"}, [6], {"detail": "Not Found"}):
        assert llama_read(answer) is None and vllm_read(answer) is None


def test_a_server_that_does_not_answer_is_asked_again_later() -> None:
    import urllib3

    from workbench.llm.tokens import ServerTokens

    tokens = ServerTokens(urllib3.PoolManager(), "http://127.0.0.1:1/v1/chat/completions", "m",
                          dict, timeout=0.5)
    assert tokens.count("red shoes") is None
    assert tokens.name is None and tokens._known is False  # not settled: ask again next time


# --- cl100k_base -------------------------------------------------------------------------------

@pytest.mark.parametrize("text, ids", [
    ("hello world", [15339, 1917]),
    ("tiktoken is great!", [83, 1609, 5963, 374, 2294, 0]),
])
def test_encoding_is_cl100k_base(text, ids) -> None:
    assert encoding().encode(text) == ids


def test_encoding_has_cl100k_special_tokens_and_size() -> None:
    enc = encoding()
    assert enc.n_vocab == 100277
    assert enc.encode("hello <|endoftext|>", allowed_special="all") == [15339, 220, 100257]
    assert encoding() is enc  # loaded once


def test_count_tokens() -> None:
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2
    # Special-token text is ordinary text here, never an error.
    assert count_tokens("<|endoftext|>") == len(encoding().encode_ordinary("<|endoftext|>")) > 1


def test_truncate_tokens() -> None:
    assert truncate_tokens("hello world", 5) == "hello world"
    assert truncate_tokens("hello world", 2) == "hello world"
    assert truncate_tokens("hello world", 1) == "hello"
    assert truncate_tokens("hello world", 0) == "hello"  # never cut to nothing
    assert truncate_tokens("", 3) == ""
    text = "lorem ipsum dolor sit amet " * 50
    assert count_tokens(truncate_tokens(text, 40)) == 40
