import subprocess
import sys


def test_core_imports_torch_only():
    code = (
        "import sys, hookwidgets.core, hookwidgets.core.explorer\n"
        "bad = [m for m in ('ipywidgets', 'anywidget', 'IPython', 'matplotlib') if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_plots_import_no_widgets():
    code = "import sys, hookwidgets.plots\nprint(','.join(m for m in ('ipywidgets', 'anywidget') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
