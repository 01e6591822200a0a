"""Alarm notifications: each firing and each resolution POSTed as JSON to every configured
webhook, from a thread of its own so that evaluation never waits on a receiver.

A delivery is retried with backoff (the one retry policy); one that still fails is logged
and dropped. A receiver may get a notification twice when its answer is lost: ``id`` (rule,
subject and the time the condition began) is the same both times.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from urllib.parse import urlsplit

from manager.alarms import Alarm
from shared.alarmrules import Webhook
from shared.confinement import Confinement
from shared.errors import WebhookError
from shared.retry import RetryPolicy
from shared.secrets import SecretRef

log = logging.getLogger("setl.manager.webhooks")
TIMEOUT_S = 5.0


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are not followed: urllib would send the Authorization header along to
    wherever the answer points."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def payload(alarm: Alarm, manager: str) -> dict[str, object]:
    """What a receiver gets: the alarm, readable times, and which manager sent it."""
    def when(ms: int) -> str | None:
        return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds") \
            if ms else None
    return {"id": f"{alarm.rule}/{alarm.subject}/{alarm.since_ms}", "rule": alarm.rule,
            "when": alarm.when, "subject": alarm.subject, "state": alarm.state,
            "message": alarm.message, "since": when(alarm.since_ms),
            "resolved_at": when(alarm.resolved_ms), "manager": manager}


def shown(url: str) -> str:
    """A webhook's URL as logs show it: scheme, host and port (a path or query may hold a
    secret)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


class Notifier:
    def __init__(self, webhooks: tuple[Webhook, ...], manager: str, rules: Confinement,
                 retry: RetryPolicy | None = None,
                 sent: Callable[[str], None] = lambda outcome: None) -> None:
        self.webhooks, self.manager = webhooks, manager
        # resolved now: a reference the manager cannot read stops it at start, not at 3 am
        self._tokens = [SecretRef(hook.token).resolve(rules=rules) if hook.token else ""
                        for hook in webhooks]
        self.retry = retry or RetryPolicy(max_tries=4, delay_s=1.0, max_delay_s=10.0)
        self.sent = sent  # told "sent" or "failed" per delivery (the manager's metrics)
        self._queue: queue.Queue[Alarm | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="webhooks", daemon=True)

    def start(self) -> None:
        if self.webhooks:
            self._thread.start()

    def notify(self, alarm: Alarm) -> None:
        if self.webhooks:
            self._queue.put(alarm)

    def stop(self, wait_s: float = 3.0) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(wait_s)

    def _run(self) -> None:
        while (alarm := self._queue.get()) is not None:
            body = json.dumps(payload(alarm, self.manager)).encode()
            for hook, token in zip(self.webhooks, self._tokens, strict=True):
                try:
                    self.retry.call(lambda hook=hook, token=token, body=body:
                                    self._post(hook, token, body),
                                    (WebhookError,), f"webhook {shown(hook.url)}")
                    self.sent("sent")
                    log.info("event=alarm_sent rule=%s subject=%s state=%s webhook=%s",
                             alarm.rule, alarm.subject, alarm.state, shown(hook.url))
                except WebhookError as exc:
                    self.sent("failed")
                    log.error("event=alarm_webhook_failed rule=%s subject=%s state=%s "
                              "webhook=%s error=%s", alarm.rule, alarm.subject, alarm.state,
                              shown(hook.url), exc)

    def _post(self, hook: Webhook, token: str, body: bytes) -> None:
        headers = {"Content-Type": "application/json", "User-Agent": "setl-manager"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(hook.url, body, headers, method="POST")
        try:
            with _OPENER.open(request, timeout=TIMEOUT_S) as answer:
                answer.read()
        except urllib.error.HTTPError as exc:
            if 300 <= exc.code < 400:
                raise WebhookError(
                    f"{shown(hook.url)} answered HTTP {exc.code}, a redirect to "
                    f"{shown(exc.headers.get('Location') or '?')}; setl does not follow "
                    "redirects (the webhook's token would go along, maybe to another host): "
                    "configure the final URL") from None
            raise WebhookError(f"{shown(hook.url)} answered HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise WebhookError(f"{shown(hook.url)} did not take the notification: "
                               f"{reason}") from None
