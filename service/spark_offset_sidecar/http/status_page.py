"""``GET /ui``: the groups' status as one server-rendered HTML page, for a person.

What ``GET /v1/status`` says, arranged to be read at a glance: the worst groups first, each
with its Burrow-style status, total lag, last commit, failed commits by reason, pending
checkpoints, and its partitions (committed offset, log end, lag); then the followed
checkpoint folders (``GET /v1/followed-folders``), those failing first, with their errors.
No JavaScript and nothing fetched from elsewhere (the Content-Security-Policy forbids
both); the page reloads itself every lag read (at least every 5 s).

With replicas, every replica renders the reports the groups' owners publish
(``ports.status_board``): the same page whichever replica serves it.

The same tokens and read grants as the JSON routes: a token sees only the groups it may
read. A browser cannot send a bearer token, so the page also takes HTTP Basic with the
token as the password, and asks for it with a Basic challenge.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from spark_offset_sidecar.core.group_status import SEVERITY, severity
from spark_offset_sidecar.errors import Unauthenticated
from spark_offset_sidecar.http.access import caller, runtime_of
from spark_offset_sidecar.http.follow_routes import readable_folders
from spark_offset_sidecar.http.status_routes import as_of, readable_reports

if TYPE_CHECKING:
    from spark_offset_sidecar.core.group_report import GroupReport
    from spark_offset_sidecar.core.group_status import GroupStatus
    from spark_offset_sidecar.http.models import FolderView

router = APIRouter(tags=["status"])

BROWSER_CHALLENGE = 'Basic realm="spark-offset-sidecar", charset="UTF-8"'
PARTITIONS_SHOWN = 12  # per group, the laggiest first; the JSON routes have them all
HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@router.get("/ui", response_class=HTMLResponse)
async def status_page(request: Request) -> HTMLResponse:
    """Every group this token may read, as an HTML page that refreshes itself."""
    try:
        grant = caller(request, event=False)
    except Unauthenticated as exc:
        raise Unauthenticated(str(exc), challenge=BROWSER_CHALLENGE) from None
    runtime = runtime_of(request)
    reports = await readable_reports(request, grant)
    reports.sort(
        key=lambda r: (-severity(r.status.status), -(r.status.total_lag or 0), r.status.group_id)
    )
    folders = await readable_folders(request, grant) if runtime.followed is not None else []
    refresh = max(5, round(runtime.settings.lag_read_interval_seconds))
    _, read_at = as_of(request, reports)
    html = render_page(reports, runtime.clock(), read_at, refresh, folders)
    return HTMLResponse(html, headers=HEADERS)


def render_page(
    reports: list[GroupReport],
    now: float,
    read_at: float | None,
    refresh: int,
    folders: Sequence[FolderView] = (),
) -> str:
    counts = {status: 0 for status in SEVERITY}
    for report in reports:
        counts[report.status.status] += 1
    chips = "".join(
        f'<span class="badge {s.value}">{s.value} {counts[s]}</span>'
        for s in reversed(SEVERITY)
        if counts[s]
    )
    read = f"log ends read {_ago(now, read_at)}" if read_at else "log ends not read yet"
    rows = "".join(_group(report, now) for report in reports)
    if not rows:
        rows = '<tbody><tr><td colspan="6" class="empty">No group yet.</td></tr></tbody>'
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="{refresh}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>spark-offset-sidecar: {len(reports)} groups</title>
<style>{_STYLE}</style>
</head>
<body>
<header>
<h1>spark-offset-sidecar</h1>
<p class="meta">{len(reports)} consumer groups &middot; {read} &middot; as of
{_utc(now)} &middot; reloads every {refresh} s</p>
<p class="chips">{chips}</p>
</header>
<table class="groups">
<thead><tr><th>Consumer group</th><th>Status</th><th class="num">Total lag</th>
<th>Last commit</th><th>Failed commits</th><th class="num">Pending</th></tr></thead>
{rows}
</table>
{_folders(folders, now)}
</body>
</html>
"""


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
    if not status.partitions:  # no lag to speak of before a first commit
        lag = "&ndash;"
    elif status.total_lag is None:
        lag = "unknown"
    else:
        lag = f"{status.total_lag:,}"
    committed = (
        f'{_ago(now, status.last_commit_at)}<div class="sub">{_utc(status.last_commit_at)}</div>'
        if status.last_commit_at
        else "never"
    )
    query_id = escape(status.query_id) if status.query_id else "released"
    return f"""<tbody class="group {status.status.value}">
<tr><td><b class="name">{escape(status.group_id)}</b><div class="sub">query {query_id}</div></td>
<td><span class="badge {status.status.value}">{status.status.value}</span></td>
<td class="num">{lag}</td><td>{committed}</td><td>{failures}</td>
<td class="num">{pending}</td></tr>
<tr class="partitions"><td colspan="6">{_partitions(status)}</td></tr>
</tbody>
"""


