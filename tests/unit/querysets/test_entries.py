"""Reading stored query-set entries, including the 3.1 ``query#reference`` forms (docs/contract.md,
"Entries")."""

from workbench.querysets.entries import QueryEntry, read_entries


def test_current_documents_keep_custom_fields_apart() -> None:
    doc = {"querySetQueries": [
        {"queryText": "What is C#?", "customFields": {}},
        {"queryText": "tv", "customFields": {"referenceAnswer": "a television", "n": "5"}},
    ]}
    assert read_entries(doc) == [
        QueryEntry("What is C#?"),
        QueryEntry("tv", {"referenceAnswer": "a television", "n": "5"}),
    ]


def test_legacy_documents() -> None:
    doc = {"querySetQueries": [
        {"queryText": "red shoes"},
        {"queryText": "tv#a television"},
        {"queryText": 'tv#{"referenceAnswer":"a television","category":"electronics"}'},
        {"queryText": "trailing#"},
        {"queryText": "What is C#?"},  # mis-read on the legacy path, as the plugin does
    ]}
    assert read_entries(doc) == [
        QueryEntry("red shoes"),
        QueryEntry("tv", {"referenceAnswer": "a television"}),
        QueryEntry("tv", {"referenceAnswer": "a television", "category": "electronics"}),
        QueryEntry("trailing#"),
        QueryEntry("What is C", {"referenceAnswer": "?"}),
    ]


def test_llm_query_key() -> None:
    assert QueryEntry("red shoes").key == "red shoes"
    assert QueryEntry("tv", {"referenceAnswer": "a television"}).key == \
        'tv#{"referenceAnswer":"a television"}'
