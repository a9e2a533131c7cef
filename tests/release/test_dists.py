"""The wheel holds the whole package with the built JS bundle, py.typed and the license; the sdist holds what builds
it; the version is written in one place."""

from __future__ import annotations

import tomllib
from email.parser import HeaderParser

import hookwidgets

from ._dists import ROOT, Dists

PACKAGE = ROOT / "hookwidgets"


def _metadata(dists: Dists) -> dict[str, list[str]]:
    """The wheel's METADATA headers, each with every value it is given."""
    name = f"{dists.wheel.name.split('-')[0]}-{hookwidgets.__version__}.dist-info/METADATA"
    message = HeaderParser().parsestr(dists.wheel_file(name).decode())
    return {key: message.get_all(key) for key in message}


def test_the_wheel_holds_every_file_of_the_package_and_the_built_bundle(dists):
    names = dists.wheel_names()
    package = {
        p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    }
    expected = {"hookwidgets/static/widget.js", "hookwidgets/static/widget.css", "hookwidgets/py.typed"}
    assert expected <= package and "hookwidgets/core/capture/_fused_stats.c" in package
    assert sorted(package - names) == []
    for bundle in ("widget.js", "widget.css"):  # the bundle `make frontend` built, not another
        assert dists.wheel_file(f"hookwidgets/static/{bundle}") == (PACKAGE / "static" / bundle).read_bytes()
    assert [name for name in names if name.startswith(("tests/", "js/", "bench/", "docs/"))] == []


def test_the_wheel_metadata_has_the_license_expression_its_file_and_the_source_version(dists):
    metadata = _metadata(dists)
    assert metadata["License-Expression"] == ["BSD-3-Clause"]
    assert metadata["License-File"] == ["LICENSE"]
    assert [c for c in metadata["Classifier"] if c.startswith("License ::")] == []  # PEP 639: the expression only
    assert metadata["Version"] == [hookwidgets.__version__]
    license_file = f"hookwidgets-{hookwidgets.__version__}.dist-info/licenses/LICENSE"
    assert dists.wheel_file(license_file) == (ROOT / "LICENSE").read_bytes()
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License") and "Copyright (c) 2026, hookwidgets developers" in text


def test_the_python_classifiers_start_at_requires_python(dists):
    metadata = _metadata(dists)
    prefix = "Programming Language :: Python :: 3."
    versions = [c.rsplit(" ", 1)[1] for c in metadata["Classifier"] if c.startswith(prefix)]
    assert metadata["Requires-Python"] == [f">={versions[0]}"]


def test_the_sdist_holds_the_js_sources_and_what_builds_them(dists):
    names = dists.sdist_names()
    sources = {p.relative_to(ROOT).as_posix() for p in (ROOT / "js" / "src").rglob("*") if p.is_file()}
    assert len(sources) > 10
    builds = {"js/package.json", "js/package-lock.json", "js/build.mjs", "pyproject.toml", "LICENSE", "README.md"}
    assert sorted((sources | builds) - names) == []
    assert [name for name in names if "node_modules" in name] == []


def test_the_version_is_written_once():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["hatch"]["version"] == {"path": "hookwidgets/__init__.py"}
