"""Java's string forms of JSON values, so stored strings match what the plugin writes.

``String.valueOf`` of a Jackson-parsed value: integers as digits, decimals with
``Double.toString`` (``1.0``, ``0.85``, ``1.0E-5``), booleans ``true``/``false``, lists
``[a, b]``, objects ``{k=1}``. ``java_string`` writes an object's names in document order (a
``LinkedHashMap``); ``hash_map_string`` in the order of the ``java.util.HashMap`` that
OpenSearch's ``XContentParser.map()`` reads an object into (``java_hash_map``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from workbench.schemas.java_hash_map import hash_map_order

# A decimal literal as Java's Float/Double.parseFloat read it (after trimming), NaN and Infinity
# aside; use with ``fullmatch``. ASCII digits only, as Java's parser (``\d`` alone would take
# "٣" or "３"). Possessive: a long digit run that fails at its end is not retried split in two
# (that was quadratic).
JAVA_DECIMAL = re.compile(r"[+-]?(?:\d++(?:\.\d*+)?|\.\d++)(?:[eE][+-]?\d++)?[fFdD]?", re.ASCII)
# A hexadecimal floating-point literal as Java reads it (``0x1.8p1``); with ``fullmatch``.
JAVA_HEX = re.compile(r"[+-]?0[xX](?:[0-9a-fA-F]++(?:\.[0-9a-fA-F]*+)?|\.[0-9a-fA-F]++)"
                      r"[pP][+-]?\d++[fFdD]?", re.ASCII)
# What Java's String.trim() removes: every character up to the space.
JAVA_BLANK = "".join(map(chr, range(0x21)))


def double_to_string(x: float) -> str:
    """Java ``Double.toString`` (Java 19 and later): shortest digits (two when a two-digit decimal
    is nearer, as ``4.9E-324``), plain for 1e-3 <= |x| < 1e7, else ``d.dddE±n``."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    d = Decimal(repr(abs(x)))
    digits = "".join(map(str, d.as_tuple().digits)).rstrip("0") or "0"
    if len(digits) == 1:  # Java picks the two-digit decimal nearest x if it reads back as x
        exact = Decimal(abs(x))
        two = exact.scaleb(-exact.adjusted() + 1).quantize(Decimal(1), ROUND_HALF_EVEN)
        candidate = two.scaleb(exact.adjusted() - 1)
        if float(candidate) == abs(x) and two % 10:
            d = candidate
            digits = str(int(two))
    exponent = d.adjusted()
    if 1e-3 <= abs(x) < 1e7:
        if exponent >= 0:
            whole = digits[: exponent + 1].ljust(exponent + 1, "0")
            frac = digits[exponent + 1:] or "0"
        else:
            whole = "0"
            frac = "0" * (-exponent - 1) + digits
        return f"{sign}{whole}.{frac}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def java_string(value: Any) -> str:
    """``String.valueOf`` of a value parsed from JSON, objects in document order."""
    if isinstance(value, str):
        return value
    return _value_of(value, list)


def hash_map_string(value: Any) -> str:
    """``String.valueOf`` of a value read by OpenSearch's ``XContentParser.map()`` (as the
    plugin reads a request body): an object is a ``java.util.HashMap``, written in its order
    (``hash_map_order``); a list an ``ArrayList`` (``[a, b]``); an integer an ``Integer``,
    ``Long`` or ``BigInteger`` (its digits); a decimal a ``Double`` (``1.0``, ``1.5``,
    ``1.0E20``); then ``true``, ``false``, ``null``. A string is itself."""
    return _value_of(value, hash_map_order)


def _value_of(value: Any, order: Callable[[dict[str, Any]], Iterable[str]]) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return double_to_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value_of(v, order) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_value_of(value[k], order)}" for k in order(value)) + "}"
    if value is None:
        return "null"
    return str(value)
