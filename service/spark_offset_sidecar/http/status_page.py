"""``GET /ui``: the groups' status as one server-rendered HTML page (docs/operate/status.md).

Counts and order come from every readable group's summary (``GroupSummary.rank``); only
the page's groups have their reports built, so a page costs little more at 10,000 groups
than at 50. Pages are answered ``status.ui_max_pages_per_second`` at most, readers in turn
(``Runtime.pages``): a page reloading back to back would take the loop from the events.
No JavaScript, nothing fetched from elsewhere (the Content-Security-Policy forbids both).
A browser cannot send a bearer token: the page takes HTTP Basic, the token as password.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from importlib.resources import files
from operator import attrgetter
from string import Template
from typing import TYPE_CHECKING, Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from spark_offset_sidecar.core.lag.figures import (
    DATA_SEVERITY,
    SPARK_POINTS,
    SPARK_STEP,
    CatchUpState,
    DataStatus,
)
from spark_offset_sidecar.core.lag.report import summary_of
from spark_offset_sidecar.core.lag.status import SEVERITY, Status
from spark_offset_sidecar.errors import Unauthenticated
from spark_offset_sidecar.http.access import caller, reading_of, runtime_of
from spark_offset_sidecar.http.folders import readable_folders
from spark_offset_sidecar.http.status_routes import readable_summaries

if TYPE_CHECKING:
    from spark_offset_sidecar.core.lag.figures import GroupLag, PartitionLag
    from spark_offset_sidecar.core.lag.report import GroupReport, GroupSummary
    from spark_offset_sidecar.core.lag.status import GroupStatus, PartitionStatus
    from spark_offset_sidecar.http.models import FolderView

router = APIRouter(tags=["status"])

BROWSER_CHALLENGE = 'Basic realm="spark-offset-sidecar", charset="UTF-8"'
PARTITIONS_SHOWN = 12  # per group, the laggiest first; the JSON routes have them all
PAGE_SIZE = 50  # groups a page
_COLUMNS = 10
_RANK = attrgetter("rank")  # the worst first (``GroupSummary.rank``)
_DATA_WORDS = {DataStatus.OK: "OK", DataStatus.AT_RISK: "AT RISK", DataStatus.LOST: "LOST"}
_DATA_SHOWN = [d for d in reversed(DATA_SEVERITY) if d is not DataStatus.OK]  # the worst first
# The page around its rows and its style: status_page.html, package data read once.
_PAGE = Template(
    files("spark_offset_sidecar.http").joinpath("status_page.html").read_text(encoding="utf-8")
)
HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@router.get("/ui", response_class=HTMLResponse)
async def status_page(
    request: Request,
    q: Annotated[str, Query(max_length=200, description="part of a group's name")] = "",
    status: Annotated[str, Query(max_length=20, description="a status or data status")] = "",
    page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
) -> HTMLResponse:
    """Every group this token may read, worst first, a page at a time, as an HTML page
    that refreshes itself."""
    try:
        grant = await caller(request, event=False)
    except Unauthenticated as exc:
        raise Unauthenticated(str(exc), challenge=BROWSER_CHALLENGE) from None
    runtime, reading = runtime_of(request), reading_of(request)
    await runtime.pages.turn()
    summaries = await readable_summaries(request, grant)
    folders = await readable_folders(request, grant)
    refresh = max(5, round(runtime.settings.status.lag_read_interval_seconds))
    _, read_at = reading.reports.as_of(summaries)
    arranged = Arranged.of(summaries, PageView(q, status.upper(), page))
    shown = in_rank_order(await reading.reports.every(arranged.shown))  # gone since: left out
    html = render_page(
        arranged, shown, runtime.clock(), read_at, refresh, folders, runtime.problems()
    )
    return HTMLResponse(html, headers=HEADERS)


def in_rank_order(reports: Sequence[GroupReport]) -> list[GroupReport]:
    """The page's rows, the worst first by what each row shows. The summaries that chose
    the page may be an evaluation older than its reports (one can end between the two
    reads, under load): a row's place then still agrees with its badge."""
    return sorted(reports, key=lambda report: summary_of(report).rank)


