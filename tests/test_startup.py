"""Start-up: mobile-ep does not pay for modules its work never uses (sympy, pulled in by onnx_ir), and
code that does use them still gets the real thing."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from mepkit import LIGHT_DIR


def run_python(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_check_and_convert_never_import_sympy(tmp_path):
    out = run_python(f"""
        import sys
        import mobile_ep
        from mobile_ep import pipeline as api
        api.check({str(LIGHT_DIR / 'light_squeezenet.onnx')!r})
        api.convert({str(LIGHT_DIR / 'light_squeezenet.onnx')!r}, "nnapi" if "nnapi" in
                    mobile_ep.contract.plugins.make_plugins().backends() else sorted(mobile_ep.contract.plugins.make_plugins().backends())[0],
                    {str(tmp_path / 'out')!r}, verify=False)
        print("sympy loaded:", "Expr" in vars(sys.modules.get("sympy", sys)))
    """)
    assert "sympy loaded: False" in out


def test_symbolic_dimensions_and_sympy_still_work_after_mobile_ep_is_imported():
    out = run_python("""
        import mobile_ep
        import onnx_ir as ir
        n = ir.SymbolicDim("N")
        print((n + 1).value, (n * 2).value)
        import sympy
        print(sympy.Symbol("x") + 1, type(sympy).__name__)
        from onnx_ir import _symbolic_shapes
        print(_symbolic_shapes.parse_symbolic_expression("max(N, 3)"))
    """)
    assert out.split("\n")[:3] == ["N + 1 2*N", "x + 1 module", "Max(3, N)"]
