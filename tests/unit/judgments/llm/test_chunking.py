"""Token counting and chunking of LLM judgment prompts (docs/algorithms.md, "Chunking")."""

import random

from workbench.judgments.llm.chunking import chunk_hits
from workbench.judgments.llm.prompt import (
    DEFAULT_TEMPLATE,
    RELEVANT_IRRELEVANT,
    SCORE0_1,
    context_string,
    hits_json,
    system_prompt,
    user_content,
)
from workbench.llm.base import messages_string
from workbench.llm.tokens import count_tokens, encoding

SYSTEM = system_prompt(SCORE0_1)


def prompt_tokens(hits, template=None, query="red shoes", custom=None, system=SYSTEM) -> int:
    """Tokens of the whole messages string for one chunk: the quantity the chunking limits."""
    user = user_content(template, query, custom or {}, hits_json(hits))
    return count_tokens(messages_string(system, user))


def naive_chunks(system, template, query, custom, hits, limit):
    """The chunking of docs/algorithms.md ("Chunking") literally, re-tokenising the whole messages
    string after every added hit, plus the workbench's one change: a hit that starts a new chunk is
    checked on its own too."""
    def tokens(chunk):
        return count_tokens(messages_string(system, user_content(
            template, query, custom, hits_json(chunk))))

    def truncated(hit, total):
        ids = encoding().encode_ordinary(hit[1])
        keep = max(1, len(ids) - (total - limit))
        return (hit[0], hit[1] if len(ids) <= keep else encoding().decode(ids[:keep]))

    chunks, current = [], []
    for hit in hits:
        total = tokens([*current, hit])
        if total <= limit:
            current.append(hit)
        elif not current:
            chunks.append([truncated(hit, total)])
        else:
            chunks.append(current)
            alone = tokens([hit])
            if alone <= limit:
                current = [hit]
            else:
                chunks.append([truncated(hit, alone)])
                current = []
    if current:
        chunks.append(current)
    return chunks


# --- chunking, hand-worked ------------------------------------------------------------------------

def make_hits(n: int, words: int = 30):
    return [(f"products::B{i:03d}",
             context_string({"title": f"Red running shoe model {i}", "text": "comfy " * words}, []))
            for i in range(n)]


def test_everything_fits_in_one_chunk() -> None:
    hits = make_hits(3)
    total = prompt_tokens(hits)
    assert chunk_hits(SYSTEM, None, "red shoes", {}, hits, total) == [hits]  # equal is not over
    assert chunk_hits(SYSTEM, None, "red shoes", {}, hits, 500000) == [hits]


def test_one_token_over_moves_the_last_hit_to_a_second_chunk() -> None:
    hits = make_hits(3)
    limit = prompt_tokens(hits) - 1
    assert prompt_tokens(hits[:2]) <= limit
    assert chunk_hits(SYSTEM, None, "red shoes", {}, hits, limit) == [hits[:2], hits[2:]]


def test_a_limit_below_two_hits_gives_one_chunk_per_hit() -> None:
    hits = make_hits(3)
    limit = prompt_tokens(hits[:2]) - 1
    assert prompt_tokens(hits[:1]) <= limit and prompt_tokens(hits[1:3]) > limit
    assert chunk_hits(SYSTEM, None, "red shoes", {}, hits, limit) == [[h] for h in hits]


def test_chunks_fill_greedily_in_hit_order() -> None:
    hits = make_hits(7)
    limit = prompt_tokens(hits[:3])
    chunks = chunk_hits(SYSTEM, None, "red shoes", {}, hits, limit)
    assert chunks == [hits[0:3], hits[3:6], hits[6:7]]
    for chunk in chunks:
        assert prompt_tokens(chunk) <= limit


def test_no_hits_no_chunks() -> None:
    assert chunk_hits(SYSTEM, None, "q", {}, [], 4000) == []


def test_a_single_oversized_hit_is_truncated_by_the_excess() -> None:
    big = ("products::BIG", context_string({"text": "lorem ipsum dolor sit amet " * 200}, []))
    small = make_hits(1)[0]
    alone = prompt_tokens([big])
    limit = alone - 100
    context_ids = encoding().encode_ordinary(big[1])
    chunks = chunk_hits(SYSTEM, None, "red shoes", {}, [big, small], limit)
    truncated = encoding().decode(context_ids[:len(context_ids) - 100])
    assert chunks == [[("products::BIG", truncated)], [small]]
    assert count_tokens(truncated) == len(context_ids) - 100
    assert prompt_tokens(chunks[0]) <= limit + 5  # re-escaping can move a token or two


