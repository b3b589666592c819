"""A tiny third-party judge, installed the way any package's would be: its distribution's
``entry_points.txt`` (next to this file) declares, in the group ``workbench.judges``::

    exact_phrase = example_judges:build

A package built with a ``pyproject.toml`` declares the same with::

    [project.entry-points."workbench.judges"]
    exact_phrase = "example_judges:build"

``exact_phrase`` calls a hit relevant when the query's text appears in it, word for word (case
ignored); with the option ``field`` it looks in that field only. It needs no reference answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from workbench.judges import Hit, Judged, OptionError, Query, Setup, Usage, Verdict


@dataclass(frozen=True)
class ExactPhrase:
    field: str | None = None
    name: str = "exact_phrase"
    needs_reference: bool = False

    def judge(self, query: Query, hits: Sequence[Hit]) -> Judged:
        phrase = query.text.casefold()
        verdicts = []
        for hit in hits:
            text = str(hit.fields.get(self.field, "")) if self.field else hit.text()
            found = phrase in text.casefold()
            verdicts.append(Verdict(1.0 if found else 0.0, found,
                                    rationale="the query appears" if found else None))
        return Judged(verdicts, Usage())


def build(setup: Setup) -> ExactPhrase:
    unknown = sorted(set(setup.options) - {"field"} - setup.shared)
    if unknown:
        raise OptionError(unknown[0], f"the exact_phrase judge takes no option [{unknown[0]}]")
    field = setup.options.get("field")
    if field is not None and not isinstance(field, str):
        raise OptionError("field", "field must be a field name")
    return ExactPhrase(field)
