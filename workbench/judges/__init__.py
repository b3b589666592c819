"""How one hit is judged.

- ``base``: the judge interface (``Query``, ``Hit``, ``Verdict``, ``Usage``, ``Judged``,
  ``Setup``, ``Judge``) and option helpers.
- ``registry``: judges by name, built-in and installed (entry point group ``workbench.judges``).
- Built-ins: ``llm`` (a model applies a rubric, ``rubric``), ``token_overlap`` and ``semantic``
  (compare each hit with the query's reference answers; ``embedding`` runs the sentence model).

The jobs that build judgment lists are in ``workbench.judgments``; how two lists agree is in
``workbench.judgments.agreement``; scoring a result list on the spot is ``workbench.evaluation``.
"""

from workbench.judges.base import (
    Hit,
    Judge,
    Judged,
    JudgeFailed,
    OptionError,
    Query,
    Scale,
    Setup,
    Usage,
    Verdict,
)

__all__ = ["Hit", "Judge", "JudgeFailed", "Judged", "OptionError", "Query", "Scale", "Setup",
           "Usage", "Verdict"]
