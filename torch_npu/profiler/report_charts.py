"""Inline SVG charts for the profiling report: no scripts, no network, they render anywhere HTML does."""

from html import escape

__all__ = ["COLORS", "horizontal_bars", "stacked_columns", "line_chart"]

COLORS = {
    "computing": "#2f6fdf",
    "communication": "#f08c00",
    "free": "#b8bec6",
    "allocated": "#2f6fdf",
    "reserved": "#d6336c",
    "bar": "#2f6fdf",
    "fallback": "#e8590c",
}
_FONT = 'font-family="sans-serif" font-size="12"'


def _svg(width, height, body, label):
    return (
        f'<svg class="chart" role="img" aria-label="{escape(label)}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">{body}</svg>'
    )


def _fmt(value):
    return f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"


def horizontal_bars(items, label, unit="us", width=760, color=COLORS["bar"]):
    """One bar per (name, value), longest first as given."""
    row, left, right = 22, 230, 110
    height = row * len(items) + 10
    top = max((v for _, v in items), default=0) or 1
    parts = []
    for i, (name, value) in enumerate(items):
        y = 5 + i * row
        w = max(1.0, (width - left - right) * value / top)
        parts.append(
            f'<text x="{left - 6}" y="{y + 15}" text-anchor="end" {_FONT}>{escape(name[:34])}</text>'
            f'<rect x="{left}" y="{y + 3}" width="{w:.1f}" height="{row - 6}" fill="{color}"/>'
            f'<text x="{left + w + 6:.1f}" y="{y + 15}" {_FONT}>{_fmt(value)} {unit}</text>'
        )
    return _svg(width, height, "".join(parts), label)


def stacked_columns(columns, keys, label, unit="us", width=760, height=260):
    """One column per (name, {key: value}), segments stacked in `keys` order, with a legend."""
    left, bottom, top_pad = 70, 40, 30
    plot_h = height - bottom - top_pad
    top = max((sum(v.get(k, 0) for k in keys) for _, v in columns), default=0) or 1
    slot = (width - left - 10) / max(1, len(columns))
    bar_w = max(2.0, min(48.0, slot * 0.7))
    parts = [
        f'<line x1="{left}" y1="{top_pad + plot_h}" x2="{width - 10}" y2="{top_pad + plot_h}" stroke="#555"/>',
        f'<text x="{left - 6}" y="{top_pad + 4}" text-anchor="end" {_FONT}>{_fmt(top)}</text>',
        f'<text x="{left - 6}" y="{top_pad + plot_h}" text-anchor="end" {_FONT}>0 {unit}</text>',
    ]
    for i, key in enumerate(keys):
        parts.append(
            f'<rect x="{left + i * 150}" y="6" width="12" height="12" fill="{COLORS[key]}"/>'
            f'<text x="{left + i * 150 + 16}" y="16" {_FONT}>{escape(key)}</text>'
        )
    every = max(1, len(columns) // 20)
    for i, (name, values) in enumerate(columns):
        x = left + i * slot + (slot - bar_w) / 2
        y = top_pad + plot_h
        for key in keys:
            h = plot_h * values.get(key, 0) / top
            if h > 0:
                y -= h
                parts.append(
                    f'<rect class="seg-{key}" x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                    f'fill="{COLORS[key]}"><title>{escape(str(name))} {key}: {_fmt(values[key])} {unit}</title></rect>'
                )
        if i % every == 0:
            parts.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{top_pad + plot_h + 16}" text-anchor="middle" '
                f"{_FONT}>{escape(str(name))}</text>"
            )
    return _svg(width, height, "".join(parts), label)


def line_chart(series, label, x_unit="ms", y_unit="MB", width=760, height=260):
    """series: {name: [(x, y), ...]} drawn as step lines sharing the axes, with a legend."""
    left, bottom, top_pad = 70, 40, 30
    plot_w, plot_h = width - left - 20, height - bottom - top_pad
    points = [p for values in series.values() for p in values]
    if not points:
        return _svg(width, 40, f'<text x="10" y="25" {_FONT}>no data</text>', label)
    x0, x1 = min(p[0] for p in points), max(p[0] for p in points)
    y1 = max(p[1] for p in points) or 1
    span = (x1 - x0) or 1

    def xy(x, y):
        return left + plot_w * (x - x0) / span, top_pad + plot_h * (1 - y / y1)

    parts = [
        f'<line x1="{left}" y1="{top_pad + plot_h}" x2="{left + plot_w}" y2="{top_pad + plot_h}" stroke="#555"/>',
        f'<line x1="{left}" y1="{top_pad}" x2="{left}" y2="{top_pad + plot_h}" stroke="#555"/>',
        f'<text x="{left - 6}" y="{top_pad + 4}" text-anchor="end" {_FONT}>{_fmt(y1)} {y_unit}</text>',
        f'<text x="{left - 6}" y="{top_pad + plot_h}" text-anchor="end" {_FONT}>0</text>',
        f'<text x="{left + plot_w}" y="{top_pad + plot_h + 16}" text-anchor="end" {_FONT}>{_fmt(span)} {x_unit}</text>',
    ]
    for i, (name, values) in enumerate(series.items()):
        color = COLORS.get(name, "#333")
        path, previous = [], None
        for x, y in values:
            px, py = xy(x, y)
            if previous is not None:
                path.append(f"L{px:.1f},{previous:.1f}")
            path.append(f"{'M' if not path else 'L'}{px:.1f},{py:.1f}")
            previous = py
        parts.append(
            f'<path class="line-{escape(name)}" d="{" ".join(path)}" fill="none" stroke="{color}" '
            f'stroke-width="2"/>'
        )
        parts.append(
            f'<rect x="{left + 10 + i * 150}" y="6" width="12" height="12" fill="{color}"/>'
            f'<text x="{left + 26 + i * 150}" y="16" {_FONT}>{escape(name)}</text>'
        )
    return _svg(width, height, "".join(parts), label)
