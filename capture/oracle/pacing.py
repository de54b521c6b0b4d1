"""The mining loop's pace: the SCN window of each round and the sleep between rounds.

Seed Oracle document (connector properties) and Debezium's LogMiner loop: the window starts at
``log.mining.batch.size.default`` SCNs and moves by ``log.mining.batch.size.min`` within
``[min, max]``; the sleep between mining rounds starts at ``log.mining.sleep.time.default.ms``
and moves by ``log.mining.sleep.time.increment.ms`` within ``[min.ms, max.ms]``. Both follow one
rule: while the agent is further behind the database's current SCN than the default window,
the window grows and the sleep shrinks (catch up); once it has caught up, the window shrinks and
the sleep grows (do not hammer an idle database).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Pace"]


@dataclass
class Pace:
    """The adaptive window and sleep (see the module docstring).

    Attributes:
        window: SCNs of the next mining round.
        sleep_ms: Milliseconds to sleep before the next round.
    """

    batch_min: int
    batch_max: int
    batch_default: int
    sleep_min_ms: int
    sleep_max_ms: int
    sleep_increment_ms: int
    window: int = 0
    sleep_ms: int = 0

    def adapt(self, behind: int) -> None:
        """After a round that left the agent ``behind`` SCNs behind the current SCN."""
        if behind > self.batch_default:
            self.window = min(self.window + self.batch_min, self.batch_max)
            self.sleep_ms = max(self.sleep_ms - self.sleep_increment_ms, self.sleep_min_ms)
        else:
            self.window = max(self.window - self.batch_min, self.batch_min)
            self.sleep_ms = min(self.sleep_ms + self.sleep_increment_ms, self.sleep_max_ms)
