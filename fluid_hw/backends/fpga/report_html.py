"""``report.html``: the build report as one self-contained page, from ``report.json``
alone (plots are PNGs made with matplotlib and embedded as base64).

Sections: the model and target; a summary (Fmax and timing, throughput and latency at
Fmax, initiation interval, bit-exactness, accuracy); the per-layer table (op, shapes,
folding, cycles, II, estimated resources); utilisation of the device; estimate vs
actual per resource; the critical path; accuracy (float / golden int8 / hardware
int8); measured vs estimated timing; tool times.  Every key may be absent (a step
that has not run): its section then says which command fills it in.
"""

from __future__ import annotations

import base64
import html
import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .report import read_report

__all__ = ["render_report", "write_report_html", "REPORT_HTML"]

REPORT_HTML = "report.html"

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;
max-width:1100px;color:#1d2330;line-height:1.4}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:1.8em;
border-bottom:1px solid #d8dce6;padding-bottom:.2em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}
th,td{border:1px solid #d8dce6;padding:.25em .6em;text-align:right}
th{background:#f2f4f8}td.l,th.l{text-align:left}
.cards{display:flex;flex-wrap:wrap;gap:.8em}.card{border:1px solid #d8dce6;
border-radius:6px;padding:.6em 1em;min-width:11em}.card .v{font-size:1.35em;
font-weight:600}.card .k{color:#5b6477;font-size:.85em}
.ok{color:#137333}.bad{color:#b3261e}.muted{color:#5b6477}
code{background:#f2f4f8;padding:0 .25em;border-radius:3px}
img{max-width:100%}
"""


def _e(v: Any) -> str:
    return html.escape(str(v))


def _num(v: Any, fmt: str = "{:,.0f}", missing: str = "—") -> str:
    if v is None:
        return missing
    try:
        return fmt.format(v)
    except (TypeError, ValueError):
        return _e(v)


def _missing(what: str, command: str) -> str:
    return f'<p class="muted">No {_e(what)} yet: run <code>{_e(command)}</code>.</p>'


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode()
    return f'<img alt="plot" src="data:image/png;base64,{data}">'


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]], left: int = 1) -> str:
    th = "".join(f'<th class="{"l" if k < left else ""}">{_e(h)}</th>'
                 for k, h in enumerate(head))
    body = []
    for r in rows:
        body.append("<tr>" + "".join(
            f'<td class="{"l" if k < left else ""}">{c}</td>' for k, c in enumerate(r))
            + "</tr>")
    return f"<table><tr>{th}</tr>{''.join(body)}</table>"


def _card(key: str, value: str, cls: str = "") -> str:
    return (f'<div class="card"><div class="k">{_e(key)}</div>'
            f'<div class="v {cls}">{value}</div></div>')


# ---- sections --------------------------------------------------------------------------

def _summary(r: Mapping[str, Any]) -> str:
    cards = []
    fmax = r.get("fmax_mhz")
    bit = r.get("bitstream") or {}
    clock = bit.get("clock_mhz", r.get("clock_mhz"))
    if fmax is not None:
        met = r.get("timing_met")
        cards.append(_card("Fmax", f"{_num(fmax, '{:.1f}')} MHz"))
        cards.append(_card(f"timing at {_num(clock, '{:.2f}')} MHz",
                           "met" if met else "NOT met", "ok" if met else "bad"))
    est = r.get("estimate") or {}
    meas = r.get("measured") or {}
    ii = meas.get("initiation_interval") or est.get("initiation_interval")
    if ii is not None:
        cards.append(_card("initiation interval" + (" (measured)" if meas else " (estimate)"),
                           f"{_num(ii)} cycles"))
    thr = r.get("throughput_per_s")
    lat = r.get("latency_us")
    at = "at Fmax" if fmax is not None else f"at {_num(r.get('clock_mhz'), '{:g}')} MHz"
    if thr is not None:
        cards.append(_card(f"throughput {at}", f"{_num(thr)} /s"))
    if lat is not None:
        cards.append(_card(f"latency {at}", f"{_num(lat, '{:.2f}')} µs"))
    if meas.get("sequences_per_s") is not None:  # a sequence design, this run's lengths
        cards.append(_card(f"sequences/s at {_num(meas.get('clock_mhz'), '{:.1f}')} MHz "
                           f"(mean length {_num(meas.get('mean_steps_per_sequence'), '{:.1f}')})",
                           f"{_num(meas['sequences_per_s'])} /s"))
    if "bit_exact" in r:
        ok = bool(r["bit_exact"])
        cards.append(_card(f"bit-exact ({_num(r.get('inputs'))} inputs)",
                           "yes" if ok else f"NO: {_num(r.get('mismatches'))} mismatches",
                           "ok" if ok else "bad"))
    acc = r.get("accuracy") or {}
    if acc.get("hardware_int8") is not None:
        cards.append(_card("hardware int8 accuracy", f"{100 * acc['hardware_int8']:.2f} %"))
    cards += _bound_cards(r)
    if not cards:
        return _missing("results", "fluid-hw compile MODEL --out BUILD_DIR")
    return f'<div class="cards">{"".join(cards)}</div>'


def _bound_cards(r: Mapping[str, Any]) -> list[str]:
    """The design against the device's multiplier bound: the automatic folding's
    estimate (and what binds), and the bitstream's figure at Fmax."""
    cards = []
    b = (r.get("autofold") or {}).get("bound")
    if b:
        cards.append(_card(f"vs multiplier bound (estimate, {_num(b.get('clock_mhz'), '{:g}')}"
                           " MHz)", f"{100 * b['throughput_vs_multiplier_bound']:.0f} % "
                           f"(II {_num(b['initiation_interval'])} vs "
                           f"{_num(b['bound_ii'], '{:.1f}')})"))
        used = f"{_num(b['multipliers_used'])}" + (
            f" ({_num(b['lut_multipliers'])} in LUTs)" if b.get("lut_multipliers") else "")
        cards.append(_card("multipliers used, busy",
                           f"{used}, {100 * b['multiplier_efficiency']:.0f} %"))
        cards.append(_card("what binds the folding", _e(str(b.get("binding", "—")))))
    goals = (r.get("bitstream") or {}).get("goals") or {}
    if goals.get("throughput_vs_multiplier_bound") is not None:
        cards.append(_card("vs multiplier bound at Fmax",
                           f"{100 * goals['throughput_vs_multiplier_bound']:.0f} %"))
    return cards


def _layers(r: Mapping[str, Any]) -> str:
    stages = r.get("stages")
    if not stages:
        return _missing("stages", "fluid-hw compile")
    rows = []
    for s in stages:
        f = s.get("folding") or {}
        fold = (f"{f['pe']} x {f['simd']}" if "pe" in f else
                ", ".join(f"{k} {v}" for k, v in f.items()) or "—")
        sh = s.get("shape") or {}
        shape = (f"{sh['mw']} → {sh['mh']}" if "mw" in sh else
                 f"{sh.get('in')} → {sh.get('out')}" if sh else "—")
        e = s.get("estimate") or {}
        rows.append([_e(s.get("name", "?")), _e(s.get("op", "?")), _e(shape), _e(fold),
                     _num(e.get("cycles")), _num(e.get("ii")), _num(e.get("lut")),
                     _num(e.get("ff")), _num(e.get("dsp")), _num(e.get("bram"))])
    return _table(["layer", "op", "shape", "PE x SIMD", "cycles", "II", "LUT", "FF", "DSP",
                   "BRAM"], rows, left=4)


def _utilisation(r: Mapping[str, Any], plt: Any) -> str:
    used = r.get("resources_used")
    avail = r.get("resources_available")
    if not used or not avail:
        return _missing("utilisation", "fluid-hw bitstream BUILD_DIR")
    keys = [k for k in ("lut", "ff", "dsp", "bram", "spram", "pll", "io") if avail.get(k)]
    rows = [[_e(k), _num(used.get(k, 0)), _num(avail[k]),
             _num(100 * used.get(k, 0) / avail[k], "{:.1f} %")] for k in keys]
    out = _table(["resource", "used", "available", "utilisation"], rows)
    if plt is not None and keys:
        fig, ax = plt.subplots(figsize=(7, 0.45 * len(keys) + 0.8))
        pct = [100 * used.get(k, 0) / avail[k] for k in keys]
        colors = ["#b3261e" if p > 100 else "#d98e04" if p > 85 else "#3366cc" for p in pct]
        ax.barh(keys, [min(p, 100) for p in pct], color=colors)
        ax.barh(keys, [100] * len(keys), fill=False, edgecolor="#8893a7")
        for y, p in enumerate(pct):
            ax.text(min(p, 100) + 1, y, f"{p:.1f} %", va="center", fontsize=8)
        ax.set_xlim(0, 115)
        ax.invert_yaxis()
        ax.set_xlabel(f"% of {(r.get('bitstream') or {}).get('device', 'the device')}")
        out += _png(fig)
    return out


def _estimate_vs_actual(r: Mapping[str, Any], plt: Any) -> str:
    cmp_ = r.get("resources_estimate_vs_actual")
    if not cmp_:
        est = (r.get("estimate") or {}).get("resources")
        if est:
            return (_table(["resource", "estimate"], [[_e(k), _num(v)] for k, v in est.items()])
                    + _missing("measured resources", "fluid-hw bitstream BUILD_DIR"))
        return _missing("estimates", "fluid-hw compile")
    rows = []
    for k, v in cmp_.items():
        err = v.get("error_pct")
        cls = "" if err is None else ("ok" if abs(err) <= 25 else "bad")
        rows.append([_e(k), _num(v.get("estimate")), _num(v.get("actual")),
                     _num(v.get("placed")),
                     f'<span class="{cls}">{_num(err, "{:+.1f} %")}</span>'])
    out = _table(["resource", "estimate", "Yosys", "nextpnr", "error"], rows)
    if plt is not None:
        keys = [k for k, v in cmp_.items() if v.get("actual") is not None]
        if keys:
            import numpy as np

            fig, axes = plt.subplots(1, len(keys), figsize=(2.2 * len(keys), 2.6))
            axes = np.atleast_1d(axes)
            for ax, k in zip(axes, keys):
                v = cmp_[k]
                ax.bar(["estimate", "Yosys"], [v.get("estimate") or 0, v.get("actual") or 0],
                       color=["#8893a7", "#3366cc"])
                ax.set_title(k, fontsize=9)
                ax.tick_params(labelsize=7)
            fig.tight_layout()
            out += _png(fig)
    return out


def _timing(r: Mapping[str, Any]) -> str:
    if "fmax_mhz" not in r:
        return _missing("timing", "fluid-hw bitstream BUILD_DIR")
    bit = r.get("bitstream") or {}
    met = r.get("timing_met")
    parts = [f"<p>Fmax <b>{_num(r.get('fmax_mhz'), '{:.2f}')} MHz</b> against "
             f"{_num(bit.get('clock_mhz'), '{:.3f}')} MHz: "
             f'<b class="{"ok" if met else "bad"}">{"met" if met else "NOT met"}</b>.</p>']
    cp = r.get("critical_path") or {}
    if cp:
        parts.append(f"<p>Critical path ({_e(cp.get('from_clock', ''))} → "
                     f"{_e(cp.get('to_clock', ''))}), {_num(cp.get('delay_ns'), '{:.2f}')} ns: "
                     f"<code>{_e(cp.get('start', ''))}</code> → "
                     f"<code>{_e(cp.get('end', ''))}</code></p>")
        steps = cp.get("steps") or []
        rows = [[_e(s.get("type", "")), f"<code>{_e(s.get('to', ''))}</code>",
                 _num(s.get("delay_ns"), "{:.3f}")]
                for s in steps if s.get("delay_ns", 0) > 0 or s.get("type") == "setup"]
        if rows:
            parts.append(_table(["step", "to", "ns"], rows, left=2))
    return "".join(parts)


def _accuracy(r: Mapping[str, Any], plt: Any) -> str:
    acc = r.get("accuracy") or {}
    out = []
    if "bit_exact" in r:
        ok = r["bit_exact"]
        out.append(f'<p>Hardware vs golden int8 model: <b class="{"ok" if ok else "bad"}">'
                   f'{"bit-exact" if ok else "NOT bit-exact"}</b> on '
                   f"{_num(r.get('inputs'))} inputs ({_num(r.get('mismatches'))} "
                   "mismatching outputs).</p>")
    keys = [k for k in ("float", "golden_int8", "hardware_int8") if acc.get(k) is not None]
    if keys:
        out.append(_table(["model", "accuracy"],
                          [[_e(k), f"{100 * acc[k]:.2f} %"] for k in keys]))
        if plt is not None:
            fig, ax = plt.subplots(figsize=(4.5, 2.4))
            vals = [100 * acc[k] for k in keys]
            ax.bar(keys, vals, color=["#8893a7", "#d98e04", "#3366cc"][:len(keys)])
            ax.set_ylim(max(0, min(vals) - 10), 100)
            ax.set_ylabel("accuracy %")
            for x, v in enumerate(vals):
                ax.text(x, v, f"{v:.1f}", ha="center", va="bottom", fontsize=8)
            out.append(_png(fig))
    return "".join(out) or _missing("accuracy", "fluid-hw simulate BUILD_DIR --inputs X.npy "
                                    "--labels Y.npy")


def _measured(r: Mapping[str, Any]) -> str:
    est = r.get("estimate") or {}
    meas = r.get("measured") or {}
    if not est and not meas:
        return _missing("timing figures", "fluid-hw compile")
    rows = []
    for k in ("initiation_interval", "latency_cycles", "cycles_per_inference"):
        e, m = est.get(k), meas.get(k)
        err = None if e is None or not m else 100 * (e - m) / m
        rows.append([_e(k.replace("_", " ")), _num(e), _num(m), _num(err, "{:+.1f} %")])
    if meas.get("cycles_per_step") is not None:  # a sequence design (docs/recurrent.md)
        e, m = meas.get("estimated_cycles_per_step"), meas["cycles_per_step"]
        err = None if e is None or not m else 100 * (e - m) / m
        rows.append(["cycles per time step", _num(e), _num(m, "{:.2f}"),
                     _num(err, "{:+.1f} %")])
    out = _table(["", "estimate", "measured", "error"], rows)
    if not meas:
        out += _missing("measurements", "fluid-hw simulate BUILD_DIR")
    return out


def _tools(r: Mapping[str, Any]) -> str:
    bit = r.get("bitstream") or {}
    secs = bit.get("seconds") or {}
    if not secs:
        return _missing("tool times", "fluid-hw bitstream BUILD_DIR")
    rows = [[_e(k), _num(v, "{:.1f} s")] for k, v in secs.items()]
    logs = bit.get("logs") or {}
    text = ", ".join(f"<code>{_e(v)}</code>" for v in logs.values())
    uart = bit.get("uart") or {}
    extra = (f"<p>UART bridge: {_num(uart.get('baud'))} baud, divisor "
             f"{_num(uart.get('divisor'))}.</p>" if uart else "")
    return _table(["step", "time"], rows) + (f"<p>Logs: {text}</p>" if text else "") + extra


def render_report(report: Mapping[str, Any], title: str | None = None) -> str:
    """The HTML page of a ``report.json`` (a dict)."""
    r = dict(report)
    plt = _pyplot()
    name = title or f"fluid-hw build report: {r.get('model') or 'model'}"
    bit = r.get("bitstream") or {}
    facts = [f"target <b>{_e(r.get('target', '—'))}</b>",
             f"weights <b>{_e(r.get('weights', '—'))}</b>",
             f"clock {_num(r.get('clock_mhz'), '{:g}')} MHz"]
    if bit.get("board"):
        facts.append(f"board <b>{_e(bit['board'])}</b> ({_e(bit.get('device', ''))})")
    if bit.get("file"):
        facts.append(f"bitstream <code>{_e(bit['file'])}</code>")
    if r.get("design_hash"):
        facts.append(f"design <code>{_e(str(r['design_hash'])[:12])}</code>")
    if r.get("folding"):
        lut = (r.get("autofold") or {}).get("lut_mults") or {}
        fold = ", ".join(f"{_e(k)} {v.get('pe')}x{v.get('simd')}"
                         + (f" ({_num(lut[k])} in LUTs)" if lut.get(k) else "")
                         for k, v in r["folding"].items() if isinstance(v, Mapping))
        facts.append(f"folding {fold}")
    sections = [
        ("Summary", _summary(r)), ("Layers", _layers(r)),
        ("Device utilisation", _utilisation(r, plt)),
        ("Estimate vs actual", _estimate_vs_actual(r, plt)),
        ("Timing", _timing(r)), ("Accuracy and bit-exactness", _accuracy(r, plt)),
        ("Cycles: estimate vs measured", _measured(r)), ("Tools", _tools(r)),
    ]
    if plt is None:
        sections.append(("Note", "<p class='muted'>matplotlib is not installed: no plots "
                                 "(pip install matplotlib).</p>"))
    body = "".join(f"<h2>{_e(t)}</h2>{s}" for t, s in sections)
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_e(name)}"
            f"</title><style>{_CSS}</style></head><body><h1>{_e(name)}</h1>"
            f"<p>{' · '.join(facts)}</p>{body}</body></html>\n")


def write_report_html(build_dir: str | os.PathLike[str],
                      out: str | os.PathLike[str] | None = None) -> Path:
    """Render ``BUILD_DIR/report.json`` into ``BUILD_DIR/report.html`` (or ``out``),
    atomically; returns the path."""
    d = Path(build_dir)
    page = render_report(read_report(d, missing_ok=False))
    path = Path(out) if out is not None else d / REPORT_HTML
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(page)
    os.replace(tmp, path)
    return path
