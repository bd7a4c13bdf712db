"""An Ollama ``Modelfile`` for an exported GGUF file.

Ollama's ``TEMPLATE`` is a Go template, not Jinja, so a chat template cannot be copied over:
the built-in ones (ChatML, Llama-3) are written here as Go templates that render the same text
for the same messages; a template of the user's own gets a note saying so (the GGUF file still
carries the Jinja text, which llama.cpp's ``--jinja`` runs as it is).
"""

from __future__ import annotations

from dataclasses import dataclass

from clustertune.data.templates import CHATML, LLAMA3


@dataclass(frozen=True)
class GoTemplate:
    """A chat format as Ollama writes it: one turn per message, then the assistant's opening."""

    name: str
    turn: str  # Go template text for one message: {{ .Role }}, {{ .Content }}
    generation: str  # what opens the assistant's reply
    stops: tuple[str, ...]

    def text(self) -> str:
        return "{{- range .Messages }}" + self.turn + "{{ end }}" + self.generation


# The bos token of the Llama-3 template is left to the tokenizer: llama.cpp and Ollama add it
# when the GGUF file says the tokenizer adds one (tokenizer.ggml.add_bos_token).
GO_TEMPLATES: dict[str, GoTemplate] = {
    CHATML: GoTemplate("ChatML", "<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n", "<|im_start|>assistant\n",
                       ("<|im_end|>", "<|im_start|>")),
    LLAMA3: GoTemplate("Llama-3", "<|start_header_id|>{{ .Role }}<|end_header_id|>\n\n{{ .Content }}<|eot_id|>",
                       "<|start_header_id|>assistant<|end_header_id|>\n\n", ("<|eot_id|>", "<|start_header_id|>")),
}


def _quoted(text: str) -> str:
    if '"""' in text:
        raise ValueError("a template with triple quotes cannot be written into a Modelfile")
    return '"""' + text + '"""'


def modelfile(gguf_name: str, chat_template: str | None) -> str:
    """The Modelfile text for ``gguf_name`` (a file beside it) and the model's chat template."""
    lines = ["# ollama create my-model -f Modelfile && ollama run my-model", f"FROM ./{gguf_name}"]
    go = GO_TEMPLATES.get(chat_template or "")
    if go is not None:
        lines.append(f"# the {go.name} chat template the model was trained with, as a Go template")
        lines.append(f"TEMPLATE {_quoted(go.text())}")
        lines += [f'PARAMETER stop "{s}"' for s in go.stops]
    elif chat_template:
        lines += ["# The model's chat template is its own Jinja template, which Ollama cannot run (Ollama",
                  "# templates are Go templates). The GGUF file carries it for llama.cpp (--jinja); for Ollama",
                  "# write the same format as a TEMPLATE here: https://github.com/ollama/ollama/blob/main/docs/template.md"]
    else:
        lines.append("# no chat template: the model continues the text it is given")
        lines.append('TEMPLATE """{{ .Prompt }}"""')
    return "\n".join(lines) + "\n"
