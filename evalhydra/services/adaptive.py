"""Adaptive concurrency per endpoint: live within a provider's limits without being told them.

One :class:`EndpointController` per endpoint and run (:meth:`Endpoints.controller_for`), shared by
every service, eval and judge of the run that sends there. Before each attempt a cell takes a
slot (:meth:`EndpointController.acquire`); after it, it reports what the endpoint said
(:meth:`EndpointController.release`). The controller keeps:

* a **concurrency limit**, between 1 and ``max_concurrency``: it starts at ``max_concurrency``
  (an endpoint without a limit costs nothing) and is cut only on evidence of overload: a 503 or
  a refused connection halves it, once per round trip (a refusal of a request sent before the
  last cut does not cut again); each success then grows it by ``1 / limit`` (one per round trip);
* a **pace** in requests per second, one of two estimates of the provider's rate:
  - *learned from admitted throughput*, which wins once a refusal has taught it: on a round
    trip's first 429, the replies admitted in the last :data:`WINDOW_S` seconds, less
    :data:`PACE_MARGIN`; while no request is refused it rises by :data:`PROBE_GAIN` a second, so
    a limit that rises again is found. Every dialect gets it, bare 429s included (vLLM,
    LiteLLM), and a header whose reset means something else (the time to the next request, not
    to a full budget) cannot mislead it;
  - *from the budget headers* before any refusal, when the endpoint sends them (OpenAI's
    ``x-ratelimit-*``; Anthropic's ``anthropic-ratelimit-*``, whose RFC 3339 resets count only
    from :data:`~evalhydra.services.limit_headers.COARSE_RESET_S` away, as
    :mod:`~evalhydra.services.limit_headers` reads them): the rate they imply
    (``(limit − remaining) / reset``) less :data:`PACE_MARGIN`, so a provider that says its
    budget is not refused at all.
  Sends are spaced at the pace (a bucket of one request refilling at it); a send that finds it
  empty waits. When the pace falls (a limit that dropped), the sends already waiting stretch what
  is left of their waits by the fall, so none goes at the old, refused pace. A token budget
  nearly spent pauses until its reset;
* a **pause** of every request: only on evidence that the endpoint admits nothing now (a 429
  when no reply was admitted in the last :data:`WINDOW_S` seconds: a spent budget or quota),
  for its ``Retry-After`` (``retry-after-ms``, or the budget's reset); with no pace learned yet
  the limit drops to :data:`RESTART_LIMIT`, so the pause does not end in every cell at once.
  Otherwise a 429's ``Retry-After`` is the refused request's own wait, and the pace spaces the
  others.

An endpoint that has never answered is not trusted with parallel retries: its first timed-out
attempt drops the limit to one request (a probe), and when that probe times out too the
endpoint is **silent**: every cell waiting for it ends at once (:class:`EndpointSilent`) instead
of spending its own retries, so a server that accepts connections and never replies is named
within two timeouts. Silence lasts as long as the probe waited; then one new probe may go. The
first answer restores the requested concurrency.

Every wait a header sets (a pause, the pace's wait for a request, a token budget's reset) is at
most the controller's ``cap_s``: ``retry.retry_after_cap_ms``, and never past
``service.rate_limit_timeout_s``. A hostile or broken value (huge, negative, not a number, a date
in the past or far future) cannot hold a run longer than that.

Everything reads the run's clock, so tests run on trio's ``MockClock``.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

import trio

from evalhydra.services.base import EndpointReport
from evalhydra.services.limit_headers import budget_of

__all__ = [
    "DEFAULT_CAP_S",
    "SILENT_PREFIX",
    "EndpointController",
    "EndpointSilent",
    "Endpoints",
    "Feedback",
    "silent_reason",
]

#: A token budget with less than this share left pauses the endpoint until it resets.
TOKEN_RESERVE = 0.05
#: The pace assumes the budget refills this much slower than measured or said: a refusal costs
#: a whole ``Retry-After`` of the refused request's time, a slower pace only this share of it.
PACE_MARGIN = 0.05
#: The admitted throughput is measured over the replies of this many last seconds.
WINDOW_S = 1.0
#: Requests in flight after a pause, until a pace is learned (the pace then lifts the limit).
RESTART_LIMIT = 8
#: A rate is learned only from at least this much sending (a shorter span says too little).
MIN_SPAN_S = 0.3
#: A learned pace rises by this share of itself (as learned) a second while nothing is refused.
PROBE_GAIN = 0.05

#: How the failure reason of a cell of a silent endpoint begins.
SILENT_PREFIX = "connected, but no reply within"


def silent_reason(timeout_s: float | None) -> str:
    """A silent endpoint's failure reason: what happened and what to ask."""
    within = f"{timeout_s:g} s" if timeout_s else "the timeout"
    return f"{SILENT_PREFIX} {within}: is the server hung or still loading a model?"


