"""Rewritten code a reviewer would accept (issue 18.7): continuation lines follow a callee of
another length, imports the fix left unused go (only torch's names), and a dropped argument's
comments go with it."""

import textwrap

from migration.core import Options, fix_text

OPTS = Options(fix=True, unsafe_fixes=True)


def rw(src: str, path: str = "t.py") -> str:
    out, _, _, _ = fix_text(textwrap.dedent(src), path, OPTS)
    again, fixed, _, _ = fix_text(out, path, OPTS)
    assert again == out and not fixed, "second run changed something"
    return out


def shim(line: int = 2) -> str:
    """The registration and the comment keeping the call on compat.export: ``g`` (registered at
    ``line``) is no def of the module, so it has no translation (ONX304)."""
    return ("import torch_onnx_compat as compat\n"
            "compat.register_custom_op_symbolic('::gelu', g, 11)\n"
            "# compat.migrate: compat.export because custom symbolics without a translation "
            "(ONX304: g at line\n"
            f"#   {line}: no def of this module)\n")


SHIM = shim()


def test_aligned_arguments_follow_the_shorter_callee() -> None:
    out = rw("""\
        import torch
        torch.onnx.register_custom_op_symbolic('::gelu', g, 11)
        torch.onnx.export(model, (x,), "m.onnx",
                          # for the old runtime
                          opset_version=11,
                          input_names=["x"])
        """)
    assert out == "import torch\n" + SHIM + (
        'compat.export(model, (x,), "m.onnx",\n'
        "              # for the old runtime\n"
        "              opset_version=11,\n"
        '              input_names=["x"])\n')


def test_aligned_arguments_follow_the_public_name() -> None:
    out = rw("""\
        import torch
        def f(m, x):
            torch.onnx.utils.export(m, x, "a.onnx",
                                    dynamo=False)
            torch.onnx._export(m, x, "a.onnx",
                               dynamo=False)
        """)
    assert out == ("import torch\ndef f(m, x):\n"
                   '    torch.onnx.export(m, x, "a.onnx",\n'
                   "                      dynamo=False)\n"
                   '    torch.onnx.export(m, x, "a.onnx",\n'
                   "                      dynamo=False)\n")


def test_hanging_and_unaligned_indents_stay() -> None:
    hanging = ("torch.onnx.export(\n"
               '    model, (x,), "m.onnx",\n'
               "    opset_version=11,\n"
               ")\n")
    unaligned = ('torch.onnx.export(model, (x,), "m.onnx",\n'
                 "        opset_version=11)\n")
    head = "import torch\ntorch.onnx.register_custom_op_symbolic('::gelu', g, 11)\n"
    assert rw(head + hanging) == "import torch\n" + SHIM + hanging.replace("torch.onnx.", "compat.")
    assert rw(head + unaligned) == "import torch\n" + SHIM + unaligned.replace("torch.onnx.",
                                                                               "compat.")


def test_imports_the_fix_left_unused_go() -> None:
    assert rw("""\
        import torch
        from torch.onnx import register_custom_op_symbolic
        register_custom_op_symbolic('::gelu', g, 11)
        torch.onnx.export(model, (x,), "m.onnx")
        """) == "import torch\n" + shim(3) + 'compat.export(model, (x,), "m.onnx")\n'
    out = rw("""\
        import torch
        from torch.onnx import (
            OperatorExportTypes,
            TrainingMode as TM,
        )
        model.eval()
        torch.onnx.export(model, (x,), "m.onnx", training=TM.EVAL,
                          operator_export_type=OperatorExportTypes.ONNX)
        """)
    assert out == ("import torch\nmodel.eval()\n"
                   'torch.onnx.export(model, (x,), "m.onnx", dynamo=True, external_data=False)\n')


def test_imports_that_stay() -> None:
    """``import torch``, a user's module (importing it may register symbolics), a name still
    read, an import unused before the fix, one whose removal would empty its block and a
    package's ``__init__`` names stay."""
    out = rw("""\
        import torch
        import my_symbolics
        from my_data import Y
        from torch.onnx import TrainingMode
        from torch.onnx import TrainingMode as TM, OperatorExportTypes
        try:
            from torch.onnx import TrainingMode as T2
        except ImportError:
            T2 = None
        model.eval()
        torch.onnx.export(model, (x,), "m.onnx", training=TM.EVAL, example_outputs=Y)
        torch.onnx.export(model, (x,), "m.onnx", training=T2.EVAL,
                          operator_export_type=OperatorExportTypes.ONNX)
        print(OperatorExportTypes)
        """)
    assert "training=" not in out and "example_outputs" not in out  # TM, T2 and Y unread
    assert out.startswith("import torch\nimport my_symbolics\nfrom my_data import Y\n"
                          "from torch.onnx import TrainingMode\n"
                          "from torch.onnx import OperatorExportTypes\n"
                          "try:\n    from torch.onnx import TrainingMode as T2\n")
    init = rw("from torch.onnx import register_custom_op_symbolic\n"
              "register_custom_op_symbolic('::gelu', g, 11)\n", path="pkg/__init__.py")
    assert init.startswith("import torch_onnx_compat as compat\n"
                           "from torch.onnx import register_custom_op_symbolic\n")


def test_a_dropped_arguments_comments_go_with_it() -> None:
    out = rw("""\
        import torch
        torch.onnx.export(
            model, (x,), "m.onnx",
            # the outputs, for the old exporter
            example_outputs=y,  # traced once
            opset_version=18,  # pinned
        )
        """)
    assert out == ("import torch\n"
                   "torch.onnx.export(\n"
                   '    model, (x,), "m.onnx",\n'
                   "    opset_version=18,  # pinned\n"
                   "    dynamo=True,\n"
                   "    external_data=False,\n"
                   ")\n")
