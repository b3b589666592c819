"""What LLM calls cost, from a model's ``pricing`` (``inputPerMillion``, ``outputPerMillion``).

Prices are per million tokens in whatever currency the person who registered the model used;
the workbench only multiplies. A model without prices has no cost (``None``), never zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Pricing:
    input_per_million: float
    output_per_million: float

    @classmethod
    def of(cls, pricing: Mapping[str, float] | None) -> Pricing | None:
        """The prices of a model's ``pricing`` object, or None when it has none."""
        if not pricing:
            return None
        return cls(float(pricing.get("inputPerMillion", 0.0)),
                   float(pricing.get("outputPerMillion", 0.0)))

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_million
                + output_tokens * self.output_per_million) / 1_000_000


def pricing_of(model: Any) -> Pricing | None:
    """The prices attached to a chat model when it was built from a registered spec (ML
    Commons models have none)."""
    value = getattr(model, "pricing", None)
    return value if isinstance(value, Pricing) else None
