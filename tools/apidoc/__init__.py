"""The API reference, docs/api.md, written from the code: ``make docs`` (``python -m tools.apidoc``).

Signatures come from ``inspect`` with defaults as the source writes them; text from docstrings, including the
string literal that follows a field, an attribute set in ``__init__`` or a constant. Longer explanations are
written by hand in docs/api/<module>.md, one ``## name`` block per entry (text before the first block belongs to
the module), and docs/api/_intro.md opens the page.
"""
