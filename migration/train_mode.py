"""``training=TRAINING``/``PRESERVE`` on plain torch (issue 30.4): the generated module's entries.

torch's new exporter captures a train-mode model faithfully but translates BatchNorm with running
statistics; the shim keeps batch statistics with its own translations (``dynamo/training.py``).
The migrated call passes those translations as a ``custom_translation_table`` from the generated
module (``<module>_onnx.py``, the user's code from then on) and, for ``TRAINING``, exports inside
``with <module>_onnx.train_mode(model):`` (train mode for the capture, every mode and buffer as
before afterwards, as the shim's ``model_mode`` does).

The translations are read from the shim's source file (their one home), not imported: the
rewriter stays torch-free.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import textwrap

from .generated import Entry

#: the shim's source of the translations
SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dynamo",
                      "training.py")
#: the shim's function -> its name in the generated module
_NAMES = {"_batch_norm": "batch_norm_with_batch_statistics",
          "_bn_functional": "native_batch_norm_legit_functional",
          "_bn_three": "native_batch_norm"}
#: generated name -> the aten op it translates (``translation_table()`` keys)
_KEYS = {"native_batch_norm_legit_functional": "aten::_native_batch_norm_legit_functional",
         "native_batch_norm": "aten::native_batch_norm",
         "native_batch_norm_legit": "aten::_native_batch_norm_legit"}
TRAIN_MODE = "train_mode"
_TRAIN_MODE_CODE = '''\
@contextlib.contextmanager
def train_mode(model: torch.nn.Module):
    """``model`` in train mode while torch.onnx.export captures it (what training=TRAINING did);
    afterwards every submodule's own mode and every buffer (BatchNorm statistics) as before."""
    modes = [(m, m.training) for m in model.modules()]
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    model.train()
    try:
        yield model
    finally:
        for m, mode in modes:
            m.training = mode
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)'''
_DOC = ("training={mode}: BatchNorm captured in train mode is exported with batch statistics, as "
        "compat.export did (its translation, dynamo/training.py); torch's own translation uses "
        "the running statistics")


@functools.lru_cache(maxsize=1)
def _shim_functions() -> dict[str, str]:
    """The shim's translation functions' source, renamed (``_NAMES``)."""
    with open(SOURCE, encoding="utf-8") as fh:
        text = fh.read()
    lines = text.splitlines()
    out = {}
    rename = re.compile(r"\b(" + "|".join(map(re.escape, _NAMES)) + r")\b")
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name in _NAMES:
            code = "\n".join(lines[node.lineno - 1:node.end_lineno])
            out[_NAMES[node.name]] = rename.sub(lambda m: _NAMES[m.group(1)], code)
    return out


def entries(origin: str, line: int, mode: str) -> tuple[Entry, ...]:
    """The generated module's entries for ``training=mode`` at ``origin:line``: the
    batch-statistics translations, keyed in ``translation_table()``, and (``TRAINING``) the
    ``train_mode`` context manager."""
    doc = "\n".join(textwrap.wrap(_DOC.format(mode=mode), 97))
    funcs = _shim_functions()
    out = [Entry(name, origin, line, code, (), _KEYS.get(name), doc if name in _KEYS else "")
           for name, code in funcs.items()]
    out.append(Entry("native_batch_norm_legit", origin, line,
                     "native_batch_norm_legit = native_batch_norm", (),
                     _KEYS["native_batch_norm_legit"], doc))
    if mode == "TRAINING":
        out.append(Entry(TRAIN_MODE, origin, line, _TRAIN_MODE_CODE,
                         ("import contextlib", "import torch")))
    return tuple(out)
