"""What is kept of a command's output: its head and its tail, within a cap.

A test run's verdict is at the end of its output (pytest's summary) and its cause often
at the start, so a runaway printer keeps both ends, with a marker saying how much was cut
between them; memory stays within the cap however much is printed.
"""

from __future__ import annotations


class OutputCapture:
    """The first and last bytes of one stream, within ``cap`` bytes in all."""

    def __init__(self, cap: int) -> None:
        self.tail_cap = cap // 5
        self.head_cap = cap - self.tail_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk and self.tail_cap:
            self.tail += chunk
            del self.tail[: max(0, len(self.tail) - self.tail_cap)]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        if not self.truncated:
            return head + self.tail.decode("utf-8", errors="replace")
        cut = self.total - len(self.head) - len(self.tail)
        tail = self.tail.decode("utf-8", errors="replace")
        return f"{head}\n[… {cut} bytes of output cut …]\n{tail}"
