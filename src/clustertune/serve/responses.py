"""JSON answers that always encode.

A message may quote what a client sent (an unknown field's name, an id), and JSON's ``"\\ud800"``
escape reads as a lone surrogate, which UTF-8 cannot carry: Starlette's ``JSONResponse`` would
fail to encode it and answer 500 instead of the refusal. Here such a character is written back
as the same escape, so the client reads the text it sent. A route that returns a plain dict is
written by pydantic's encoder instead, which fails the same way: routes whose answer may quote a
client return a ``JSONAnswer`` themselves.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi.responses import JSONResponse


class JSONAnswer(JSONResponse):
    def render(self, content: Any) -> bytes:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))
        # Only a lone surrogate needs escaping; "backslashreplace" writes it as JSON's \uXXXX.
        return text.encode("utf-8", "backslashreplace")