class EndpointSilent(Exception):  # noqa: N818 (a state of the endpoint, not a bug)
    """The endpoint has never answered, and its probe timed out too: no cell should wait for it."""


#: The longest wait a header may set when no cap is given (``retry.retry_after_cap_ms``'s default).
DEFAULT_CAP_S = 60.0

def _bounded(seconds: float | None, cap_s: float) -> float:
    """``seconds`` within [0, cap_s]; 0 for None or a value that is no number."""
    if seconds is None or math.isnan(seconds):
        return 0.0
    return min(max(0.0, seconds), cap_s)


def _a_cap(cap_s: float) -> float:
    """A usable cap: positive and finite, else :data:`DEFAULT_CAP_S`."""
    return cap_s if math.isfinite(cap_s) and cap_s > 0 else DEFAULT_CAP_S


@dataclass(frozen=True, slots=True)
class Feedback:
    """What one attempt told about the endpoint's limits.

    Attributes:
        ok: The endpoint answered (any reply that is not a refusal).
        refused: A 429, a 503 or a refused connection: the endpoint is over its limit.
        rate_limited: The refusal was a 429.
        timed_out: The attempt ran out of time with no reply.
        retry_after_s: The reply's ``Retry-After``.
        headers: The reply's ``x-ratelimit-*`` headers (names lower-cased).
    """

    ok: bool = True
    refused: bool = False
    rate_limited: bool = False
    timed_out: bool = False
    retry_after_s: float | None = None
    headers: Mapping[str, str] | None = None


