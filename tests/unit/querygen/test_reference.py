"""The reference generator without a model (``querygen/reference.py``), on titles of the shipped
demo catalogue (``workbench/demo/data/ubi_ecommerce_products.json.gz``) and hand-made ones."""

from __future__ import annotations

from workbench.querygen.documents import SourceDocument
from workbench.querygen.queries import GeneratedQuery
from workbench.querygen.reference import reference_queries, title_of, words

DOCS = [
    # brand, then the title's head up to the first comma
    SourceDocument("B01N5KIU9H", {
        "title": "Clarks Women's Cheyn Madi Loafer, Black Tumbled Leather, 8.5 W US",
        "brand": "Clarks"}),
    # model numbers (words with digits) go; the head ends at ';'
    SourceDocument("B01KPUHBK6", {
        "title": "Garmin 010-01689-00 Forerunner 35; Easy-to-Use GPS Running Watch, Black",
        "brand": "Garmin"}),
    # the head says only the brand: the next part is read; units and pack words go; 5 words
    SourceDocument("B07ZWPZRZ2", {
        "title": "Duracell - CopperTop AA + AAA Alkaline Batteries Combo Pack, 20 Count Each",
        "brand": "Duracell"}),
    # no brand; marketing words and "(Pack of 2)" go; ``name`` is a title too
    SourceDocument("p4", {"name": "Premium Stainless Steel Water Bottle (Pack of 2)"}),
    # no title field: the longest short string of several words that is not a link
    SourceDocument("p5", {"description": "a drill " * 40, "label": "Cordless Drill Driver Kit",
                          "url": "https://example.com/cordless-drill-driver-kit-with-case",
                          "sku": "CD-1"}),
    # one word is not a query
    SourceDocument("p6", {"title": "Kindle"}),
    # the same query as the first, from another document: the first is kept
    SourceDocument("p7", {"title": "clarks   women's CHEYN madi loafer", "brand": "Clarks"}),
]


def test_one_query_per_document_as_a_shopper_types_it() -> None:
    assert reference_queries(DOCS) == [
        GeneratedQuery("clarks women's cheyn madi loafer", "reference", "B01N5KIU9H"),
        GeneratedQuery("garmin forerunner", "reference", "B01KPUHBK6"),
        GeneratedQuery("duracell coppertop aa aaa alkaline", "reference", "B07ZWPZRZ2"),
        GeneratedQuery("stainless steel water bottle", "reference", "p4"),
        GeneratedQuery("cordless drill driver kit", "reference", "p5"),
    ]


def test_words() -> None:
    assert words("Levi\u2019s Boys' 511 Slim-Fit Chino | XL, 2-Pack & More!") == [
        "levi's", "boys", "slim-fit", "chino", "more"]
    assert words("") == []


def test_title_of() -> None:
    assert title_of({"name": "b c", "title": " ", "product_title": "a b"}) == "b c"
    assert title_of({"x": 3, "y": ["a b"], "z": "word"}) is None


LOAFER = SourceDocument("d1", {
    "title": "Clarks Women's Cheyn Madi Loafer, Black", "brand": "Clarks",
    "category": ["Shoes", "Loafers & Slip-Ons"], "color": "Black"})
LOAFER_QUERIES = {"clarks women's cheyn madi loafer", "women's cheyn madi loafer",
                  "clarks loafers slip-ons", "black women's cheyn madi loafer"}


def test_more_per_document_from_the_same_words_the_first_always_first() -> None:
    every = reference_queries([LOAFER], per_document=10)
    assert {query.text for query in every} == LOAFER_QUERIES
    assert every[0].text == "clarks women's cheyn madi loafer"
    two = reference_queries([LOAFER], per_document=2)
    assert [query.text for query in two] == [query.text for query in every[:2]]
    assert reference_queries([LOAFER], per_document=0) == []


def test_the_seed_orders_the_further_queries_and_nothing_else() -> None:
    orders = {tuple(query.text for query in reference_queries([LOAFER], 4, seed))
              for seed in range(20)}
    assert len(orders) > 1
    assert {order[0] for order in orders} == {"clarks women's cheyn madi loafer"}
    assert reference_queries([LOAFER], 4, seed=7) == reference_queries([LOAFER], 4, seed=7)
    assert reference_queries(DOCS, seed=1) == reference_queries(DOCS, seed=2)
