"""The time lines of text reports (``iostat -t``, ``date`` lines between snapshots), read as
the tools write them in the locales DBAs run them in.

Accepted (a whole line, spaces around it ignored):

* ISO 8601: ``2024-01-15T10:00:00+0100`` (``S_TIME_FORMAT=ISO``), ``2024-01-15 10:00:00``,
  a fraction, ``Z``, ``+01:00`` or ``+0100``; with a zone the time is aware;
* the ``%x %X`` of the C and en_US locales: ``01/15/24 10:00:00``, ``01/15/2024 10:00:00 AM``;
  en_GB and most of Europe put the day first (``15/01/2024``, ``15.01.2024``): a file is read
  day first when one of its dates can only be read so (a first number above 12), month first
  otherwise, and a file with dates of both kinds is refused;
* Japanese and Chinese locales: ``2024年01月15日 10時00分00秒`` / ``10:00:00``;
* ``date``'s default output in the C locale: ``Mon Jan 15 10:00:00 UTC 2024`` (the zone
  name is kept only when it is UTC/GMT; any other name leaves the time as written);
* seconds since the epoch (``date +%s``), as UTC;
* a time alone (``Time: 10:00:00 AM``, old sysstat): its date is the report's header date,
  moved a day on when the clock goes back past midnight.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, timezone

_ISO = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(\.\d+)?\s*(Z|[+-]\d{2}:?\d{2})?"
)
_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_SLASHED = re.compile(r"(\d{1,2})([/.])(\d{1,2})\2(\d{4}|\d{2})\.?")
_CJK_DATE = re.compile(r"(\d{4})年(\d{1,2})月(\d{1,2})日")
_CLOCK = re.compile(r"(\d{1,2}):(\d{2}):(\d{2})(?:\s*([AaPp][Mm]))?")
_CJK_CLOCK = re.compile(r"(\d{1,2})時(\d{1,2})分(\d{1,2})秒")
_EPOCH = re.compile(r"@?(\d{9,10})(\.\d+)?")
_DATE_CMD = re.compile(
    r"(?:[A-Z][a-z]{2}\s+)?([A-Z][a-z]{2})\s+(\d{1,2})\s+(\d{1,2}:\d{2}:\d{2})"
    r"(?:\s+([A-Z]{2,5}|[+-]\d{4}))?\s+(\d{4})"
)
_MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


@dataclass(frozen=True)
class Stamp:
    """A time line as read: a date and clock, or a clock alone (``day`` None), or a full
    moment (``moment``: ISO with a zone, epoch). ``slashed``: the two numbers of a
    ``nn/nn/yy`` date before the day/month order is known."""

    moment: datetime | None = None
    slashed: tuple[int, int, int] | None = None
    day: date | None = None
    clock: time | None = None


def _clock(text: str) -> time | None:
    match = _CLOCK.fullmatch(text.strip()) or _CJK_CLOCK.fullmatch(text.strip())
    if not match:
        return None
    hour, minute, second = (int(g) for g in match.groups()[:3])
    half = match.group(4) if match.re is _CLOCK else None
    if half:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if half.lower() == "pm" else 0)
    if hour > 23 or minute > 59 or second > 60:
        return None
    return time(hour, minute, min(second, 59))


def _zone(text: str | None) -> timezone | None:
    if not text:
        return None
    if text == "Z":
        return UTC
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    return timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))


def _iso(line: str) -> Stamp | None:
    match = _ISO.fullmatch(line)
    if not match:
        return _iso_day_clock(line)
    y, mo, d, h, mi, s = (int(g) for g in match.groups()[:6])
    fraction = float(match.group(7) or 0)
    try:
        moment = datetime(y, mo, d, h, mi, s, tzinfo=_zone(match.group(8)))
    except ValueError:
        return None
    moment += timedelta(seconds=fraction)
    return Stamp(moment=moment)


def _iso_day_clock(line: str) -> Stamp | None:
    """``2024-07-27 01:28:22 AM``: an ISO date with a locale's 12-hour clock."""
    day = _ISO_DAY.match(line)
    clock = _clock(line[day.end() :]) if day else None
    if day is None or clock is None:
        return None
    found = _safe_day(*(int(x) for x in day.group(0).split("-")))
    return Stamp(day=found.day, clock=clock) if found else None


