"""A static HTML snapshot of the view, for where widgets do not run (GitHub, nbviewer, nbconvert, a saved page).

Built from the view's payloads, what the widget shows: the module tree with shapes and hook badges, the selection's
figures (the PNGs already drawn), the summary table. No script; every model string goes through ``html.escape``;
each part is bounded and says what it left out.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Iterator
from typing import Any

from ..core.display import display_name
from .protocol import HookItem, HookKind, PlotItem, Summary, TreeNode
from .view import CLOSED, ExplorerView

MAX_TREE_ROWS = 200
"""Modules the tree shows; the rest are counted."""
MAX_HOOK_ROWS = 100
"""Hooks the hook list shows; the rest are counted."""
MAX_FIGURES = 8
"""Figures of the selection the snapshot keeps."""
MAX_IMAGE_BYTES = 2_000_000
"""PNG bytes the snapshot keeps in all (before base64); a figure past it is left out and counted."""
MAX_TABLE_ROWS = 100
"""Layers the summary table shows; the rest are counted."""

CSS = """
.hw-static{font:13px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;color:inherit;max-width:100%;
  border:1px solid rgba(127,127,127,.45);border-radius:6px;padding:8px 10px;overflow-x:auto}
.hw-static h3,.hw-static h4{margin:10px 0 4px;font-size:13px;font-weight:600}
.hw-static .hw-s-head{font-family:ui-monospace,Menlo,Consolas,monospace}
.hw-static .hw-s-note,.hw-static .hw-s-cut{opacity:.75;font-style:italic}
.hw-static .hw-s-row{font-family:ui-monospace,Menlo,Consolas,monospace;white-space:pre;padding:1px 0}
.hw-static .hw-s-selected{background:rgba(64,128,255,.18)}
.hw-static .hw-s-cls,.hw-static .hw-s-shape{opacity:.7;margin-left:.8em}
.hw-static .hw-s-badge{display:inline-block;margin-left:.5em;padding:0 5px;border-radius:8px;font-size:11px;
  background:rgba(64,128,255,.2);border:1px solid rgba(64,128,255,.55)}