@dataclass(frozen=True)
class PageView:
    """What the reader asked for: a filter by name and by status, and a page."""

    q: str = ""
    status: str = ""  # a Burrow status, a data status, or "" for every group
    page: int = 1

    @property
    def keeps_all(self) -> bool:
        return not (self.q or self.status)

    def keeps(self, group: GroupSummary) -> bool:
        if self.q and self.q not in group.group_id:
            return False
        if not self.status:
            return True
        data = group.data_status.value if group.data_status is not None else ""
        return self.status in (group.status.value, data)

    def link(self, page: int) -> str:
        return "?" + urlencode({"q": self.q, "status": self.status, "page": page})


@dataclass(frozen=True)
class Arranged:
    """The groups as a page shows them: counted by status and data status, those the
    view keeps in order, and the ids of the page's groups."""

    view: PageView
    total: int  # groups the token may read
    counts: Counter[Status]
    data_counts: Counter[DataStatus | None]
    kept: int  # groups the filter keeps
    page: int
    pages: int
    shown: list[str]  # the page's groups, worst first

    @classmethod
    def of(cls, summaries: Sequence[GroupSummary], view: PageView) -> Arranged:
        counts = Counter(map(attrgetter("status"), summaries))
        data_counts = Counter(map(attrgetter("data_status"), summaries))
        kept = summaries if view.keeps_all else [g for g in summaries if view.keeps(g)]
        kept = sorted(kept, key=_RANK)
        pages = max(1, -(-len(kept) // PAGE_SIZE))
        page = min(view.page, pages)
        shown = [g.group_id for g in kept[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]]
        return cls(view, len(summaries), counts, data_counts, len(kept), page, pages, shown)


def render_page(
    arranged: Arranged,
    reports: Sequence[GroupReport],
    now: float,
    read_at: float | None,
    refresh: int,
    folders: Sequence[FolderView] = (),
    problems: Sequence[str] = (),
) -> str:
    """The page of ``arranged``, whose shown groups' ``reports`` are given in order."""
    view, counts, data_counts = arranged.view, arranged.counts, arranged.data_counts
    by_status = [(s.value, s.value, counts[s]) for s in reversed(SEVERITY)]
    by_data = [(d.value, _DATA_WORDS[d], data_counts[d]) for d in _DATA_SHOWN]
    chips = "".join(
        f'<a class="badge {value}" href="{escape(PageView(view.q, value).link(1))}">'
        f"{label} {count}</a>"
        for value, label, count in by_status + by_data
        if count
    )
    read = f"log ends read {_ago(now, read_at)}" if read_at else "log ends not read yet"
    rows = "".join(_group(report, now) for report in reports)
    if not rows:
        empty = "No group matches." if arranged.total else "No group yet."
        rows = f'<tbody><tr><td colspan="{_COLUMNS}" class="empty">{empty}</td></tr></tbody>'
    return _PAGE.substitute(
        refresh=refresh,
        total=arranged.total,
        read=read,
        now=_utc(now),
        problems="".join(f'<p class="problem">{escape(problem)}</p>' for problem in problems),
        chips=chips,
        filter=_filter(view),
        pager=_pager(view, arranged.page, arranged.pages, arranged.kept),
        rows=rows,
        folders=_folders(folders, now),
    )


def _group(report: GroupReport, now: float) -> str:
    status, pending = report.status, report.pending
    by_reason = ", ".join(
        f"{escape(reason)} &times;{count}"
        for reason, count in sorted(report.live.counters.failed.items())
        if count
    )
    failures = by_reason or "none"
    if status.consecutive_failures:
        failures = f"<b>{status.consecutive_failures} in a row</b><br>{failures}"
    if report.live.waiting:
        failures += f'<div class="sub">commit waits: {escape(report.live.waiting)}</div>'
    # No lag to speak of before a first commit.
    lag = _count(status.total_lag, "unknown") if status.partitions else "&ndash;"
    committed = (
        f'{_ago(now, status.last_commit_at)}<div class="sub">{_utc(status.last_commit_at)}</div>'
        if status.last_commit_at
        else "never"
    )
    query_id = escape(status.query_id) if status.query_id else "released"
    if report.cluster is not None:  # a group on another cluster than the default one
        query_id += f" &middot; Kafka cluster {escape(report.cluster)}"
    figures = report.lag
    time_lag = figures.lag_seconds if figures is not None else None
    return f"""<tbody class="group {status.status.value}">
<tr><td><b class="name">{escape(status.group_id)}</b><div class="sub">query {query_id}</div></td>
<td><span class="badge {status.status.value}">{status.status.value}</span></td>
<td>{_data(figures)}</td>
<td class="num">{lag}</td><td class="num">{_duration(time_lag, "unknown")}</td>
<td>{_catch_up(figures)}</td><td>{_sparkline(figures, now)}</td>
<td>{committed}</td><td>{failures}</td>
<td class="num">{pending}</td></tr>
<tr class="partitions"><td colspan="{_COLUMNS}">{_partitions(status, figures)}</td></tr>
</tbody>
"""


def _data(lag: GroupLag | None) -> str:
    if lag is None:
        return "&ndash;"
    badge = f'<span class="badge {lag.data_status.value}">{_DATA_WORDS[lag.data_status]}</span>'
    notes = []
    if lag.lost_total:
        notes.append(f"{lag.lost_total:,} records lost")
    margin = lag.margin_seconds
    if margin is not None:
        notes.append(f"deleted in ~{_duration(margin)}")
    return badge + "".join(f'<div class="sub">{n}</div>' for n in notes)


def _catch_up(lag: GroupLag | None) -> str:
    if lag is None:
        return "&ndash;"
    c = lag.catch_up
    if c.state is CatchUpState.CAUGHT_UP:
        text = "caught up"
    elif c.state is CatchUpState.CATCHING_UP and c.eta_seconds is not None:
        text = f"<b>in ~{_duration(c.eta_seconds)}</b>"
    elif c.state is CatchUpState.FALLING_BEHIND and c.lag_rate is not None:
        text = f"<b class='bad'>falling behind</b> +{c.lag_rate:,.0f}/s"
    elif c.state is CatchUpState.STALLED:
        text = "<b class='bad'>not consuming</b>"
    else:
        text = "not known yet"
    rates = []
    if c.consume_rate is not None and c.produce_rate is not None:
        rates.append(f"reads {c.consume_rate:,.0f}/s, {c.produce_rate:,.0f}/s arrive")
    job = c.job
    if job is not None and job.processed_rows_per_second is not None:
        rates.append(f"job can do {job.processed_rows_per_second:,.0f} rows/s")
    return text + "".join(f'<div class="sub">{r}</div>' for r in rates)


def _sparkline(lag: GroupLag | None, now: float) -> str:
    """The last hour of the group's lag, a point a minute, as an inline SVG line."""
    points = lag.trend if lag is not None else ()
    if len(points) < 2:
        return '<span class="sub">&ndash;</span>'
    width, height = 120, 24
    top = max(v for _, v in points) or 1
    start = now - SPARK_POINTS * SPARK_STEP
    xy = " ".join(
        f"{max(0.0, (t - start) / (SPARK_POINTS * SPARK_STEP)) * width:.1f},"
        f"{height - 1 - (v / top) * (height - 2):.1f}"
        for t, v in points
    )
    last = points[-1][1]
    return (
        f'<svg class="spark" width="{width}" height="{height}" role="img" '
        f'aria-label="lag over the last hour, now {last:,}, peak {top:,}">'
        f'<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{xy}"/></svg>'
        f'<div class="sub">peak {top:,}</div>'
    )


def _filter(view: PageView) -> str:
    options = "".join(
        f'<option value="{v}"{" selected" if v == view.status else ""}>{label}</option>'
        for v, label in [("", "every status")]
        + [(s.value, s.value) for s in SEVERITY]
        + [(d.value, _DATA_WORDS[d]) for d in reversed(_DATA_SHOWN)]
    )
    return (
        '<form class="filter" method="get" action="">'
        f'<input name="q" value="{escape(view.q)}" placeholder="group name contains" size="30">'
        f'<select name="status">{options}</select> <button type="submit">Filter</button>'
        "</form>"
    )


def _pager(view: PageView, page: int, pages: int, groups: int) -> str:
    if pages == 1:
        return f'<p class="pager">{groups:,} groups</p>'
    parts = []
    if page > 1:
        parts.append(f'<a href="{escape(view.link(page - 1))}">&larr; previous</a>')
    parts.append(f"page {page} of {pages} ({groups:,} groups)")
    if page < pages:
        parts.append(f'<a href="{escape(view.link(page + 1))}">next &rarr;</a>')
    return f'<p class="pager">{" &middot; ".join(parts)}</p>'


def _duration(seconds: float | None, unknown: str = "?") -> str:
    """``seconds`` as a person says it: 42 s, 4 min 10 s, 25 min, 3 h 5 min, 2 d 4 h."""
    if seconds is None:
        return unknown
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        minutes, rest = divmod(whole, 60)
        return f"{minutes} min {rest} s" if minutes < 10 else f"{minutes} min"
    if whole < 86400:
        hours, rest = divmod(whole, 3600)
        return f"{hours} h {rest // 60} min"
    days, rest = divmod(whole, 86400)
    return f"{days} d {rest // 3600} h"


def _folders(folders: Sequence[FolderView], now: float) -> str:
    """The followed folders, failing ones first; nothing when none is followed."""
    if not folders:
        return ""
    rows = "".join(
        f"""<tr class="{"failing" if f.last_error else ""}">
<td><b>{escape(f.path)}</b><div class="sub">group {escape(f.group_id)}</div></td>
<td>{_reading(f)}</td>
<td class="num">{_count(f.last_batch_recorded)} / {_count(f.newest_batch_in_folder)}</td>
<td>{_ago(now, f.last_poll_at) if f.last_poll_at else "never"}</td>
<td>{_folder_errors(f)}</td></tr>"""
        for f in sorted(folders, key=lambda f: (f.last_error is None, f.path))
    )
    return f"""<h2>Followed checkpoint folders</h2>
<table class="groups folders">
<thead><tr><th>Folder</th><th>Reading</th><th class="num">Batch recorded / newest</th>
<th>Last good poll</th><th>Errors</th></tr></thead>
<tbody>{rows}</tbody>
</table>"""


def _reading(folder: FolderView) -> str:
    if not folder.reading:
        return "not read here" if folder.read_by is None else "no"
    return "yes" if folder.read_by is None else f"by {escape(folder.read_by)}"


def _count(value: int | None, unknown: str = "&ndash;") -> str:
    return unknown if value is None else f"{value:,}"


def _folder_errors(folder: FolderView) -> str:
    counts = ", ".join(f"{escape(r)} &times;{n}" for r, n in sorted(folder.errors.items()))
    last = f'<div class="error">{escape(folder.last_error)}</div>' if folder.last_error else ""
    return (counts or "none") + last


def _partitions(status: GroupStatus, lag: GroupLag | None = None) -> str:
    if not status.partitions:
        return "<span class='sub'>Nothing committed yet.</span>"
    figures = {(p.topic, p.partition): p for p in lag.partitions} if lag is not None else {}
    shown = sorted(status.partitions, key=lambda p: (-(p.current_lag or 0), p.topic, p.partition))
    rows = "".join(
        _partition_row(p, figures.get((p.topic, p.partition))) for p in shown[:PARTITIONS_SHOWN]
    )
    more = len(shown) - PARTITIONS_SHOWN
    if more > 0:
        rows += f"<tr><td colspan='8' class='sub'>and {more} more partitions</td></tr>"
    return (
        "<table class='parts'><tr><th>Topic</th><th class='num'>Partition</th>"
        "<th class='num'>Committed</th><th class='num'>Log start</th><th class='num'>Log end</th>"
        "<th class='num'>Lag</th><th class='num'>Time lag</th><th>Status</th></tr>"
        f"{rows}</table>"
    )


def _partition_row(p: PartitionStatus, figures: PartitionLag | None) -> str:
    start = _count(figures.log_start if figures is not None else None, "?")
    if figures is not None and figures.lost:
        start = f"<b class='bad' title='{figures.lost:,} records lost'>{start}</b>"
    seconds = figures.lag_seconds if figures is not None else None
    return (
        f"<tr><td>{escape(p.topic)}</td><td class='num'>{p.partition}</td>"
        f"<td class='num'>{p.offset:,}</td><td class='num'>{start}</td>"
        f"<td class='num'>{_count(p.log_end, '?')}</td>"
        f"<td class='num'>{_count(p.current_lag, '?')}</td>"
        f"<td class='num'>{_duration(seconds)}</td>"
        f"<td><span class='badge small {p.status.value}'>{p.status.value}</span></td></tr>"
    )


def _ago(now: float, then: float | None) -> str:
    if then is None:
        return "never"
    seconds = max(0.0, now - then)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"


def _utc(at: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at)) if at else ""
