"""Team Draft Interleaving (workbench/abtests/interleaving.py): the properties that define it, on
random lists drawn from a small alphabet so the two rankings overlap, and hand-worked cases."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.abtests.interleaving import A, B, Pick, interleaved, seed_for, team_draft

ids = st.lists(st.sampled_from([f"d{i}" for i in range(12)]), max_size=15)
lengths = st.integers(min_value=0, max_value=30)
seeds = st.integers(min_value=0, max_value=2**64 - 1)
PROPERTY = settings(max_examples=500, deadline=None)


def first_new(ranking: list[str], shown: set[str]) -> str | None:
    return next((doc for doc in ranking if doc not in shown), None)


@PROPERTY
@given(ids, ids, lengths, seeds)
def test_each_document_once_and_only_from_the_inputs(
    a: list[str], b: list[str], length: int, seed: int
) -> None:
    picks = team_draft(a, b, length, seed)
    docs = [pick.doc_id for pick in picks]
    assert len(docs) == len(set(docs))
    assert set(docs) <= set(a) | set(b)
    assert len(picks) <= length
    assert all(pick.team in (A, B) for pick in picks)


@PROPERTY
@given(ids, ids, lengths, seeds)
def test_each_pick_is_the_team_s_best_document_not_yet_shown(
    a: list[str], b: list[str], length: int, seed: int
) -> None:
    picks = team_draft(a, b, length, seed)
    for i, pick in enumerate(picks):
        shown = {p.doc_id for p in picks[:i]}
        assert pick.doc_id == first_new(a if pick.team == A else b, shown)
    # Hence each team's picks keep that team's relative order from its input list.
    for team, ranking in ((A, a), (B, b)):
        positions = [ranking.index(p.doc_id) for p in picks if p.team == team]
        assert positions == sorted(positions)


@PROPERTY
@given(ids, ids, lengths, seeds)
def test_the_team_with_fewer_picks_picks_next(
    a: list[str], b: list[str], length: int, seed: int
) -> None:
    picks = team_draft(a, b, length, seed)
    count = {A: 0, B: 0}
    for pick in picks:
        if count[A] != count[B]:
            assert count[pick.team] < count[A if pick.team == B else B]
        count[pick.team] += 1
        assert abs(count[A] - count[B]) <= 1


@PROPERTY
@given(ids, ids, lengths, seeds)
def test_stops_only_at_length_or_when_a_list_has_nothing_new(
    a: list[str], b: list[str], length: int, seed: int
) -> None:
    picks = team_draft(a, b, length, seed)
    for i in range(len(picks)):  # before every pick, both lists still had something new
        shown = {p.doc_id for p in picks[:i]}
        assert first_new(a, shown) is not None
        assert first_new(b, shown) is not None
    shown = {p.doc_id for p in picks}
    assert len(picks) == length or first_new(a, shown) is None or first_new(b, shown) is None


@PROPERTY
@given(ids, ids, lengths, lengths, seeds)
def test_same_seed_same_list_and_shorter_is_a_prefix(
    a: list[str], b: list[str], n: int, k: int, seed: int
) -> None:
    full = team_draft(a, b, n, seed)
    assert team_draft(a, b, n, seed) == full
    assert team_draft(a, b, min(k, n), seed) == full[: min(k, n)]


def test_disjoint_lists_alternate_in_pairs() -> None:
    a, b = ["a1", "a2", "a3", "a4"], ["b1", "b2", "b3", "b4"]
    picks = team_draft(a, b, 6, seed=7)
    assert len(picks) == 6
    for rank in range(3):
        pair = picks[2 * rank : 2 * rank + 2]
        # Round ``rank`` shows each ranker's document at that rank, one per team.
        assert {p.team for p in pair} == {A, B}
        assert {p.doc_id for p in pair} == {a[rank], b[rank]}
        assert all(p.doc_id == (a if p.team == A else b)[rank] for p in pair)


def test_disjoint_three_and_three_stop_after_five() -> None:
    # Rounds 1 and 2 show a1, b1, a2, b2 (two picks each). In round 3 the coin's winner takes
    # its last document, its list then has nothing new, and the published loop ("while both
    # lists have a document not in I") ends: 5 picks, never 6, whichever team won the coin.
    a, b = ["a1", "a2", "a3"], ["b1", "b2", "b3"]
    for seed in range(20):
        picks = team_draft(a, b, 10, seed)
        assert len(picks) == 5
        assert {p.doc_id for p in picks[:4]} == {"a1", "a2", "b1", "b2"}
        assert picks[4] in (Pick("a3", A), Pick("b3", B))


def test_identical_lists_keep_the_order_and_split_each_pair() -> None:
    docs = ["d1", "d2", "d3", "d4"]
    picks = team_draft(docs, docs, 10, seed=3)
    assert [p.doc_id for p in picks] == docs
    assert {picks[0].team, picks[1].team} == {A, B}
    assert {picks[2].team, picks[3].team} == {A, B}


def test_overlapping_lists_by_hand() -> None:
    # a = [x, y, z], b = [y, x, w]. Round 1: the coin's winner takes its top document (A: x,
    # B: y) and the other team its best one not yet shown, which is the same other document, so
    # round 1 shows {x, y}, one per team. Round 2: the coin's winner takes z (A) or w (B); its
    # list then has nothing new, so the list stops at 3.
    a, b = ["x", "y", "z"], ["y", "x", "w"]
    for seed in range(20):
        picks = team_draft(a, b, 10, seed)
        assert len(picks) == 3
        assert picks[0] in (Pick("x", A), Pick("y", B))
        assert {(p.doc_id, p.team) for p in picks[:2]} == {("x", A), ("y", B)}
        assert picks[2] in (Pick("z", A), Pick("w", B))


def test_stops_when_one_list_runs_out() -> None:
    # After x is shown (whichever team took it) a has nothing new: B must not keep picking alone.
    for seed in range(10):
        assert [p.doc_id for p in team_draft(["x"], ["x", "y", "z"], 10, seed)] == ["x"]


def test_an_empty_list_or_length_gives_nothing() -> None:
    assert team_draft([], ["x", "y"], 10, 1) == []
    assert team_draft(["x", "y"], [], 10, 1) == []
    assert team_draft(["x"], ["y"], 0, 1) == []


@PROPERTY
@given(ids, ids, lengths, seeds)
def test_duplicates_inside_one_list_are_skipped(
    a: list[str], b: list[str], length: int, seed: int
) -> None:
    # A repeated id is skipped like any document already shown: the same list as without it.
    assert team_draft(a, b, length, seed) == team_draft(
        list(dict.fromkeys(a)), list(dict.fromkeys(b)), length, seed
    )


def test_the_coin_decides_who_picks_first() -> None:
    firsts = {team_draft(["a1"], ["b1"], 2, seed)[0].team for seed in range(64)}
    assert firsts == {A, B}


def test_seed_for_depends_on_every_input() -> None:
    base = seed_for("test-1", 1, "red shoes", "client-9")
    assert seed_for("test-1", 1, "red shoes", "client-9") == base
    assert seed_for("test-2", 1, "red shoes", "client-9") != base
    assert seed_for("test-1", 2, "red shoes", "client-9") != base
    assert seed_for("test-1", 1, "blue shoes", "client-9") != base
    assert seed_for("test-1", 1, "red shoes", "client-8") != base
    # Joined unambiguously: moving text between fields changes the seed.
    assert seed_for("a", 1, "b c", "d") != seed_for("a", 1, "b", "c d")
    assert 0 <= base < 2**64


# -- the list a search shows: the draft, the fillers, and the plugin's bound -----------------

unique_ids = ids.map(lambda found: list(dict.fromkeys(found)))  # a search's hits: unique ids


def test_three_and_three_with_nothing_in_common_show_three() -> None:
    # The plugin's list never outgrows the longer result list: 3, not 6. Round 1 shows a1 and
    # b1, one per team; round 2's coin gives the third place to a2 or b2. All three credited.
    a, b = ["a1", "a2", "a3"], ["b1", "b2", "b3"]
    thirds = set()
    for seed in range(32):
        shown = interleaved(a, b, 10, seed)
        assert len(shown) == 3
        assert {shown[0], shown[1]} == {("a1", A), ("b1", B)}
        assert shown[2] in (("a2", A), ("b2", B))
        thirds.add(shown[2])
        assert shown == [(p.doc_id, p.team) for p in team_draft(a, b, 3, seed)]
    assert thirds == {("a2", A), ("b2", B)}


@PROPERTY
@given(unique_ids, unique_ids, lengths, seeds)
def test_as_long_as_the_longer_list_within_the_depth(
    a: list[str], b: list[str], depth: int, seed: int
) -> None:
    shown = interleaved(a, b, depth, seed)
    assert len(shown) == min(depth, max(len(a), len(b)))
    docs = [doc_id for doc_id, _ in shown]
    assert len(docs) == len(set(docs))


@PROPERTY
@given(ids, ids, lengths, seeds)
def test_the_draft_then_the_other_side_s_rest_uncredited(
    a: list[str], b: list[str], depth: int, seed: int
) -> None:
    shown = interleaved(a, b, depth, seed)
    length = min(depth, max(len(a), len(b)))
    draft = [(p.doc_id, p.team) for p in team_draft(a, b, length, seed)]
    assert shown[:len(draft)] == draft
    fillers = shown[len(draft):]
    assert len({team for _, team in fillers}) <= 1
    for doc_id, team in fillers:
        assert team in ("a", "b")
        assert doc_id in (a if team == "a" else b)
    # in the side's own order
    if fillers:
        ranking = a if fillers[0][1] == "a" else b
        positions = [ranking.index(doc_id) for doc_id, _ in fillers]
        assert positions == sorted(positions)


@PROPERTY
@given(unique_ids, unique_ids, lengths, lengths, seeds)
def test_a_deeper_search_continues_a_shallower_one(
    a: list[str], b: list[str], shallow: int, extra: int, seed: int
) -> None:
    # Each side is searched for ``from + size`` hits: page 2 continues page 1.
    deep = shallow + extra
    assert interleaved(a[:deep], b[:deep], deep, seed)[:shallow] == interleaved(
        a[:shallow], b[:shallow], shallow, seed)


def test_a_short_side_ends_the_draft_and_the_longer_side_fills_to_its_length() -> None:
    a = [f"d{i}" for i in range(10)]
    for seed in range(10):
        shown = interleaved(a, ["d3", "d7"], 10, seed)
        assert len(shown) == 10
        drafted = [team for _, team in shown if team in (A, B)]
        assert drafted.count(B) == 2 and abs(drafted.count(A) - 2) <= 1
        assert [team for _, team in shown[len(drafted):]] == ["a"] * (10 - len(drafted))


def test_one_side_without_hits_shows_the_other_s_uncredited() -> None:
    assert interleaved([], ["b1", "b2", "b3"], 10, 5) == [("b1", "b"), ("b2", "b"), ("b3", "b")]
    assert interleaved(["a1"], [], 10, 5) == [("a1", "a")]


def test_nothing_to_show() -> None:
    assert interleaved([], [], 10, 1) == []
    assert interleaved(["a1", "a2"], ["b1"], 0, 1) == []
