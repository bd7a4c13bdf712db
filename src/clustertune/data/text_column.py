"""A column of texts as Arrow read it, handed to the encoder without a Python string per text.

Reading a JSON lines or parquet file with Arrow leaves its texts in two flat buffers (UTF-8 bytes
and offsets). Turning them into a list of ``str`` costs about as much as reading them, and
gigatoken then copies the strings back into its own buffers; it takes those two buffers as they
are instead (an awkward array of strings over them). :class:`TextColumn` keeps the Arrow array
and behaves as the sequence of texts everything else expects (length, indexing, slicing,
iteration), so only the encoder's fast path needs to know what it is.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np


class TextColumn(Sequence[str]):
    """The texts of an Arrow string array (nulls read as empty texts)."""

    def __init__(self, array: Any):
        import pyarrow as pa

        try:
            # Arrow's readers leave a string's bytes as they found them: the text is checked here, as
            # reading it into Python strings did (about a millisecond for 10 MB).
            array.validate(full=True)
        except pa.ArrowInvalid as exc:
            raise UnicodeDecodeError("utf-8", b"", 0, 1, str(exc)) from exc
        if array.null_count:
            array = array.fill_null("")
        if not pa.types.is_large_string(array.type):
            array = array.cast(pa.large_string())  # string, string_view: 64-bit offsets, as the encoder takes
        self.array = array

    @classmethod
    def _checked(cls, array: Any) -> TextColumn:
        """A column over ``array``, a slice of one already checked, filled and cast: none of it again."""
        column = cls.__new__(cls)
        column.array = array
        return column

    def __len__(self) -> int:
        return len(self.array)

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> TextColumn: ...

    def __getitem__(self, i: int | slice) -> str | TextColumn:
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step != 1:
                raise ValueError("a TextColumn is sliced with step 1 only")
            return TextColumn._checked(self.array.slice(start, max(0, stop - start)))
        return self.array[i].as_py()

    def __iter__(self) -> Iterator[str]:
        return iter(self.array.to_pylist())

    def tolist(self) -> list[str]:
        return self.array.to_pylist()

    def _offsets(self) -> np.ndarray:
        buffer = self.array.buffers()[1]
        return np.frombuffer(buffer, dtype=np.int64, count=len(self) + 1, offset=self.array.offset * 8)

    def sizes(self) -> np.ndarray:
        """Each text's length in UTF-8 bytes (at least its length in characters)."""
        return np.diff(self._offsets())

    def awkward(self) -> Any:
        """The texts as an awkward array of strings over the same buffers (no copy)."""
        import awkward as ak

        data = np.frombuffer(self.array.buffers()[2] or b"", dtype=np.uint8)
        chars = ak.contents.NumpyArray(data, parameters={"__array__": "char"})
        return ak.Array(ak.contents.ListOffsetArray(ak.index.Index64(self._offsets()), chars,
                                                    parameters={"__array__": "string"}))


def text_sizes(texts: Sequence[str]) -> np.ndarray:
    """Each text's length: UTF-8 bytes for a :class:`TextColumn`, characters for a list of str
    (either bounds how much text is handled at once)."""
    if isinstance(texts, TextColumn):
        return texts.sizes()
    return np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
