"""A run's output as it reaches the bucket, for `logs` (--follow, --timestamps) and `run --follow`.

While an attempt runs, its runner ships what the job printed every few seconds as a live part
(attempt-N/logs/OFFSET.txt, OFFSET the byte of the log where it starts); when the attempt ends it
stores the whole logs.txt. `RunOutput` turns those objects into text poll by poll, attempt after
attempt, optionally with each line labelled (several runs in one stream) and timestamped.

A line's timestamp is when it reached the bucket: the time of the live part that completed it,
or for the lines no part holds (the last seconds of an attempt, or a job too short for a part)
the attempt's end. The runner ships a part every 5 seconds on a VM (every second in local mode),
so that is the precision.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from spotcron.present.neutral import output_text

if TYPE_CHECKING:
    from spotcron.core.runs import RunRecord
    from spotcron.engine.ports import Blobs

LOG_PIECE = 8 << 20  # bytes per ranged read of a log: what a reader holds in memory at once


def log_pieces(blobs: Blobs, job: str, run_id: str, attempt: int, offset: int = 0) -> Iterator[bytes]:
    """An attempt's log from byte `offset` on, piece by piece (memory stays one piece).

    The whole logs.txt once the runner stored it at the end of the attempt; until then the live
    parts it ships while the job runs, each named by the byte of the log where it starts, read in
    order: a poll reads only new bytes and lists nothing. Both hold the same bytes at the same
    offsets, so a reader moves from the parts to logs.txt without a seam.
    """
    from spotcron.core import layout

    whole = layout.logs(job, run_id, attempt)
    start = offset  # where the part being read starts
    while True:
        piece = blobs.read_range(whole, offset, LOG_PIECE)
        if piece is None:  # the attempt is still running (or its VM was lost): the live parts
            piece = blobs.read_range(layout.log_part(job, run_id, attempt, start), offset - start, LOG_PIECE)
            if piece == b"" and start != offset:  # that part is read: the next one starts here
                start = offset
                continue
        if not piece:
            return
        yield piece
        offset += len(piece)


def timed_pieces(blobs: Blobs, job: str, run_id: str, attempt: int, offset: int = 0,
                 ended: datetime | None = None) -> Iterator[tuple[bytes, datetime | None]]:
    """Like `log_pieces`, with the time each piece reached the bucket: its live part's, else
    (bytes only logs.txt holds) `ended`, the attempt's end. The parts are listed a page at a time
    as they are read (log_parts.all_parts), never the whole folder at once."""
    from spotcron.core import layout
    from spotcron.engine.log_parts import all_parts

    for start, name in all_parts(blobs, layout.log_parts(job, run_id, attempt)):
        blob = blobs.read(name)
        if blob is None or start + len(blob.data) <= offset:
            continue
        if start > offset:
            break  # a gap the parts do not hold: logs.txt has it
        yield blob.data[offset - start:], blob.updated
        offset = start + len(blob.data)
    whole = layout.logs(job, run_id, attempt)
    while piece := blobs.read_range(whole, offset, LOG_PIECE):
        yield piece, ended
        offset += len(piece)


def stamp(at: datetime | None) -> str:
    return f"{at.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}" if at is not None else "-" * 20


class RunOutput:
    """One run's output, attempt after attempt; `poll` returns what the bucket gained since.

    With a `label` or `timestamps`, only whole lines come out (a partial line waits for its end,
    or for `finish`); without, bytes come out as they arrive.

    A job's output is hostile text for the operator's terminal: unless `raw`, it comes out through
    neutral.output_text (newlines and tabs kept, every other control shown as its escape), so no
    escape sequence it printed reaches the terminal, or a pipe, as one. `raw` gives the text as
    the job wrote it (`spotcron logs --raw`).
    """

    def __init__(self, job: str, run_id: str, *, attempt: int | None = None, label: str = "",
                 timestamps: bool = False, notice: Callable[[str], None] = lambda text: None,
                 raw: bool = False):
        self.job, self.run_id = job, run_id
        self.attempt = attempt  # None: follow the latest
        self.label = label
        self.timestamps = timestamps
        self.notice = notice  # a line for stderr: the next attempt starts
        self.shown: dict[int, int] = {}  # attempt → bytes read so far
        self.current: int | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""  # a partial line, when lines are labelled or timed
        self._pending_at: datetime | None = None
        self.raw = raw
        self._held_cr = ""  # a carriage return at a piece's end: a CRLF line end may be split there

    @property
    def printed_any(self) -> bool:
        return any(self.shown.values())

    def poll(self, blobs: Blobs, record: RunRecord) -> str:
        target = self.attempt if self.attempt is not None else (
            record.current_attempt.number if record.current_attempt else None)
        text = []
        if self.current is not None and target != self.current:
            # The previous attempt may have uploaded its last lines while being preempted.
            text.append(self._read(blobs, self.current, record))
            text.append(self._finish())
            self.notice(f"-- attempt {target} --")
        self.current = target
        if target is not None:
            text.append(self._read(blobs, target, record))
        return self._shown("".join(text))

    def finish(self) -> str:
        """What is left: the decoder's last bytes and a line without its newline."""
        return self._shown(self._finish(), final=True)

    def _finish(self) -> str:
        text = self._lines(self._decoder.decode(b"", final=True), self._pending_at)
        self._decoder.reset()
        if self._pending:
            text += self._line(self._pending, self._pending_at) + "\n"
            self._pending = ""
        return text

    def _shown(self, text: str, *, final: bool = False) -> str:
        if self.raw:
            return text
        text, self._held_cr = self._held_cr + text, ""
        if text.endswith("\r") and not final:
            text, self._held_cr = text[:-1], "\r"
        return output_text(text)

    def _read(self, blobs: Blobs, number: int, record: RunRecord) -> str:
        offset = self.shown.get(number, 0)
        if self.timestamps:
            attempt = next((a for a in record.attempts if a.number == number), None)
            ended = attempt and (attempt.finished_at or attempt.deleted_at)
            pieces: Iterator[tuple[bytes, datetime | None]] = timed_pieces(
                blobs, self.job, self.run_id, number, offset, ended)
        else:
            pieces = ((piece, None) for piece in log_pieces(blobs, self.job, self.run_id, number, offset))
        text = []
        for piece, at in pieces:
            self.shown[number] = self.shown.get(number, 0) + len(piece)
            text.append(self._lines(self._decoder.decode(piece), at))
        return "".join(text)

    def _lines(self, decoded: str, at: datetime | None) -> str:
        if not self.label and not self.timestamps:
            return decoded
        *whole, self._pending = (self._pending + decoded).split("\n")
        self._pending_at = at if at is not None else self._pending_at
        return "".join(self._line(line, at) + "\n" for line in whole)

    def _line(self, line: str, at: datetime | None) -> str:
        prefix = f"{stamp(at)} " if self.timestamps else ""
        return f"{prefix}{self.label} | {line}" if self.label else prefix + line
