"""Fetching a pre-signed storage URL (where GitHub redirects an artifact download).

The URL carries its own signature, so the request goes out with no Authorization header: the token
is for GitHub's API only and must not reach the storage host. Plain urllib, bounded in size and time.
"""
from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.parse
import urllib.request

SOCKET_TIMEOUT_S = 60.0
CHUNK_BYTES = 1 << 16


class StorageError(Exception):
    """A storage download failed; retriable for 5xx answers and network errors."""

    def __init__(self, message, retriable):
        super().__init__(message)
        self.retriable = retriable


class _NoCredentialRedirects(urllib.request.HTTPRedirectHandler):
    """Follows storage redirects (http(s) only); the request never had credentials to leak."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if urllib.parse.urlsplit(newurl).scheme not in ("http", "https"):
            raise StorageError(f"storage redirected to a non-http(s) URL ({code})", retriable=False)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _host(url):
    return urllib.parse.urlsplit(url).netloc or "?"


def write_bounded(out, chunk, max_bytes, deadline):
    if out.tell() + len(chunk) > max_bytes:
        raise StorageError(f"larger than {max_bytes} bytes; refusing it", retriable=False)
    if time.monotonic() > deadline:
        raise StorageError("took too long; gave up", retriable=True)
    out.write(chunk)


def fetch(url, max_bytes, out, deadline_s):
    """GET url into the binary file out: at most max_bytes, within deadline_s seconds."""
    host = _host(url)  # never the query: it holds the signature
    deadline = time.monotonic() + deadline_s
    opener = urllib.request.build_opener(_NoCredentialRedirects)
    request = urllib.request.Request(url, headers={"User-Agent": "speedstats"})
    try:
        with opener.open(request, timeout=SOCKET_TIMEOUT_S) as response:
            length = response.headers.get("Content-Length")
            if length and length.isdigit() and int(length) > max_bytes:
                raise StorageError(f"{int(length)} bytes at {host}, more than {max_bytes}; refusing it",
                                   retriable=False)
            while True:
                chunk = response.read(CHUNK_BYTES)
                if not chunk:
                    break
                write_bounded(out, chunk, max_bytes, deadline)
            if length and length.isdigit() and out.tell() != int(length):
                raise StorageError(f"storage host {host} sent {out.tell()} of {length} bytes", retriable=True)
    except urllib.error.HTTPError as exc:
        raise StorageError(f"storage host {host} answered {exc.code} {exc.reason}",
                           retriable=exc.code >= 500 or exc.code == 429) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        raise StorageError(f"could not reach storage host {host} ({type(exc).__name__}: {reason})",
                           retriable=True) from None
