"""``ctxledger serve``: the ledger as an HTTP state service and a compacting model proxy.

Needs the ``server`` extra (Starlette, uvicorn). :func:`create_app` builds the ASGI app
over a :class:`~ctxledger.ContextService`; see :mod:`ctxledger.server.app`.
"""

from ctxledger.server.app import app_from_env, create_app, endpoints
from ctxledger.server.state import ServerState

__all__ = ["ServerState", "app_from_env", "create_app", "endpoints"]
