"""The OpenAPI 3.1 schema, built from the endpoint table (so it lists exactly what is served)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxledger.server.routing import Endpoint, Param

_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string", "description": "stable machine-readable code"},
                "message": {"type": "string", "description": "one line for a human"},
            },
            "additionalProperties": True,
        }
    },
}

_ERRORS = {
    "400": "bad_json: the body is not a JSON object; too_deep: it nests too deep",
    "401": "unauthorized: missing or wrong bearer token (nothing appended)",
    "404": "unknown_session / not_found",
    "422": "invalid_input / invalid_message: bad input, nothing appended",
    "503": (
        "store_unavailable: the ledger's PostgreSQL server is out of reach; store_busy: "
        "another session held the ledger up (a lock, a deadlock, a timeout); retry after "
        "Retry-After (a write may be stored: re-send with expected_version or an "
        "Idempotency-Key)"
    ),
}


def _schema_of(param: Param) -> dict[str, Any]:
    schema: dict[str, Any] = {} if param.type == "any" else {"type": param.type}
    if param.description:
        schema["description"] = param.description
    return schema


def _parameters(e: Endpoint) -> list[dict[str, Any]]:
    params: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in re.findall(r"{(\w+)}", e.path)
    ]
    params += [
        {"name": q.name, "in": "query", "required": q.required, "schema": _schema_of(q)}
        for q in e.query
    ]
    params += [
        {"name": h.name, "in": "header", "required": h.required, "schema": _schema_of(h)}
        for h in e.headers
    ]
    return params


def _request_body(e: Endpoint) -> dict[str, Any] | None:
    if e.body is not None:
        schema = {
            "type": "object",
            "properties": {p.name: _schema_of(p) for p in e.body},
            "required": [p.name for p in e.body if p.required],
            "additionalProperties": False,
        }
        return {
            "required": bool(schema["required"]),
            "content": {"application/json": {"schema": schema}},
        }
    if e.auth == "proxy":
        described = {
            "type": "object",
            "description": "the provider's own request body, forwarded after compaction",
        }
        return {"required": True, "content": {"application/json": {"schema": described}}}
    return None


def _responses(e: Endpoint) -> dict[str, Any]:
    media = "text/event-stream" if e.stream and e.tag == "events" else "application/json"
    schema = {"type": "object"} if media == "application/json" else {"type": "string"}
    content: dict[str, Any] = {media: {"schema": schema}}
    if e.tag == "proxy":
        content["text/event-stream"] = {"schema": {"type": "string"}}
    success = "201" if 201 in e.responses else "200"
    responses: dict[str, Any] = {
        success: {"description": e.responses.get(201, "OK"), "content": content}
    }
    errors = {**_ERRORS, **{str(k): v for k, v in e.responses.items() if k >= 400}}
    if e.body is not None:
        errors["413"] = "body_too_large: the request body is over 64 MiB (nothing appended)"
    if e.tag == "state" and e.method == "POST" and "{session_id}" in e.path:
        ended = "session_ended: the session has ended, nothing written"
        errors["409"] = f"{errors['409']}; {ended}" if "409" in errors else ended
    if e.tag == "state" and e.method == "POST":  # every write, starting a session too
        errors["507"] = "storage_full: the disk or database is full, nothing written"
    for status, text in errors.items():
        if status == "401" and e.auth == "none":
            continue
        ref = {"schema": {"$ref": "#/components/schemas/Error"}}
        responses[status] = {"description": text, "content": {"application/json": ref}}
    return responses


_SECURITY: dict[str, list[dict[str, list[str]]]] = {
    "bearer": [{"bearer": []}],
    "none": [],
    "proxy": [{}, {"proxyToken": []}],
}


def _operation(e: Endpoint) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": e.summary, "tags": [e.tag], "operationId": _operation_id(e)}
    params = _parameters(e)
    if params:
        op["parameters"] = params
    body = _request_body(e)
    if body is not None:
        op["requestBody"] = body
    op["responses"] = _responses(e)
    op["security"] = _SECURITY[e.auth]
    return op


def _operation_id(e: Endpoint) -> str:
    name = e.handler.__name__.strip("_")
    return f"{e.method.lower()}_{name}"


def build_schema(endpoints: list[Endpoint]) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for e in endpoints:
        paths.setdefault(e.path, {})[e.method.lower()] = _operation(e)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "ctxledger",
            "version": "1",
            "description": "The ledger as a network state service and a compacting model proxy.",
        },
        "paths": paths,
        "components": {
            "schemas": {"Error": _ERROR},
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "proxyToken": {"type": "apiKey", "in": "header", "name": "X-Ctxledger-Token"},
            },
        },
        "security": [{"bearer": []}],
    }


__all__ = ["build_schema"]
