"""The ``semantic`` judge: a hit is relevant when its meaning is close to a reference answer's.

The score is the cosine similarity of the two texts' all-MiniLM-L6-v2 sentence embeddings
(``workbench.judges.embedding``, run in numpy from locally installed weights), which also
credits paraphrases. With several reference answers a hit gets its best cosine; it is relevant
(rating 1) when that reaches ``threshold``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workbench.judges.base import Hit, Judged, Query, Setup, check_options, number_option
from workbench.judges.token_overlap import threshold_verdicts

NAME = "semantic"
# With all-MiniLM-L6-v2, texts on unrelated subjects score about 0.0-0.2 and the same subject in
# other words about 0.6-0.9 (the sentence-transformers quickstart gives 0.67 for "The weather is
# lovely today." / "It's so sunny outside!" and 0.10 against "He drove to the stadium."); 0.5
# sits between the two groups, on the side that needs the same topic.
DEFAULT_THRESHOLD = 0.5
OPTIONS = ("threshold",)


def similarities(references: Sequence[str], documents: Sequence[str]) -> np.ndarray:
    """The cosine (-1.0 to 1.0) of every document (rows) with every reference (columns).

    Embeddings are unit length, so the cosine is a dot product. The model reads at most 256
    word pieces of a text: the rest of a long document is not seen. It is loaded on first use;
    ``EmbeddingModelMissing`` says how to install it when it is absent.
    """
    if not documents or not references:
        return np.zeros((len(documents), len(references)))
    from workbench.judges.embedding import model  # numpy model, loaded only when needed

    vectors = model().encode([*references, *documents])
    refs, docs = vectors[: len(references)], vectors[len(references):]
    return np.clip(docs @ refs.T, -1.0, 1.0)


def semantic_score(reference: str, documents: Sequence[str]) -> list[float]:
    """The cosine between one reference and each document, in the documents' order."""
    return [float(row[0]) for row in similarities([reference], documents)]


@dataclass(frozen=True)
class SemanticJudge:
    threshold: float = DEFAULT_THRESHOLD
    name: str = NAME
    needs_reference: bool = True

    def judge(self, query: Query, hits: Sequence[Hit]) -> Judged:
        matrix = similarities(query.references, [hit.text() for hit in hits])
        return threshold_verdicts(matrix.tolist(), self.threshold)


def build(setup: Setup) -> SemanticJudge:
    check_options(setup, OPTIONS, NAME)
    return SemanticJudge(number_option(setup, "threshold", DEFAULT_THRESHOLD, 0.0, 1.0))