class EndpointController:
    """The shared concurrency limit, pause and pace of one endpoint (see the module docstring).

    Args:
        max_concurrency: The most requests in flight the limit may grow to.
        cap_s: The longest wait any header may set.
    """

    def __init__(self, max_concurrency: int, cap_s: float = DEFAULT_CAP_S) -> None:
        self.cap_s = _a_cap(cap_s)
        self.max_limit = max(1, int(max_concurrency))
        self.limit = float(self.max_limit)
        self.in_flight = 0
        self.refusals = 0  # 429s seen
        self.lowest = self.limit
        self._paused_until = -math.inf
        self._last_cut = -math.inf
        self._refill = 0.0  # the pace: requests per second the provider's budget regains (0: none)
        self._header_refill = 0.0  # the pace the budget headers imply (0: none)
        self._learned = 0.0  # the pace learned from admitted throughput (0: no refusal yet)
        self._learned_base = 0.0  # what the last refusal taught: the probe grows from it
        self._learned_at = 0.0
        self._admitted: deque[float] = deque()  # when replies were admitted, the last WINDOW_S
        self._implied: deque[tuple[float, float]] = deque()  # (when, rate) the headers implied
        self._started: float | None = None
        self._budget = 0.0  # requests the pace allows now, at most one (negative: owed by queued sends)
        self._budget_at = 0.0
        self._budget_from = -math.inf  # when the request whose reply set the copy was sent
        self._cut = trio.Event()  # set (and replaced) when the pace falls: waiting sends stretch
        self._lot = trio.lowlevel.ParkingLot()
        self.answered = False  # any reply seen (a 429 too): the server is alive
        self.silent = False  # never answered, and a probe timed out: cells stop waiting for it
        self._silent_until = -math.inf  # silent for as long as the probe waited; then a new probe
        self._first_silence = math.inf  # when the first unanswered attempt timed out

    @property
    def current(self) -> int:
        """The whole number of requests that may be in flight now."""
        return max(1, int(self.limit))

    async def acquire(self) -> float:
        """Wait for a slot (and the end of any pause, and the pace); return the send time, which
        :meth:`release` takes back."""
        while True:
            if self.silent:
                if trio.current_time() < self._silent_until:
                    raise EndpointSilent
                self.silent = False  # a new probe: the server may have come up (limit still one)
            await self._wait_pause()
            if self.in_flight < self.current:
                break
            await self._lot.park()
        self.in_flight += 1
        if self._started is None:
            self._started = trio.current_time()
        try:
            if self._refill:
                wait = self._spend(trio.current_time())
                if wait > 0:
                    await self._wait_turn(wait)
            await self._wait_pause()
        except BaseException:
            self._free()
            raise
        return trio.current_time()

    def _spend(self, now: float) -> float:
        """Take one request from our copy of the budget; seconds until it is really there."""
        self._probe(now)
        self._budget = min(1.0, self._budget + (now - self._budget_at) * self._refill)
        self._budget_at = now
        self._budget -= 1.0
        return _bounded(-self._budget / self._refill, self.cap_s) if self._budget < 0 else 0.0

    async def _wait_turn(self, wait: float) -> None:
        """Sleep ``wait`` seconds, this send's turn at the pace; when the pace falls meanwhile, what
        is left of the wait stretches by the fall, so the sends already queued go at the new pace,
        not at the old one that was refused."""
        pace, until = self._refill, trio.current_time() + wait
        while True:
            cut = self._cut
            with trio.move_on_at(until):
                await cut.wait()
            now = trio.current_time()
            if not cut.is_set() or now >= until:
                return
            if 0 < self._refill < pace:
                until = now + min((until - now) * pace / self._refill, self.cap_s)
                pace = self._refill

    async def _wait_pause(self) -> None:
        while trio.current_time() < self._paused_until:
            await trio.sleep_until(self._paused_until)

    def release(self, sent_at: float, feedback: Feedback) -> None:
        """Give the slot back and learn from the attempt's outcome.

        Args:
            sent_at: What :meth:`acquire` returned.
            feedback: What the endpoint said.
        """
        now = trio.current_time()
        if feedback.timed_out and not self.answered:
            self._unanswered(sent_at, now)
        elif feedback.ok and not self.answered:
            self._first_answer()
        if feedback.refused:
            self._refused(sent_at, now, feedback)
        elif feedback.ok:
            admitted = self._admitted
            admitted.append(now)
            while admitted[0] < now - WINDOW_S:  # the window only: a run never refused stays small
                admitted.popleft()
            if self.limit < self.max_limit:
                self.limit = min(float(self.max_limit), self.limit + 1.0 / self.limit)
        if feedback.headers and sent_at >= self._budget_from:  # a later reply may come first
            self._budget_from = sent_at
            self._read_budget(feedback.headers, now)
        self._free()

    def _unanswered(self, sent_at: float, now: float) -> None:
        """A timeout before any answer: probe with one request; a probe that times out too (sent
        after the first silence) makes the endpoint silent and wakes every waiting cell."""
        if sent_at >= self._first_silence:
            self.silent = True
            self._silent_until = now + (now - sent_at)
            self._lot.unpark_all()
            return
        self._first_silence = min(self._first_silence, now)
        self.limit = 1.0

    def _first_answer(self) -> None:
        """The endpoint answered: a probe's limit of one was no evidence of a rate limit."""
        self.answered = True
        if self._first_silence < math.inf:
            self.limit = float(self.max_limit)
            self._lot.unpark(count=self.max_limit)

    def cancel(self) -> None:
        """Give the slot back after an attempt that ended without an answer to learn from."""
        self._free()

    def _free(self) -> None:
        self.in_flight -= 1
        self._lot.unpark(count=max(0, self.current - self.in_flight))

    def _refused(self, sent_at: float, now: float, feedback: Feedback) -> None:
        self.refusals += feedback.rate_limited
        admitted, span = self._admitted_rate(now)
        if sent_at >= self._last_cut:  # once per round trip: replies to earlier sends are old news
            self._last_cut = now
            if feedback.rate_limited and admitted and span >= MIN_SPAN_S:  # pace at what it admits
                self._learned = self._learned_base = max(admitted * (1.0 - PACE_MARGIN), 1.0 / self.cap_s)
                self._learned_at = now
                self._set_pace(now)
                self.limit = float(self.max_limit)  # the pace limits now, not the count in flight
                self._lot.unpark(count=self.max_limit)
            elif not feedback.rate_limited or not self._learned:  # overload, or no pace yet: fewer
                self.limit = max(1.0, self.limit / 2.0)
                self.lowest = min(self.lowest, self.limit)
        if self._admitted:  # replies admitted in the last window: the refused one waits, the pace
            return  # spaces the rest
        wait = feedback.retry_after_s
        if wait is None and feedback.rate_limited and feedback.headers:
            wait = budget_of(feedback.headers, "requests")[2]
        if wait:
            self._pause(now, wait)
            if not self._refill:  # no pace yet: after the pause, a few at once, not every cell
                self.limit = min(self.limit, float(RESTART_LIMIT))
                self.lowest = min(self.lowest, self.limit)

    def _admitted_rate(self, now: float) -> tuple[float, float]:
        """Replies admitted a second over the last :data:`WINDOW_S` (or since the first send, the
        last pause or the pace last learned), and that span (under :data:`MIN_SPAN_S` too little
        to learn a rate from). Counting from the last lesson, a limit that fell is learned from
        what was admitted since it fell, not from a window still full of the old rate."""
        while self._admitted and self._admitted[0] < now - WINDOW_S:
            self._admitted.popleft()
        since = max(self._started if self._started is not None else now, self._paused_until,
                    self._learned_at if self._learned else -math.inf)
        span = min(WINDOW_S, max(now - since, 0.1))  # a pause admits nothing: not part of the rate
        counted = len(self._admitted) - bisect.bisect_left(self._admitted, now - span)
        return counted / span, span

    def _probe(self, now: float) -> None:
        """Raise a learned pace while nothing is refused (by :data:`PROBE_GAIN` of what was learned,
        a second, from one window after the refusal), so a limit that rose is found."""
        quiet = now - self._learned_at - WINDOW_S
        if self._learned and quiet > 0:
            self._learned = self._learned_base * (1.0 + PROBE_GAIN * quiet)
            self._set_pace(now)

    def _set_pace(self, now: float) -> None:
        """The pace: the rate learned from admitted throughput once a refusal has taught it, else
        the rate the budget headers imply."""
        pace = self._learned or self._header_refill
        if pace and not self._refill:  # a new pace starts from an empty bucket of one request
            self._budget, self._budget_at = 0.0, now
        elif pace and pace < self._refill and self._budget < 0:  # a fall: the queued sends stretch
            self._cut.set()  # (what is owed stays owed, now at the slower pace)
            self._cut = trio.Event()
        elif pace and self._budget < 0:  # a rise: the sends already queued keep their times
            self._budget *= pace / self._refill
        self._refill = pace

    @property
    def pace(self) -> float:
        """Requests a second the endpoint is paced at (0: not paced)."""
        return self._refill

    def _pause(self, now: float, wait_s: float) -> None:
        """Hold every request to the endpoint for ``wait_s`` (at most the cap) from ``now``."""
        self._paused_until = max(self._paused_until, now + _bounded(wait_s, self.cap_s))

    def _read_budget(self, headers: Mapping[str, str], now: float) -> None:
        """Learn the provider's rate from its budget headers (any dialect), and pause when its
        token budget is nearly spent."""
        limit, remaining, reset = budget_of(headers, "requests")
        if limit is not None and remaining is not None and reset and limit > remaining:
            # The lowest rate implied over the last window: a provider whose reset is the time to
            # its next request (not to a full budget) implies its true rate only when nearly full.
            self._implied.append((now, (limit - remaining) / reset))
            while self._implied[0][0] < now - WINDOW_S:
                self._implied.popleft()
            implied = min(rate for _, rate in self._implied)
            # a reset past the cap is no pace to keep: no wait for a request may exceed the cap
            self._header_refill = max(implied * (1.0 - PACE_MARGIN), 1.0 / self.cap_s)
            self._set_pace(now)
        token_limit, tokens, token_reset = budget_of(headers, "tokens")
        if tokens is not None and token_limit and token_reset and tokens < TOKEN_RESERVE * token_limit:
            self._pause(now, token_reset)


