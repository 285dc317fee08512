"""The bench report as a printed table, ``bench.json`` and a self-contained
``bench.html`` (plots as inline SVG: no external file, no script)."""

from __future__ import annotations

import html
import json
import math
import os
from pathlib import Path
from typing import Any

from ..fileio import atomic_write

__all__ = ["format_table", "render_html", "write_outputs"]


def _us(v: float | None) -> str:
    if v is None:
        return "-"
    if v >= 1e6:
        return f"{v / 1e6:.3g} s"
    if v >= 1e3:
        return f"{v / 1e3:.3g} ms"
    return f"{v:.3g} us"


def _rate(v: float | None) -> str:
    if v is None:
        return "-"
    for unit, f in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= f:
            return f"{v / f:.3g} {unit}/s"
    return f"{v:.3g} /s"


def _j(v: float | None) -> str:
    if v is None:
        return "-"
    for unit, f in (("J", 1.0), ("mJ", 1e-3), ("uJ", 1e-6), ("nJ", 1e-9)):
        if v >= f:
            return f"{v / f:.3g} {unit}"
    return f"{v / 1e-12:.3g} pJ"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f} %"


def _name(r: dict[str, Any]) -> str:
    return f"{r['backend']} {r['variant']}"


def _grid(head: list[str], rows: list[list[str]]) -> list[str]:
    w = [max(len(x) for x in col) for col in zip(head, *rows)]
    fmt = "  ".join(f"{{:{'<' if i < 2 else '>'}{n}}}" for i, n in enumerate(w))
    return [fmt.format(*head), fmt.format(*("-" * n for n in w))] + \
        [fmt.format(*r) for r in rows]


def format_table(report: dict[str, Any]) -> str:
    """The tables a person reads: batch 1, throughput by batch, goals, references."""
    m = report["model"]
    out = [f"fluid-hw bench: {m['dir']} ({'int8' if m['quantized'] else 'float'} model), "
           f"test set: {report['test_set']['source']}",
           f"machine: {report['machine']['processor']}, {report['machine']['cores']} cores, "
           f"load average {report['machine'].get('load_average_1min_at_start', 0):.1f} at the "
           "start (CPU times depend on it)"]
    measured = [r for r in report["rows"] if r["status"] != "skipped"]
    top = max(report["options"]["batches"])
    head = ["back end", "variant", "device b1", "host b1 median", "p99", "accuracy",
            "agree", "energy/inf b1", f"energy/inf b{top}"]
    rows = []
    for r in measured:
        lat = r.get("latency_us") or {}
        dev, host = lat.get("device") or {}, lat.get("host") or {}
        energy = r.get("energy") or {}
        rows.append([r["backend"], r["variant"] + (" (merged)" if r["status"] == "merged"
                                                   else ""),
                     _us(dev.get("median_us")), _us(host.get("median_us")),
                     _us(host.get("p99_us")), _pct(r.get("accuracy")),
                     _pct(r.get("agreement")), _j(energy.get("j_per_inference_batch1")),
                     _j(energy.get(f"j_per_inference_batch{top}"))])
    out += ["", "batch-1 latency (warm; device alone, and host to host), accuracy, "
                "agreement with the CPU executor, energy per inference"]
    out += _grid(head, rows)
    out += [f"  skipped: {r['backend']} {r['variant']}: {r['reason']}"
            for r in report["rows"] if r["status"] == "skipped"]
    batches = report["options"]["batches"]
    head = ["back end", "variant"] + [f"b={b}" for b in batches]
    rows = []
    for r in measured:
        by = {t["batch"]: t for t in r.get("throughput", [])}
        rows.append([r["backend"], r["variant"] + " (host)"] +
                    [_rate(by[b]["per_s"]) if b in by else "-" for b in batches])
        if any("device_per_s" in t for t in by.values()):
            rows.append([r["backend"], r["variant"] + " (device)"] +
                        [_rate(by[b].get("device_per_s")) if b in by else "-"
                         for b in batches])
    out += ["", "throughput (inferences/s) against batch size", *_grid(head, rows)]
    notes = []
    for r in measured:
        if "uart" in r:
            u = r["uart"]
            notes.append(f"{r['backend']}: the UART link at {u['baud'] / 1e6:.3g} Mbaud alone "
                         f"takes {u['us_per_inference']:.0f} us per inference ({u['bytes_in']} "
                         f"bytes in, {u['bytes_out']} out) -- hundreds of us, against "
                         f"{_us(r['latency_us']['device']['median_us'])} in the accelerator; "
                         "host to host includes it")
        if "clock" in r:
            notes.append(f"{r['backend']}: device time = {r['latency_us']['device']['how']}")
    sources: dict[str, list[str]] = {}
    for r in measured:
        src = (r.get("energy") or {}).get("source")
        if src:
            sources.setdefault(src, []).append(_name(r))
    notes += [f"energy of {', '.join(names)}: {src}" for src, names in sources.items()]
    out += ["", "notes:"] + [f"  - {n}" for n in notes]
    out += ["", "goals (digits MLP, batch 1):"]
    out += [f"  - {g['goal']}: {g['status']}" + (f" ({g['detail']})" if g.get("detail") else "")
            for g in report["goals"]]
    out += ["", "published, not measured (other models and boards, for scale):"]
    out += [f"  - {p['backend']} {p['variant']}: {p['figure']} [{p['source']}]"
            for p in report["published"]]
    return "\n".join(out)


