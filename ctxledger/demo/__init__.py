"""Demo data and the main job.

* :mod:`~ctxledger.demo.synth`: :class:`SessionSynth` — deterministic generated
  coding-agent sessions;
* :mod:`~ctxledger.demo.record`: :func:`record_generated` — one driven through the service;
* :mod:`~ctxledger.demo.run`: :func:`run_demo` — the main job (`ctxledger demo`).
"""

from ctxledger.demo.record import record_generated
from ctxledger.demo.run import DemoReport, run_demo
from ctxledger.demo.synth import SessionSynth

__all__ = ["DemoReport", "SessionSynth", "record_generated", "run_demo"]