def _date_cmd(line: str) -> Stamp | None:
    match = _DATE_CMD.fullmatch(line)
    if not match or match.group(1) not in _MONTHS:
        return None
    clock = _clock(match.group(3))
    if clock is None:
        return None
    zone = match.group(4) or ""
    tz = UTC if zone in ("UTC", "GMT") else _zone(zone) if zone[:1] in "+-" and zone else None
    try:
        day = date(int(match.group(5)), _MONTHS.index(match.group(1)) + 1, int(match.group(2)))
    except ValueError:
        return None
    return Stamp(moment=datetime.combine(day, clock, tzinfo=tz))


def parse_stamp(line: str) -> Stamp | None:
    """``line`` as a time line, or None when it is not one."""
    text = line.strip()
    if not text or not text[0].isalnum():
        return None
    for reader in (_iso, _date_cmd):
        found = reader(text)
        if found is not None:
            return found
    epoch = _EPOCH.fullmatch(text)
    if epoch:
        seconds = int(epoch.group(1)) + float(epoch.group(2) or 0)
        return Stamp(moment=datetime.fromtimestamp(seconds, UTC))
    if text.startswith("Time:"):
        clock = _clock(text[5:])
        return Stamp(clock=clock) if clock else None
    return _dated_clock(text)


def _dated_clock(text: str) -> Stamp | None:
    cjk = _CJK_DATE.match(text)
    slashed = _SLASHED.match(text)
    match = cjk or slashed
    if not match:
        return None
    clock = _clock(text[match.end() :])
    if clock is None:
        return None
    if cjk:
        try:
            day = date(int(cjk.group(1)), int(cjk.group(2)), int(cjk.group(3)))
        except ValueError:
            return None
        return Stamp(day=day, clock=clock)
    assert slashed is not None
    first, second, year = int(slashed.group(1)), int(slashed.group(3)), int(slashed.group(4))
    if slashed.group(2) == ".":  # 15.01.2024: always day first
        first, second = second, first
    year += 2000 if year < 100 else 0
    return Stamp(slashed=(first, second, year), clock=clock)


def header_date(text: str) -> Stamp | None:
    """The date of a report header (``Linux … (host) \t01/15/2024 \t_x86_64_``)."""
    for part in text.split():
        if _ISO_DAY.fullmatch(part):
            return _safe_day(*(int(x) for x in part.split("-")))
        found = _dated_clock(f"{part} 00:00:00")
        if found is not None:
            return found
    return None


def _safe_day(y: int, m: int, d: int) -> Stamp | None:
    try:
        return Stamp(day=date(y, m, d))
    except ValueError:
        return None


def day_first(stamps: list[Stamp]) -> bool | None:
    """Whether the ``nn/nn/yy`` dates of one file put the day first: True, False, or None
    when some can only be day first and others only month first (the file is refused)."""
    only_day_first = any(s.slashed and s.slashed[0] > 12 for s in stamps)
    only_month_first = any(s.slashed and s.slashed[1] > 12 for s in stamps)
    if only_day_first and only_month_first:
        return None
    return only_day_first


def resolve(stamp: Stamp, *, dayfirst: bool, base: date | None) -> datetime | None:
    """The moment ``stamp`` names (None: an impossible date, or a clock with no date)."""
    if stamp.moment is not None:
        return stamp.moment
    assert stamp.clock is not None
    day = stamp.day
    if stamp.slashed is not None:
        a, b, year = stamp.slashed
        month, mday = (b, a) if dayfirst else (a, b)
        try:
            day = date(year, month, mday)
        except ValueError:
            return None
    day = day or base
    return None if day is None else datetime.combine(day, stamp.clock)