def test_truncation_keeps_at_least_one_token() -> None:
    hit = ("i::1", "alpha beta gamma")  # 3 tokens of context
    limit = prompt_tokens([("i::1", "")])  # even an empty context only just fits
    chunks = chunk_hits(SYSTEM, None, "q", {}, [hit], limit - 10)
    assert chunks == [[("i::1", "alpha")]]


def test_an_oversized_hit_after_a_filled_chunk_is_cut_to_the_limit_too() -> None:
    # The plugin sends such a hit whole, over tokenLimit; the workbench truncates it as it does
    # an oversized first hit, so that every prompt respects the limit.
    small, big = make_hits(1)[0], ("p::BIG", "word " * 2000)
    limit = prompt_tokens([small]) + 50
    chunks = chunk_hits(SYSTEM, None, "red shoes", {}, [small, big], limit)
    assert len(chunks) == 2 and chunks[0] == [small]
    ((big_id, cut),) = chunks[1]
    assert big_id == "p::BIG" and big[1].startswith(cut) and len(cut) < len(big[1])
    # Cut by the excess as the chunking cuts a first hit: within a token or two of the limit, since
    # tokens at the cut may merge differently once the text is JSON-escaped in the prompt.
    assert limit - 5 <= prompt_tokens(chunks[1]) <= limit + 2


def test_chunking_counts_template_custom_fields_and_every_hits_insertion() -> None:
    template = "Q: {{queryText}} ({{category}})\nFirst: {{hits}}\nAgain: {{results}}"
    custom = {"category": "footwear"}
    hits = make_hits(4, words=5)
    limit = prompt_tokens(hits[:2], template, custom=custom)
    assert prompt_tokens(hits[:3], template, custom=custom) > limit
    assert chunk_hits(SYSTEM, template, "red shoes", custom, hits, limit) == [hits[:2], hits[2:]]


def test_template_without_a_hits_insertion_is_a_fixed_size() -> None:
    template = "{{queryText}} {{ hits }}"  # the spaced placeholder is left as text
    hits = make_hits(3)
    fixed = prompt_tokens([], template)
    assert chunk_hits(SYSTEM, template, "q", {}, hits, fixed) == [hits]


# --- the fast path equals the literal definition -------------------------------------------------

ALPHABET = [*"abcxyzABC019 \t\n\r\"'\\{}[]:,.-_/!?<>|é😀中",
            "'s", "'ll", " \n ", "\\\"", "<|endoftext|>", "  ", "123456", "::", "{\"", "\"}"]


def random_text(rng: random.Random, max_len: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, max_len)))


def random_case(rng: random.Random):
    templates = [None, DEFAULT_TEMPLATE, "{{queryText}}{{hits}}", "{{hits}}{{searchText}} ",
                 "{{hits}}\n{{results}} {{queryText}}{{hits}}", "x{{ hits }}{{queryText}}",
                 random_text(rng, 10) + "{{queryText}}" + random_text(rng, 5) + "{{hits}}"
                 + random_text(rng, 10)]
    custom = rng.choice([{}, {"referenceAnswer": random_text(rng, 8)}, {"k": "v", "z": "w"}])
    hits = []
    for i in range(rng.randint(1, 12)):
        doc_id = random_text(rng, 4) or str(i)
        if rng.random() < 0.5:
            context = context_string({"t": random_text(rng, 40), "n": rng.random()}, [])
        else:
            context = random_text(rng, 60)
        hits.append((f"idx::{doc_id}", context))
    system = rng.choice([SYSTEM, system_prompt(RELEVANT_IRRELEVANT), random_text(rng, 20)])
    return system, rng.choice(templates), random_text(rng, 15), custom, hits


def test_fast_chunking_equals_the_naive_definition_on_random_inputs() -> None:
    rng = random.Random(20240611)
    for _ in range(300):
        system, template, query, custom, hits = random_case(rng)
        # Limits right at and around real prompt sizes, so an off-by-one count changes the result.
        cut = rng.randint(1, len(hits))
        exact = count_tokens(messages_string(system, user_content(
            template, query, custom, hits_json(hits[:cut]))))
        for limit in (exact, exact - 1, exact + 1, exact // 2, rng.randint(1, exact + 50)):
            expected = naive_chunks(system, template, query, custom, hits, limit)
            assert chunk_hits(system, template, query, custom, hits, limit) == expected, (
                system, template, query, custom, hits, limit)


def test_many_hits_under_a_large_limit_are_chunked_without_quadratic_work() -> None:
    hits = make_hits(600, words=100)
    chunks = chunk_hits(SYSTEM, None, "red shoes", {}, hits, 500000)
    assert chunks == [hits]
    small = chunk_hits(SYSTEM, None, "red shoes", {}, hits, 4000)
    assert [h for chunk in small for h in chunk] == hits
    assert all(prompt_tokens(chunk) <= 4000 for chunk in small)
