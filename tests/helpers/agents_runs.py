"""One turn of a real OpenAI Agents SDK agent, run plainly or streamed to its end, and
the one tool its agents hold: the tests of replies the SDK refuses (cut, incomplete,
refused, carried by a compaction) ask the same agent twice either way. Import it only
after ``helpers.frameworks.require("agents", …)``."""

from __future__ import annotations

from typing import Any

from agents import Agent, Runner, SQLiteSession, function_tool


async def run_turn(agent: Agent[Any], ask: str, session: SQLiteSession, streamed: bool) -> Any:
    """The final output of one `Runner` run of `agent` on `ask` in `session`."""
    if not streamed:
        return (await Runner.run(agent, ask, session=session)).final_output
    result = Runner.run_streamed(agent, ask, session=session)
    async for _ in result.stream_events():
        pass
    return result.final_output


@function_tool
def todo(item: str) -> str:
    """Add a todo item."""
    return "added " + item