# -- SVG plots ----------------------------------------------------------------------------

_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
            "#7f7f7f", "#bcbd22", "#17becf"]


def _svg_loglog(title: str, ylabel: str, series: list[tuple[str, list[tuple[float, float]]]],
                w: int = 640, h: int = 360) -> str:
    pts = [p for _, s in series for p in s if p[0] > 0 and p[1] > 0]
    if not pts:
        return f"<p>{html.escape(title)}: nothing measured</p>"
    x0, x1 = math.log10(min(p[0] for p in pts)), math.log10(max(p[0] for p in pts))
    y0, y1 = math.log10(min(p[1] for p in pts)), math.log10(max(p[1] for p in pts))
    x1, y1 = (x1 if x1 > x0 else x0 + 1), (y1 if y1 > y0 else y0 + 1)
    left, right, top, bottom = 70, 220, 30, 40

    def px(x: float) -> float:
        return left + (math.log10(x) - x0) / (x1 - x0) * (w - left - right)

    def py(y: float) -> float:
        return h - bottom - (math.log10(y) - y0) / (y1 - y0) * (h - top - bottom)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
             f'font-family="sans-serif" font-size="11">',
             f'<text x="{w / 2 - 100}" y="18" font-size="13">{html.escape(title)}</text>',
             f'<rect x="{left}" y="{top}" width="{w - left - right}" '
             f'height="{h - top - bottom}" fill="none" stroke="#999"/>']
    for e in range(math.floor(y0), math.ceil(y1) + 1):
        if y0 <= e <= y1:
            parts.append(f'<text x="{left - 5}" y="{py(10 ** e) + 4:.1f}" '
                         f'text-anchor="end">1e{e}</text>')
    for e in range(math.floor(x0), math.ceil(x1) + 1):
        if x0 <= e <= x1:
            parts.append(f'<text x="{px(10 ** e):.1f}" y="{h - bottom + 15}" '
                         f'text-anchor="middle">{10 ** e:g}</text>')
    parts.append(f'<text x="{(w - right + left) / 2}" y="{h - 5}" text-anchor="middle">'
                 'batch size</text>')
    parts.append(f'<text x="12" y="{h / 2}" transform="rotate(-90 12 {h / 2})" '
                 f'text-anchor="middle">{html.escape(ylabel)}</text>')
    for i, (name, s) in enumerate(series):
        c = _COLOURS[i % len(_COLOURS)]
        s = [p for p in s if p[0] > 0 and p[1] > 0]
        if not s:
            continue
        poly = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in s)
        parts.append(f'<polyline points="{poly}" fill="none" stroke="{c}" stroke-width="2"/>')
        parts += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{c}"/>'
                  for x, y in s]
        ly = top + 14 * i + 8
        parts.append(f'<rect x="{w - right + 10}" y="{ly - 8}" width="10" height="10" '
                     f'fill="{c}"/><text x="{w - right + 24}" y="{ly + 1}">'
                     f'{html.escape(name[:30])}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _svg_bars(title: str, bars: list[tuple[str, float, str]], log: bool = False,
              w: int = 640) -> str:
    """Horizontal bars: (label, value, text shown beside the bar)."""
    if not bars:
        return f"<p>{html.escape(title)}: nothing measured</p>"
    h = 40 + 22 * len(bars)
    vals = [math.log10(v) if log else v for _, v, _ in bars]
    lo = min(min(vals), 0.0) if not log else min(vals) - 1
    hi = max(vals) if max(vals) > lo else lo + 1
    left, right = 230, 120
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
             f'font-family="sans-serif" font-size="11">',
             f'<text x="10" y="18" font-size="13">{html.escape(title)}</text>']
    for i, ((label, _, text), v) in enumerate(zip(bars, vals)):
        y = 30 + 22 * i
        bw = (v - lo) / (hi - lo) * (w - left - right)
        parts.append(f'<text x="{left - 5}" y="{y + 12}" text-anchor="end">'
                     f'{html.escape(label[:38])}</text>'
                     f'<rect x="{left}" y="{y}" width="{max(bw, 1):.1f}" height="16" '
                     f'fill="{_COLOURS[i % len(_COLOURS)]}"/>'
                     f'<text x="{left + max(bw, 1) + 4:.1f}" y="{y + 12}">'
                     f'{html.escape(text)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def render_html(report: dict[str, Any]) -> str:
    measured = [r for r in report["rows"] if r["status"] != "skipped"]
    lat, tput = [], []
    for r in measured:
        t = r.get("throughput", [])
        lat.append((_name(r) + " host", [(x["batch"], x["latency_us"]) for x in t]))
        tput.append((_name(r) + " host", [(x["batch"], x["per_s"]) for x in t]))
        if any("device_latency_us" in x for x in t):
            lat.append((_name(r) + " device", [(x["batch"], x["device_latency_us"])
                                                for x in t if "device_latency_us" in x]))
            tput.append((_name(r) + " device", [(x["batch"], x["device_per_s"])
                                                 for x in t if "device_per_s" in x]))
    energy = [(_name(r) + f" b={k.removeprefix('j_per_inference_batch')}", v, _j(v))
              for r in measured for k, v in (r.get("energy") or {}).items()
              if k.startswith("j_per_inference_batch") and v]
    res = []
    for r in measured:
        if "resources" in r:
            used, avail = r["resources"]["used"], r["resources"]["available"]
            res += [(f"{r['backend']} {k}", 100 * used[k] / avail[k] if avail.get(k) else
                     float(used[k]), f"{used[k]}" + (f" / {avail[k]}" if avail.get(k) else ""))
                    for k in ("lut", "ff", "dsp", "bram") if k in used]
    table = html.escape(format_table(report))
    plots = [_svg_loglog("latency against batch size", "latency (us)", lat),
             _svg_loglog("throughput against batch size", "inferences / s", tput),
             _svg_bars("energy per inference (named sources only; log scale)", energy,
                       log=True) if energy else
             "<p>energy per inference: no source available on this machine (see notes)</p>",
             _svg_bars("FPGA resources used (% of the device)", res) if res else ""]
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>fluid-hw bench</title>"
            "<style>body{font-family:sans-serif;margin:2em}pre{background:#f6f6f6;"
            "padding:1em;overflow-x:auto}</style></head><body>"
            f"<h1>fluid-hw bench: {html.escape(report['model']['dir'])}</h1>"
            f"<p>{html.escape(report['created'])}; "
            f"{html.escape(str(report['machine']['processor']))}</p>"
            f"<pre>{table}</pre>" + "".join(f"<div>{p}</div>" for p in plots) +
            "</body></html>\n")


def write_outputs(report: dict[str, Any], out_dir: str | os.PathLike[str]
                  ) -> dict[str, Path]:
    """bench.json, bench.html and bench.txt (the printed table) in ``out_dir``."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    paths = {"json": d / "bench.json", "html": d / "bench.html", "txt": d / "bench.txt"}
    atomic_write(paths["json"], (json.dumps(report, indent=1) + "\n").encode())
    atomic_write(paths["html"], render_html(report).encode())
    atomic_write(paths["txt"], (format_table(report) + "\n").encode())
    return paths
