"""One self-contained HTML page for a study: ``archsim report DIR... --out FILE.html``.

Everything is inline (charts as base64 PNG, styles in a <style> element, one small inline script that
marks which charts decoded), so the page opens from a mail attachment or an air-gapped machine and makes
no network request. Text is escaped; tables are capped at ``MAX_TABLE_ROWS`` rows (the CSV beside the
chart holds them all).
"""

from __future__ import annotations

import base64
import html
import importlib.metadata
import platform
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from archsim.report.study import MAX_TABLE_ROWS, Section, find_outputs, read_section

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
.path { color: #666; font-size: .85em; font-family: monospace; }
.headline { display: flex; flex-wrap: wrap; gap: .6em; margin: 1em 0; }
.metric { background: #f3f5f8; border-radius: 6px; padding: .5em .8em; min-width: 9em; }
.metric .v { font-size: 1.3em; font-weight: 600; } .metric .l { color: #555; font-size: .8em; }
.limiter { background: #fff6e0; border-left: 4px solid #e0a000; padding: .5em .8em; }
figure { margin: 1.2em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #444; font-size: .9em; }
table { border-collapse: collapse; font-size: .8em; margin: .6em 0; display: block; overflow-x: auto; }
th, td { border: 1px solid #ddd; padding: .2em .5em; text-align: right; white-space: nowrap; }
th { background: #f3f5f8; } pre { background: #f8f8f8; padding: .8em; overflow-x: auto; font-size: .8em; }
details { margin: .6em 0; }
"""
# Marks every chart that decoded (naturalWidth > 0) so a headless browser's DOM dump can check them.
CHECK_SCRIPT = """
window.addEventListener('load', function () {
  var imgs = document.querySelectorAll('figure img');
  var ok = 0;
  imgs.forEach(function (img) { if (img.complete && img.naturalWidth > 0) { ok += 1; } });
  document.body.setAttribute('data-charts', String(imgs.length));
  document.body.setAttribute('data-charts-ok', String(ok));
});
"""
VERSIONED = ("archsim", "numpy", "pandas", "simpy", "matplotlib", "torch")


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def _table_html(title: str, table: pd.DataFrame) -> str:
    shown = table.head(MAX_TABLE_ROWS)
    note = "" if len(table) <= MAX_TABLE_ROWS else f" (first {MAX_TABLE_ROWS} of {len(table)} rows)"
    body = shown.to_html(index=False, float_format=lambda x: f"{x:,.4g}", na_rep="", escape=True)
    return f"<details open><summary>{_esc(title)}{_esc(note)}</summary>{body}</details>"


def _image_html(path: Path, caption: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (
        f'<figure><img alt="{_esc(caption)}" src="data:image/png;base64,{data}">'
        f"<figcaption><b>{_esc(path.name)}</b>: {_esc(caption)}</figcaption></figure>"
    )


def _hardware_text(settings: dict) -> str:
    """The resolved hardware config of a simulation or sweep, as YAML ('' when it cannot be loaded)."""
    import yaml

    from archsim.errors import ArchsimError
    from archsim.hw.presets import load_hw

    name = settings.get("hw")
    if not isinstance(name, str):
        return ""
    raw = settings.get("hw_set", "")
    # a list from metrics.json, a ';'-joined string from a sweep CSV; anything else: none
    if isinstance(raw, str):
        overrides = [s for s in raw.split(";") if s]
    else:
        overrides = list(raw) if isinstance(raw, list | tuple) else [raw] if raw else []
    if not all(isinstance(item, str) for item in overrides):
        return f"(could not resolve {name}: hw_set {raw!r} is not a list of key=value strings)"
    try:
        hw = load_hw(name, overrides)
    except ArchsimError as exc:
        return f"(could not resolve {name}: {exc})"
    return yaml.safe_dump(hw.model_dump(), sort_keys=False)


def _section_html(section: Section) -> str:
    parts = [f"<h2>{_esc(section.title)}</h2>", f'<div class="path">{_esc(section.path)}</div>']
    if section.headline:
        cells = "".join(
            f'<div class="metric"><div class="v">{_esc(v)}</div><div class="l">{_esc(k)}</div></div>'
            for k, v in section.headline
        )
        parts.append(f'<div class="headline">{cells}</div>')
    if section.limiter:
        what, why = section.limiter
        parts.append(f'<p class="limiter"><b>Limited by {_esc(what)}</b>: {_esc(why)}.</p>')
    if section.text:
        parts.append(f"<pre>{_esc(section.text)}</pre>")
    parts.extend(_image_html(p, c) for p, c in section.charts)
    parts.extend(_table_html(t, df) for t, df in section.tables)
    if section.settings:
        rows = "".join(
            f"<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>" for k, v in section.settings.items()
        )
        parts.append(
            f"<details><summary>Knobs, seed and inputs</summary><table>{rows}</table></details>"
        )
        hw_text = _hardware_text(section.settings)
        if hw_text:
            parts.append(
                f"<details><summary>Resolved hardware config</summary><pre>{_esc(hw_text)}</pre></details>"
            )
    return "\n".join(parts)


def render_report(roots: list[Path], title: str | None = None) -> str:
    """The whole page for the archsim outputs under ``roots``."""
    sections = [read_section(kind, folder) for kind, folder in find_outputs(roots)]
    title = title or "archsim report: " + ", ".join(Path(r).name for r in roots)
    versions = ", ".join(f"{k} {v}" for k, v in _versions().items())
    made = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    toc = "".join(
        f"<li>{_esc(s.title)} <span class='path'>({s.kind})</span></li>" for s in sections
    )
    body = "\n".join(_section_html(s) for s in sections)
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_esc(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{_esc(title)}</h1><p class='path'>made {made}; {_esc(versions)}</p>"
        f"<ul>{toc}</ul>{body}<script>{CHECK_SCRIPT}</script></body></html>\n"
    )


def write_report(roots: list[Path], out: Path, title: str | None = None) -> Path:
    """Render and write the page atomically (an older report stays until the new one is complete)."""
    from archsim.atomic import atomic_output_file

    page = render_report(roots, title)
    out = Path(out)
    with atomic_output_file(out, "w") as handle:
        handle.write(page)
    return out