.hw-static .hw-s-badge-error{background:rgba(220,50,50,.2);border-color:rgba(220,50,50,.6)}
.hw-static figure{display:inline-block;margin:4px 12px 8px 0;vertical-align:top}
.hw-static figure img{max-width:100%;height:auto;background:#fff}
.hw-static figcaption{font-size:12px;opacity:.85}
.hw-static table{border-collapse:collapse;font-size:12px}
.hw-static th,.hw-static td{border:1px solid rgba(127,127,127,.35);padding:1px 6px;text-align:left}
.hw-static td:first-child{font-family:ui-monospace,Menlo,monospace}
.hw-static .hw-s-num{text-align:right;font-variant-numeric:tabular-nums}
@media (prefers-color-scheme:dark){.hw-static .hw-s-badge{background:rgba(110,160,255,.25)}}
"""
"""The snapshot's style, scoped by ``.hw-static``: colours inherit the page's text colour, lines and badges are
translucent, so it reads on a light page and a dark one."""

PAGE_CSS = """
body{margin:16px;background:#fff;color:#1b1b1b}
@media (prefers-color-scheme:dark){body{background:#1e1e1e;color:#e4e4e4}}
"""
"""The standalone page's own colours (``save_html``), light or dark as the reader's system prefers."""


def snapshot_html(view: ExplorerView, heading: str) -> str:
    """The view as static HTML: ``heading`` (the explorer's repr), its tree, hooks, figures and summary."""
    parts = [
        f"<style>{CSS}</style>",
        '<div class="hw-static">',
        f'<div class="hw-s-head">{_text(heading)}</div>',
        '<div class="hw-s-note">A static snapshot of the explorer as it was shown (or saved): run the notebook for '
        "the live widget.</div>",
        *_tree(view.tree, view.hooks, view.hook_kinds, view.selected),
        *_hooks(view.hooks),
        *_figures(view.plots.get("path"), view.plots.get("items", [])),
        *_summary(view.summary),
        "</div>",
    ]
    return "\n".join(parts)


def closed_html(heading: str) -> str:
    """What a closed explorer shows: its repr and that its hooks are gone."""
    return (
        f'<style>{CSS}</style><div class="hw-static"><div class="hw-s-head">{_text(heading)}</div>'
        f'<div class="hw-s-note">{_text(CLOSED)}</div></div>'
    )


def standalone_page(fragment: str, title: str) -> str:
    """``fragment`` as a page of its own: doctype, charset, title, the page's colours."""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_text(title)}</title>\n<style>{PAGE_CSS}</style>\n</head>\n<body>\n{fragment}\n</body>\n</html>\n"
    )


def _text(value: object) -> str:
    """A model's string as HTML text: cut, invisible characters escaped (``display_name``), then ``html.escape``."""
    return html.escape(display_name(str(value)), quote=True)


def _rows(node: TreeNode, depth: int = 0) -> Iterator[tuple[TreeNode, int]]:
    yield node, depth
    for child in node.get("children", []):
        yield from _rows(child, depth + 1)


def _tree(tree: TreeNode, hooks: list[HookItem], kinds: list[HookKind], selected: str) -> list[str]:
    if not tree:
        return []
    rows = list(_rows(tree))
    by_path: dict[str, list[HookItem]] = {}
    for hook in hooks:
        by_path.setdefault(hook["path"], []).append(hook)
    order = {kind["kind"]: k for k, kind in enumerate(kinds)}
    out = [f"<h3>Modules ({len(rows)})</h3>", '<div class="hw-s-tree">']
    for node, depth in rows[:MAX_TREE_ROWS]:
        path = node.get("path", "")
        name = node.get("name") or node.get("cls") or path
        cls = " hw-s-selected" if path == selected else ""
        shape = node.get("shape")
        shape_text = "" if shape is None else "(" + ", ".join(str(size) for size in shape) + ")"
        dtype = node.get("dtype")
        shape_text += f" {dtype}" if dtype and shape_text else ""
        at = sorted(by_path.get(path, []), key=lambda hook: order.get(hook["kind"], len(order)))
        parts = [f"<span>{_text(name)}</span>"]
        parts += [f'<span class="hw-s-cls">{_text(node.get("cls", ""))}</span>'] if path else []
        parts += [f'<span class="hw-s-shape">{_text(shape_text)}</span>'] if shape_text else []
        parts += [_badge(hook, kinds) for hook in at]
        # Indented and spaced in the text itself: GitHub and an untrusted notebook in Lab drop the <style>.
        out.append(
            f'<div class="hw-s-row{cls}" title="{_text(path or node.get("cls", ""))}">{"&#160;&#160;" * depth}'
            + " ".join(parts)
            + "</div>"
        )
    out.append("</div>")
    if len(rows) > MAX_TREE_ROWS:
        left = len(rows) - MAX_TREE_ROWS
        out.append(
            f'<div class="hw-s-cut">… {left} more modules not shown (the snapshot shows the first '
            f"{MAX_TREE_ROWS})</div>"
        )
    return out


def _badge(hook: HookItem, kinds: list[HookKind]) -> str:
    if hook.get("foreign"):
        return f'<span class="hw-s-badge" title="a hook others attached (left alone)">ext {_text(hook["kind"])}</span>'
    row = next((kind for kind in kinds if kind["kind"] == hook["kind"]), None)
    label = row["badge"] if row is not None and row["badge"] else hook["kind"]
    fired, count = f"fired {hook['fired']}", hook["fired"]
    if row is not None and row["family"] == "global" and hook.get("steps"):  # as the widget counts them: steps
        fired, count = f"fired in {hook['steps']} steps ({hook['fired']} times in all)", hook["steps"]
    lines = [row["tip"] if row is not None else hook["kind"], f"{hook.get('action') or 'capture'}: {fired}"]
    tip = "&#10;".join(_text(line) for line in lines)  # a line break inside the attribute
    error = " hw-s-badge-error" if hook.get("error") else ""
    shown = f" {count}" if count else ""
    kind = _text(hook["kind"])
    return f'<span class="hw-s-badge{error}" data-kind="{kind}" title="{tip}">{_text(label)}{shown}</span>'


def _hooks(hooks: list[HookItem]) -> list[str]:
    if not hooks:
        return ['<div class="hw-s-note">No hooks attached.</div>']
    out = [f"<h3>Hooks ({len(hooks)})</h3>", "<table><tr><th>path</th><th>kind</th><th>action</th><th>fired</th></tr>"]
    for hook in hooks[:MAX_HOOK_ROWS]:
        action = hook.get("action") or "capture"
        failed = " (failed)" if hook.get("error") else ""
        out.append(
            f"<tr><td>{_text(hook['path'] or '(model)')}</td><td>{_text(hook['kind'])}</td>"
            f'<td>{_text(action)}{failed}</td><td class="hw-s-num">{int(hook["fired"])}</td></tr>'
        )
    out.append("</table>")
    if len(hooks) > MAX_HOOK_ROWS:
        out.append(f'<div class="hw-s-cut">… {len(hooks) - MAX_HOOK_ROWS} more hooks not shown</div>')
    return out


def _image(png: bytes, alt: str, hover: Any) -> str:
    size = ""
    if isinstance(hover, dict) and hover.get("width") and hover.get("height"):  # its CSS size, as the widget shows it
        size = f' width="{round(float(hover["width"]))}" height="{round(float(hover["height"]))}"'
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{_text(alt)}"{size}>'


def _figures(path: str | None, items: list[PlotItem]) -> list[str]:
    if path is None:
        return []
    where = _text(path or "(model)")
    shown = [item for item in items if item.get("png")]
    if not shown:
        return [f'<div class="hw-s-note">No figures for {where}: nothing captured there yet.</div>']
    out, used, left = [f"<h3>Figures of {where}</h3>"], 0, 0
    for item in shown:
        png = item["png"]
        if len(out) - 1 >= MAX_FIGURES or used + len(png) > MAX_IMAGE_BYTES:
            left += 1
            continue
        used += len(png)
        shape = item.get("shape")
        details = [item.get("kind", ""), item.get("title", "")]
        details += ["×".join(str(size) for size in shape) if shape else "", f"step {item.get('step', 0)}"]
        caption = " · ".join(_text(d) for d in details if d)
        out.append(
            f"<figure>{_image(png, item.get('title') or item.get('kind', ''), item.get('hover'))}"
            f"<figcaption>{caption}</figcaption></figure>"
        )
    if left:
        out.append(
            f'<div class="hw-s-cut">{left} more figures left out (the snapshot keeps {MAX_FIGURES} figures, '
            f"{MAX_IMAGE_BYTES // 1_000_000} MB of images)</div>"
        )
    return out


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return _text(value)


def _summary(summary: Summary) -> list[str]:
    rows = summary.get("rows") or []
    if not rows:
        return []
    columns = summary["columns"]
    used = [k for k, _ in enumerate(columns) if k == 0 or any(row[k] is not None for row in rows)]
    out = [f"<h3>Summary, step {_text(summary.get('step'))}</h3>"]
    heatmap = summary.get("heatmap")
    if heatmap:
        out.append(f"<figure>{_image(heatmap, 'summary heatmap', summary.get('heatmap_hover'))}</figure>")
    out.append("<table><tr>" + "".join(f"<th>{_text(columns[k])}</th>" for k in used) + "</tr>")
    for row in rows[:MAX_TABLE_ROWS]:
        path = f"<td>{_text(row[0] or '(model)')}</td>"
        out.append("<tr>" + path + "".join(f'<td class="hw-s-num">{_cell(row[k])}</td>' for k in used[1:]) + "</tr>")
    out.append("</table>")
    if len(rows) > MAX_TABLE_ROWS:
        out.append(f'<div class="hw-s-cut">… {len(rows) - MAX_TABLE_ROWS} more layers not shown</div>')
    return out