class Endpoints:
    """A run's endpoint controllers, one per URL, shared by every service of the run that sends
    there (a judge on the candidate's server shares its limit); made by whoever opens the run's
    services and handed to each, so the run asks them, not ambient state, for its limits."""

    def __init__(self) -> None:
        self._controllers: dict[str, EndpointController] = {}

    def controller_for(self, endpoint: str, max_concurrency: int,
                       cap_s: float = DEFAULT_CAP_S) -> EndpointController:
        """The controller of ``endpoint``, made on first use.

        Args:
            endpoint: The URL requests go to.
            max_concurrency: Its ceiling when this call makes it (a later service's larger one
                raises it).
            cap_s: The longest wait a header may set (the shortest of the services' caps wins).
        """
        controller = self._controllers.get(endpoint)
        if controller is None:
            controller = self._controllers[endpoint] = EndpointController(max_concurrency, cap_s)
        else:
            controller.cap_s = min(controller.cap_s, _a_cap(cap_s))
            never_cut = controller.limit >= controller.max_limit
            controller.max_limit = max(controller.max_limit, int(max_concurrency))
            if never_cut:  # no limit seen yet: the larger ceiling is the limit
                controller.limit = float(controller.max_limit)
        return controller

    def refused(self) -> list[EndpointReport]:
        """The endpoints that refused requests (429), as the summary reports them."""
        return [EndpointReport(url, c.current, max(1, int(c.lowest)), c.max_limit, c.refusals, c.pace)
                for url, c in sorted(self._controllers.items()) if c.refusals]

    def status(self) -> str:
        """The progress line's note on endpoints that refused requests: their limit now and 429s."""
        return " ".join(f"limit {e.limit}/{e.ceiling} 429s {e.refusals}"
                        + (f" pace {e.pace:.0f}/s" if e.pace else "") for e in self.refused())