def _folders(folders: Sequence[FolderView], now: float) -> str:
    """The followed folders, failing ones first; nothing when none is followed."""
    if not folders:
        return ""
    rows = "".join(
        f"""<tr class="{"failing" if f.last_error else ""}">
<td><b>{escape(f.path)}</b><div class="sub">group {escape(f.group_id)}</div></td>
<td>{_reading(f)}</td>
<td class="num">{_batch(f.last_batch_recorded)} / {_batch(f.newest_batch_in_folder)}</td>
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


def _batch(batch: int | None) -> str:
    return "&ndash;" if batch is None else f"{batch:,}"


def _folder_errors(folder: FolderView) -> str:
    counts = ", ".join(f"{escape(r)} &times;{n}" for r, n in sorted(folder.errors.items()))
    last = f'<div class="error">{escape(folder.last_error)}</div>' if folder.last_error else ""
    return (counts or "none") + last


def _partitions(status: GroupStatus) -> str:
    if not status.partitions:
        return "<span class='sub'>Nothing committed yet.</span>"
    shown = sorted(status.partitions, key=lambda p: (-(p.current_lag or 0), p.topic, p.partition))
    rows = "".join(
        f"<tr><td>{escape(p.topic)}</td><td class='num'>{p.partition}</td>"
        f"<td class='num'>{p.offset:,}</td>"
        f"<td class='num'>{'?' if p.log_end is None else f'{p.log_end:,}'}</td>"
        f"<td class='num'>{'?' if p.current_lag is None else f'{p.current_lag:,}'}</td>"
        f"<td><span class='badge small {p.status.value}'>{p.status.value}</span></td></tr>"
        for p in shown[:PARTITIONS_SHOWN]
    )
    more = len(shown) - PARTITIONS_SHOWN
    if more > 0:
        rows += f"<tr><td colspan='6' class='sub'>and {more} more partitions</td></tr>"
    return (
        "<table class='parts'><tr><th>Topic</th><th class='num'>Partition</th>"
        "<th class='num'>Committed</th><th class='num'>Log end</th>"
        f"<th class='num'>Lag</th><th>Status</th></tr>{rows}</table>"
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


_STYLE = """
body { font: 15px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px 32px;
       color: #1f2328; background: #f6f8fa; }
h1 { font-size: 22px; margin: 0 0 4px; }
.meta { color: #59636e; margin: 0 0 10px; }
.chips .badge { margin-right: 6px; }
table.groups { width: 100%; border-collapse: collapse; background: #fff;
               border: 1px solid #d1d9e0; border-radius: 6px; }
table.groups > thead th { text-align: left; font-size: 13px; color: #59636e;
                          padding: 8px 12px; border-bottom: 2px solid #d1d9e0; }
tbody.group > tr:first-child td { padding: 10px 12px 4px; vertical-align: top;
                                  border-top: 1px solid #d1d9e0; }
tbody.group.STOP, tbody.group.STALL, tbody.group.ERR, tbody.group.REWIND
  { background: #fff5f5; }
tbody.group.WARN { background: #fffbeb; }
tr.partitions td { padding: 0 12px 10px 28px; }
.name { font-size: 16px; }
.sub { color: #59636e; font-size: 12px; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
.empty { padding: 24px; text-align: center; color: #59636e; }
table.parts { border-collapse: collapse; font-size: 13px; margin-top: 4px; }
table.parts th { text-align: left; color: #59636e; font-weight: 600; padding: 2px 12px 2px 0; }
table.parts td { padding: 1px 12px 1px 0; }
.badge { display: inline-block; min-width: 44px; text-align: center; padding: 2px 8px;
         border-radius: 12px; font-weight: 700; font-size: 13px; color: #fff; }
.badge.small { min-width: 0; padding: 0 6px; font-size: 11px; }
.badge.OK { background: #1a7f37; }
.badge.WARN { background: #9a6700; }
.badge.STALL { background: #bc4c00; }
.badge.STOP { background: #cf222e; }
.badge.REWIND { background: #8250df; }
.badge.ERR { background: #82071e; }
h2 { font-size: 18px; margin: 24px 0 8px; }
table.folders td { padding: 8px 12px; border-top: 1px solid #d1d9e0; vertical-align: top; }
table.folders tr.failing { background: #fff5f5; }
.error { color: #82071e; font-size: 12px; max-width: 60ch; overflow-wrap: anywhere; }
"""
