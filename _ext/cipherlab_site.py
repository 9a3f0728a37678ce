"""Three fixes to the built pages, which tests/test_browser.py would otherwise report (two script
errors and a request to a CDN).

- sphinx-thebe adds its inline configuration (``const THEBE_JS_URL = ...``) once to Sphinx's
  registry and once to the builder; Sphinx 7.4 lists the two copies (filename None and "") as
  different scripts, and the second ``const`` throws "Identifier 'THEBE_JS_URL' has already been
  declared" on every page. Identical inline scripts are kept once here.
- pydata-sphinx-theme logs "Got invalid theme mode" when no ``default_mode`` is set; set "auto".
- matplotlib's animation player (``to_jshtml``, the positions chapter) links Font Awesome from a CDN for its
  buttons; the built pages would need the network for them. After the build, that link is
  rewritten to the self-hosted copy (``_vendor/font-awesome``, served under ``_static/``). The
  notebooks keep the CDN link, which works in Colab and JupyterLab.

Loaded through ``sphinx: local_extensions`` in _config.yml.
"""

import os
import re
from pathlib import Path


def _tidy(app, pagename, templatename, context, doctree):
    scripts, seen = [], set()
    for script in context.get("script_files", []):
        attributes = getattr(script, "attributes", {})
        key = ("inline", attributes.get("body")) if attributes.get("body") and not getattr(script, "filename", None) \
            else ("file", str(script))
        if key not in seen:
            seen.add(key)
            scripts.append(script)
    if "script_files" in context:
        context["script_files"][:] = scripts
    if not context.get("default_mode"):
        context["default_mode"] = "auto"


FONT_AWESOME_CDN = re.compile(r"https://maxcdn\.bootstrapcdn\.com/font-awesome/[0-9.]+/css/font-awesome\.min\.css")


def _self_host_font_awesome(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    css = out / "_static" / "font-awesome" / "css" / "font-awesome.min.css"
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        if FONT_AWESOME_CDN.search(text):
            local = os.path.relpath(css, page.parent).replace(os.sep, "/")
            page.write_text(FONT_AWESOME_CDN.sub(local, text), encoding="utf-8")


def setup(app):
    app.connect("html-page-context", _tidy, priority=900)  # after the theme's own handlers
    app.connect("build-finished", _self_host_font_awesome)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
