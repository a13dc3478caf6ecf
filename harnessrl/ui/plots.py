"""Line charts as inline SVG, drawn on the server: no plotting library and no script in the browser.

Every text that ends up in the SVG (series names, titles) is escaped; numbers are formatted here, and
values that are float noise (``metric_groups.denoise``) are drawn and labelled as 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from harnessrl.ui.metric_groups import denoise

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2")


@dataclass(frozen=True)
class Series:
    name: str
    points: Sequence[tuple[float, float]]
    color: str | None = None


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1000 or abs(v) < 0.01:
        return f"{v:.2e}"
    return f"{v:.3g}"


def _bounds(values: list[float]) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    if lo == hi:
        pad = abs(lo) * 0.1 or 1.0
        return lo - pad, hi + pad
    pad = (hi - lo) * 0.05
    return lo - pad, hi + pad


@dataclass(frozen=True)
class Mark:
    """A labelled vertical line at ``x`` (an evaluation on the reward curve)."""

    x: float
    label: str


def line_chart(title: str, series: Sequence[Series], *, width: int = 460, height: int = 220,
               x_label: str = "step", marks: Sequence[Mark] = ()) -> Markup:
    """An SVG chart of ``series`` (x ascending); a point's tooltip shows its series, x and y."""
    drawn = [Series(s.name, [(x, denoise(y)) for x, y in s.points], s.color) for s in series if s.points]
    left, right, top, bottom = 56, 12, 26, 34
    w, h = width - left - right, height - top - bottom
    out = [f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
           f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>',
           f'<text x="{left}" y="16" class="chart-title">{escape(title)}</text>']
    if not drawn:
        out.append(f'<text x="{left + w / 2}" y="{top + h / 2}" text-anchor="middle" class="chart-empty">'
                   "no data yet</text></svg>")
        return Markup("".join(out))
    xs = [p[0] for s in drawn for p in s.points] + [m.x for m in marks]
    ys = [p[1] for s in drawn for p in s.points]
    x0, x1 = (min(xs), max(xs)) if min(xs) != max(xs) else (min(xs) - 1, max(xs) + 1)
    y0, y1 = _bounds(ys)

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * w

    def py(y: float) -> float:
        return top + (1 - (y - y0) / (y1 - y0)) * h

    out.append(f'<rect x="{left}" y="{top}" width="{w}" height="{h}" class="chart-frame"/>')
    for frac in (0.0, 0.5, 1.0):
        yv = y0 + frac * (y1 - y0)
        out.append(f'<line x1="{left}" x2="{left + w}" y1="{py(yv):.1f}" y2="{py(yv):.1f}" class="chart-grid"/>'
                   f'<text x="{left - 4}" y="{py(yv) + 4:.1f}" text-anchor="end" class="chart-tick">{_fmt(yv)}</text>')
    for xv in (x0, x1):
        out.append(f'<text x="{px(xv):.1f}" y="{top + h + 14}" text-anchor="middle" class="chart-tick">'
                   f"{_fmt(xv)}</text>")
    out.append(f'<text x="{left + w / 2}" y="{height - 4}" text-anchor="middle" class="chart-tick">'
               f"{escape(x_label)}</text>")
    labelled = -1e9  # a mark's label is drawn when it clears the previous one's
    for m in sorted(marks, key=lambda m: m.x):
        x = px(m.x)
        text = ""
        if x - labelled >= 6.5 * len(m.label):
            labelled = x
            end = x + 6 * len(m.label) > left + w  # near the right edge: the label goes left of its line
            anchor = "end" if end else "start"
            text = (f'<text x="{x - 3 if end else x + 3:.1f}" y="{top + h - 4}" text-anchor="{anchor}">'
                    f"{escape(m.label)}</text>")
        out.append(f'<g class="chart-mark" data-x="{_fmt(m.x)}"><line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" '
                   f'y2="{top + h}"/>{text}<title>{escape(m.label)}</title></g>')
    for i, s in enumerate(drawn):
        color = s.color or PALETTE[i % len(PALETTE)]
        pts = sorted(s.points)
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="1.8" '
                   f'data-series="{escape(s.name)}"/>')
        for x, y in pts:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.6" fill="{color}">'
                       f"<title>{escape(s.name)}: {escape(x_label)} {_fmt(x)} = {y:.4g}</title></circle>")
        lx = left + 8 + i * 150
        out.append(f'<rect x="{lx}" y="{top + 4}" width="10" height="3" fill="{color}"/>'
                   f'<text x="{lx + 14}" y="{top + 9}" class="chart-legend">{escape(s.name)}</text>')
    out.append("</svg>")
    return Markup("".join(out))


@dataclass(frozen=True)
class Bar:
    """One stacked bar: ``parts`` are ``(css class, label, value)`` from the bottom up."""

    x: float
    parts: Sequence[tuple[str, str, float]]


def stacked_bars(title: str, bars: Sequence[Bar], *, width: int = 460, height: int = 260, unit: str = "s",
                 x_label: str = "step") -> Markup:
    """An SVG chart of stacked bars (a step's time by phase); each part's colour comes from its CSS class."""
    left, right, top, bottom = 56, 12, 26, 34
    w, h = width - left - right, height - top - bottom
    out = [f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
           f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>',
           f'<text x="{left}" y="16" class="chart-title">{escape(title)}</text>']
    totals = [sum(max(v, 0.0) for _, _, v in b.parts) for b in bars]
    if not bars or max(totals) <= 0:
        out.append(f'<text x="{left + w / 2}" y="{top + h / 2}" text-anchor="middle" class="chart-empty">'
                   "no data yet</text></svg>")
        return Markup("".join(out))
    y1 = max(totals) * 1.05
    slot = w / len(bars)
    out.append(f'<rect x="{left}" y="{top}" width="{w}" height="{h}" class="chart-frame"/>')
    for frac in (0.0, 0.5, 1.0):
        y = top + (1 - frac) * h
        out.append(f'<line x1="{left}" x2="{left + w}" y1="{y:.1f}" y2="{y:.1f}" class="chart-grid"/>'
                   f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end" class="chart-tick">'
                   f"{_fmt(frac * y1)} {escape(unit)}</text>")
    for i, b in enumerate(bars):
        x, base = left + i * slot + slot * 0.15, 0.0
        for css, label, v in b.parts:
            v = max(v, 0.0)
            y_top = top + (1 - (base + v) / y1) * h
            out.append(f'<rect class="{escape(css)}" x="{x:.1f}" y="{y_top:.1f}" width="{slot * 0.7:.1f}" '
                       f'height="{v / y1 * h:.1f}"><title>{escape(x_label)} {_fmt(b.x)}: {escape(label)} '
                       f"{v:.3g} {escape(unit)}</title></rect>")
            base += v
        if len(bars) <= 20 or i % max(1, len(bars) // 10) == 0:
            out.append(f'<text x="{left + (i + 0.5) * slot:.1f}" y="{top + h + 14}" text-anchor="middle" '
                       f'class="chart-tick">{_fmt(b.x)}</text>')
    out.append(f'<text x="{left + w / 2}" y="{height - 4}" text-anchor="middle" class="chart-tick">'
               f"{escape(x_label)}</text></svg>")
    return Markup("".join(out))
