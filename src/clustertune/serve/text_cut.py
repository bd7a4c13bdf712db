"""What a client sees of an answer as it grows (:class:`TextCut`): the serving engine feeds it the
tokens drawn so far and sends on the new text it returns."""

from __future__ import annotations

from typing import Any


class TextCut:
    """The part of a growing answer a client may see: nothing from a stop string on, nothing that
    may still become one, no half-decoded character, and for chat answers no surrounding
    whitespace (as ``clustertune generate`` cuts them).

    The text grows by decoding only the newest tokens beside the piece before them (the context
    a tokenizer needs for the space before a word, or to clean up spaces before punctuation), so
    a stream costs the same per token at its thousandth token as at its first."""

    def __init__(self, tokenizer: Any, stops: list[str], eos_ids: list[int], strip: bool):
        self.tokenizer, self.stops, self.eos_ids, self.strip = tokenizer, [s for s in stops if s], set(eos_ids), strip
        self.shown = 0
        self.start: int | None = None
        self.text = ""
        self.stopped = False
        self._longest_stop = max((len(s) for s in self.stops), default=0)
        # Tokens [0, _read) are in self.text; _prefix <= _read is where the last piece began.
        self._prefix = self._read = 0
        self._ended = False

    def _grow(self, tokens: list[int], final: bool) -> None:
        if self._ended:
            return
        end = next((k for k in range(self._read, len(tokens)) if tokens[k] in self.eos_ids), None)
        self._ended = end is not None
        upto = end if end is not None else len(tokens)
        decode = self.tokenizer.decode
        if upto == self._read:
            return
        before = decode(tokens[self._prefix:self._read], skip_special_tokens=True)
        both = decode(tokens[self._prefix:upto], skip_special_tokens=True)
        # A character whose bytes are still coming decodes as U+FFFD: wait for them (unless nothing
        # more will come), so the next piece starts on a whole character.
        if final or self._ended or (len(both) > len(before) and not both.endswith("\ufffd")):
            self.text += both[len(before):]
            self._prefix, self._read = self._read, upto

    def feed(self, tokens: list[int], final: bool = False) -> tuple[str, bool]:
        """The new visible text for the tokens drawn so far, and whether an end was reached."""
        searched = max(0, len(self.text) - self._longest_stop + 1)
        self._grow(tokens, final)
        text, ended = self.text, self._ended
        end = len(text)
        for s in self.stops:
            if (k := text.find(s, searched)) >= 0 and k < end:
                end, self.stopped = k, True
        done = self.stopped or ended or final
        if not done:
            end -= next((n for s in self.stops for n in range(len(s) - 1, 0, -1) if text.endswith(s[:n])), 0)
            while end > 0 and text[end - 1] == "\ufffd":  # a character whose bytes are still coming
                end -= 1
        elif self.strip and not self.stopped:  # a marker cut off at the very end counts as one
            end -= next((n for s in self.stops for n in range(len(s) - 1, 0, -1) if text.endswith(s[:n])), 0)
        if self.strip:
            if self.start is None:
                lead = len(text) - len(text.lstrip())
                if lead >= end:
                    return "", done
                self.start = self.shown = lead
            end = len(text[:end].rstrip())
        if end <= self.shown:
            return "", done
        out, self.shown = text[self.shown:end], end
        return out, done
