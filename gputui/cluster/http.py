"""HTTP GET for the cluster sources: a deadline on every request, a bounded body, TLS options,
credentials that never reach a message or a log, no redirects (an Authorization header must
not follow a redirect to another host).

Errors are `FetchError` with one line a user can read; its text names the URL without any
credentials and never includes a header.
"""

from __future__ import annotations

import base64
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from dataclasses import dataclass, field
from typing import Any

MAX_BODY = 64 * 2**20
"""Largest response body accepted (after decompression): 512 GPUs of dcgm-exporter are ~2 MiB."""
CHUNK = 1 << 16


class FetchError(Exception):
    """A request that failed: the message is safe to show (no credentials)."""


@dataclass(frozen=True)
class Credentials:
    """An Authorization header value, kept out of repr() and str()."""

    header: str = field(repr=False, default="")

    @classmethod
    def basic(cls, user: str, password: str) -> Credentials:
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        return cls(f"Basic {token}")

    def __bool__(self) -> bool:
        return bool(self.header)

    def __str__(self) -> str:
        return "Credentials(<hidden>)" if self.header else "Credentials(none)"


@dataclass(frozen=True)
class TlsOptions:
    ca_file: str = ""
    insecure: bool = False
    """Skip certificate verification (a self-signed server on a trusted network)."""
    client_cert: str = ""
    client_key: str = ""

    def context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca_file or None)
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.client_cert:
            ctx.load_cert_chain(self.client_cert, self.client_key or None)
        return ctx


def display_url(url: str) -> str:
    """The URL without user:password@ (for messages)."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def check_url(url: str) -> str | None:
    """A problem with a target or server URL, or None."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return f"{display_url(url)}: expected an http:// or https:// URL"
    if not parts.hostname:
        return f"{display_url(url)}: no host in the URL"
    if parts.username is not None or parts.password is not None:
        return (
            f"{display_url(url)}: credentials in a URL show in `ps` and shell history; put them in "
            "the config file's [cluster] section (basic_auth_user / basic_auth_password_file)"
        )
    try:
        _ = parts.port
    except ValueError:
        return f"{display_url(url)}: bad port"
    return None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        raise FetchError(f"{display_url(req.full_url)}: HTTP {code} redirect (not followed)")


@dataclass
class HttpClient:
    """GETs with a timeout, a size limit, optional auth and TLS settings."""

    timeout: float = 5.0
    credentials: Credentials = field(default_factory=Credentials)
    tls: TlsOptions = field(default_factory=TlsOptions)
    max_body: int = MAX_BODY
    user_agent: str = "gputui-cluster"
    bytes_received: int = 0
    """Bytes read from the network (compressed), for benchmarks."""
    requests: int = 0
    _opener: Any = field(default=None, repr=False)

    def opener(self) -> Any:
        if self._opener is None:
            self._opener = urllib.request.build_opener(
                urllib.request.ProxyHandler({}),  # loopback and cluster-internal: no proxy
                urllib.request.HTTPSHandler(context=self.tls.context()),
                _NoRedirect(),
            )
        return self._opener

    def get(self, url: str, accept: str = "*/*") -> bytes:
        """The body of a 200 answer, or FetchError.  The whole request, headers and body,
        must finish within `timeout` seconds (a server dripping bytes is cut off)."""
        shown = display_url(url)
        req = urllib.request.Request(url, method="GET")  # noqa: S310 - check_url allows only http(s)
        req.add_header("Accept", accept)
        req.add_header("Accept-Encoding", "gzip")
        req.add_header("User-Agent", self.user_agent)
        if self.credentials:
            req.add_unredirected_header("Authorization", self.credentials.header)
        deadline = time.monotonic() + self.timeout
        self.requests += 1
        try:
            with self.opener().open(req, timeout=self.timeout) as resp:
                gz = (resp.headers.get("Content-Encoding") or "").lower() == "gzip"
                return self._read(resp, gz, deadline, shown)
        except FetchError:
            raise
        except urllib.error.HTTPError as exc:
            raise FetchError(f"{shown}: HTTP {exc.code} {exc.reason}") from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            text = getattr(reason, "strerror", None) or str(reason)
            raise FetchError(f"{shown}: {text}") from None
        except TimeoutError:
            raise FetchError(f"{shown}: no answer within {self.timeout:g} s") from None
        except ssl.SSLError as exc:
            raise FetchError(f"{shown}: TLS: {exc.reason or exc}") from None
        except zlib.error:
            raise FetchError(f"{shown}: a gzip answer that does not decompress") from None
        except (OSError, ValueError) as exc:
            raise FetchError(f"{shown}: {type(exc).__name__}: {exc}") from None

    def _read(self, resp: Any, gz: bool, deadline: float, shown: str) -> bytes:
        out = bytearray()
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS) if gz else None
        while True:
            if time.monotonic() > deadline:
                raise FetchError(f"{shown}: the answer took longer than {self.timeout:g} s")
            chunk = resp.read1(CHUNK) if hasattr(resp, "read1") else resp.read(CHUNK)
            if not chunk:
                break
            self.bytes_received += len(chunk)
            if inflate is not None:
                chunk = inflate.decompress(chunk, self.max_body + 1 - len(out))
            out += chunk
            if len(out) > self.max_body:
                raise FetchError(f"{shown}: the answer is larger than {self.max_body // 2**20} MiB")
        if inflate is not None:
            out += inflate.flush()
        return bytes(out)
