"""Browser tests: a real JupyterLab server driven by Playwright chromium."""
