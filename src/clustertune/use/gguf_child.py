"""Run llama.cpp's own converter (the pinned copy in third_party/llama.cpp) in a child process.

This file is run by path, with the pinned copy's directories first on PYTHONPATH, so its
``gguf`` package (newer than PyPI's) and its ``conversion`` package never meet the ``gguf``
that clustertune reads files back with. It imports nothing of clustertune.

One thing is added to the converter, and only where it would refuse: it names a BPE
tokenizer's pre-tokenizer by hashing the tokens of a probe text, so it knows only tokenizers
listed in its own table and refuses every one trained elsewhere. ``--bpe-pre NAME`` (which the
parent passes only after reading the tokenizer's ``tokenizer.json`` and finding GPT-2's
byte-level pre-tokenizer there) is used when the table does not know the hash; a hash the
table does know keeps the converter's own answer.

    python gguf_child.py [--bpe-pre gpt-2] MODEL_DIR --outfile OUT.gguf --outtype f16
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

UNKNOWN_TOKENIZER_EXIT = 3


def main(argv: list[str]) -> None:
    pre = None
    if argv[:1] == ["--bpe-pre"]:
        pre, argv = argv[1], argv[2:]
    from conversion import base

    original = base.TextModel.get_vocab_base_pre

    def get_vocab_base_pre(self, tokenizer):  # type: ignore[no-untyped-def]
        try:
            return original(self, tokenizer)
        except NotImplementedError:
            if pre is None:
                print("clustertune: llama.cpp's converter does not know this BPE tokenizer's pre-tokenizer",
                      file=sys.stderr)
                sys.exit(UNKNOWN_TOKENIZER_EXIT)
            base.logger.info("pre-tokenizer not in the converter's table; %s, as tokenizer.json says", pre)
            return pre

    base.TextModel.get_vocab_base_pre = get_vocab_base_pre
    converter = Path(base.__file__).resolve().parent.parent / "convert_hf_to_gguf.py"
    sys.argv = [str(converter), *argv]
    runpy.run_path(str(converter), run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
