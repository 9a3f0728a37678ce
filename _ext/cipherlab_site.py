"""Two fixes to the built pages, which tests/test_browser.py would otherwise report as script errors.

- sphinx-thebe adds its inline configuration (``const THEBE_JS_URL = ...``) once to Sphinx's
  registry and once to the builder; Sphinx 7.4 lists the two copies (filename None and "") as
  different scripts, and the second ``const`` throws "Identifier 'THEBE_JS_URL' has already been
  declared" on every page. Identical inline scripts are kept once here.
- pydata-sphinx-theme logs "Got invalid theme mode" when no ``default_mode`` is set; set "auto".

Loaded through ``sphinx: local_extensions`` in _config.yml.
"""



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


def setup(app):
    app.connect("html-page-context", _tidy, priority=900)  # after the theme's own handlers
    return {"parallel_read_safe": True, "parallel_write_safe": True}
