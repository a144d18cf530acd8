"""A summarizer whose error text quotes a key: what no output may ever show.

Shared by the service tests and the Hermes scenario (``tests/hermes_scenario.py``,
run under the Hermes virtualenv with ``tests/`` on its path).
"""

from __future__ import annotations

from ctxledger.compressor.summarizers.base import SummaryRequest, SummaryResult
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.errors import FailureClass, SummarizerError

#: a key in a summarizer's error text (the shape of an Anthropic key, not a real one)
SECRET = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"

#: the error: an HTTP status line, then a body over several lines that quotes the key
ERROR = f'HTTP 401 from the summary endpoint\n{{"error": "invalid x-api-key",\n "key": "{SECRET}"}}'


class SecretSummarizer:
    """Fails its first `fails` summaries with class `failure_class` (auth and network
    abort a compaction, the others fall back) and an error text holding :data:`SECRET`,
    then summarizes offline."""

    kind = "secret"
    model: str | None = None

    def __init__(self, failure_class: FailureClass, fails: int = 1) -> None:
        self.failure_class, self.fails, self.inner = failure_class, fails, OfflineSummarizer()

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        if self.fails > 0:
            self.fails -= 1
            raise SummarizerError(ERROR, failure_class=self.failure_class)
        return await self.inner.summarize(request)
