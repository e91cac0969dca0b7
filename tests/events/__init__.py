"""Real-shaped DynamoDB stream events (Lambda's shape), recorded from moto server by record.py."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


@cache
def _events() -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(HERE.glob("*.json"))}


def names(prefix: str = "") -> list[str]:
    return [name for name in _events() if name.startswith(prefix)]


def record(name: str) -> dict[str, Any]:
    """The one record of fixture `name`, a fresh copy the caller may edit."""
    (only,) = _events()[name]["Records"]
    return copy.deepcopy(only)
