"""One rule for the content type of every request body.

A route that reads JSON takes ``application/json``, any ``application/*+json``, or no
``Content-Type`` at all (read as JSON); ``POST /examples`` takes the types of
:data:`EXAMPLE_TYPES`. Any other type is answered 415 problem+json naming the types the
route takes, and, when the body looks like JSON (its first non-blank byte is ``{`` or
``[``), how to send it as JSON: ``curl -d`` sends ``application/x-www-form-urlencoded``,
and a JSON body sent as ``text/plain`` would otherwise be read as libsvm text.
"""

from __future__ import annotations

from starlette.requests import Request

from service.errors import UnsupportedMediaTypeError

JSON_TYPES = ("application/json",)  # and application/*+json, and none
EXAMPLE_TYPES = {  # what POST /examples reads: content type -> body format
    "application/json": "json", "application/x-ndjson": "json",
    "text/plain": "libsvm", "text/x-libsvm": "libsvm", "application/x-libsvm": "libsvm",
    "application/octet-stream": "bin", "application/x-featurebudget-batch": "bin"}
_HINT = ("the body looks like JSON: send it with Content-Type: application/json (curl: "
         "--json BODY, or -H 'Content-Type: application/json' with -d)")


def media_type(content_type: str | None) -> str:
    """The media type of a ``Content-Type`` header, lower case, without parameters ("" for
    none). O(header)."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def request_media_type(request: Request) -> str:
    return media_type(request.headers.get("content-type"))


def is_json(media: str) -> bool:
    """Whether a route that reads JSON reads a body of this media type."""
    return media in ("", *JSON_TYPES) or (media.startswith("application/")
                                          and media.endswith("+json"))


def looks_like_json(body: bytes) -> bool:
    """Whether the first non-blank byte of ``body`` opens a JSON object or array (never the
    start of a libsvm line). O(leading blanks)."""
    return body.lstrip()[:1] in (b"{", b"[")


def unsupported(media: str, body: bytes, accepted: str) -> UnsupportedMediaTypeError:
    """The 415 for a body of ``media`` on a route that takes ``accepted``."""
    detail = f"content type {media!r} is not read here; send {accepted}"
    if looks_like_json(body) and not is_json(media):
        detail += f"; {_HINT}"
    return UnsupportedMediaTypeError(detail, [{"field": "Content-Type", "message": detail}])


def require_json(media: str, body: bytes) -> None:
    """415 (:func:`unsupported`) unless a JSON route reads ``body`` of ``media``; an empty
    body is not checked (the route says what it lacks)."""
    if not is_json(media) and body.strip():
        raise unsupported(media, body, "application/json")


def example_format(media: str, body: bytes) -> str:
    """The format (``json``, ``libsvm``, ``bin``) ``POST /examples`` reads a body of
    ``media`` as; 415 for another type, and for a body that looks like JSON sent as libsvm
    text."""
    fmt = "json" if media == "" else EXAMPLE_TYPES.get(media)
    if fmt is None:
        raise unsupported(media, body, "application/json or application/x-ndjson (JSON), "
                          "text/plain (libsvm) or application/octet-stream (FBX1 binary)")
    if fmt == "libsvm" and looks_like_json(body):
        detail = f"a body of content type {media!r} is read as libsvm text; {_HINT}"
        raise UnsupportedMediaTypeError(detail, [{"field": "Content-Type",
                                                  "message": detail}])
    return fmt
