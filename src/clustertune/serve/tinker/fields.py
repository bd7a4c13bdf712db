"""The fields of the Tinker API's JSON bodies, read with their types checked.

A body is whatever a client sent: a string where a number belongs, a list where an object does,
an id that climbs out of the state directory (``../..``). Each reader here returns the field as
the type the service works with, or raises :class:`TinkerUserError` naming the field (the
route's 400, or the request's ``user`` error), so nothing further in meets a value it would
crash on.
"""

from __future__ import annotations

import json
import re
from typing import Any

from clustertune.serve.protocol import shown
from clustertune.serve.tinker.lora import TinkerUserError

# A session id is part of each of its clients' ids (SESSION:train:N), which name directories:
# letters, digits, '.', '_' and '-', never a path separator, and short enough that the client's id
# stays within the store's 128 characters. The server makes them as "s" + 12 hex digits.
SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
INT64 = 2**63 - 1


def obj(body: dict[str, Any], key: str) -> dict[str, Any]:
    """An object field; absent or null: ``{}``."""
    v = body.get(key)
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise TinkerUserError(f"{key}: must be an object, not {shown(v)}")
    return v


def _typed(body: dict[str, Any], key: str, default: Any, kind: type, says: str) -> Any:
    """The field ``key`` when it is a ``kind``; absent or null: ``default``."""
    v = body.get(key)
    if v is None:
        return default
    if not isinstance(v, kind):
        raise TinkerUserError(f"{key}: must be {says}, not {shown(v)}")
    return v


def text(body: dict[str, Any], key: str, default: str = "") -> str:
    """A string field; absent or null: ``default``."""
    return _typed(body, key, default, str, "a string")


def whole(body: dict[str, Any], key: str, default: int | None = None, lo: int = -INT64, hi: int = INT64) -> int | None:
    """A whole-number field from ``lo`` to ``hi``; absent or null: ``default``."""
    v = body.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise TinkerUserError(f"{key}: must be a whole number from {lo} to {hi}, not {shown(v)}")
    return v


def flag(body: dict[str, Any], key: str, default: bool = False) -> bool:
    """A true/false field; absent or null: ``default``."""
    return _typed(body, key, default, bool, "true or false")


def session_id(body: dict[str, Any], key: str = "session_id") -> str:
    """A session id: what ``create_session`` answered (letters, digits, '.', '_', '-')."""
    sid = text(body, key)
    if not sid:
        raise TinkerUserError(f"{key} is empty")
    if not SESSION_ID.fullmatch(sid):
        raise TinkerUserError(f"{key} {shown(sid)}: not a session id of this server (letters, digits, '.', '_' and "
                              "'-', up to 96, as create_session answers)")
    return sid


def plain_json(body: dict[str, Any], key: str, kind: type) -> Any:
    """A field kept and answered back as it came (``tags``, ``user_metadata``): of ``kind`` (a
    ``list`` or ``dict``; absent or null: an empty one) and standard JSON, no NaN or infinity
    (they could not be written back)."""
    v = body.get(key)
    if v is None:
        return kind()
    if not isinstance(v, kind):
        raise TinkerUserError(f"{key}: must be {'a list' if kind is list else 'an object'}, not {shown(v)}")
    try:
        json.dumps(v, allow_nan=False)
    except ValueError:
        raise TinkerUserError(f"{key}: holds NaN or an infinity, which JSON has no words for") from None
    return v
