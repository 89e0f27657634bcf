"""`gputui cluster`: every GPU of many hosts, from a Prometheus server or the exporters."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from gputui.commands.common import add_config_option, positive

if TYPE_CHECKING:
    from gputui.cluster.http import HttpClient
    from gputui.config import ClusterConfig

NAME = "cluster"
PROG = "gputui cluster"
USES_CONFIG = True


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        NAME,
        help="every GPU of many hosts, from Prometheus or the exporters (dcgm-exporter, gputui export)",
        description="Show every GPU of every host: read from a Prometheus server's HTTP API "
        "(--prometheus URL), or scrape the exporters directly (TARGETS: host:port or URLs of "
        "dcgm-exporter or `gputui export`, or --targets-file).  Credentials and TLS settings "
        "come from the config file's [cluster] section.",
        epilog="Examples:  gputui cluster --prometheus http://prometheus:9090    "
        "gputui cluster n1:9400 n2:9400    gputui cluster --targets-file nodes.txt",
    )
    p.add_argument("targets", nargs="*", metavar="TARGET", help="exporters to scrape directly")
    p.add_argument(
        "--prometheus", metavar="URL", default=None, help="a Prometheus server (http(s)://host:9090)"
    )
    p.add_argument(
        "--targets-file", metavar="FILE", default=None, help="exporters, one per line (# comments)"
    )
    p.add_argument(
        "--refresh", type=positive, default=None, metavar="S", help="seconds between refreshes (default 5)"
    )
    p.add_argument(
        "--selector",
        default=None,
        metavar="MATCHERS",
        help="extra PromQL label matchers, e.g. 'job=\"dcgm\"' (Prometheus only)",
    )
    add_config_option(p)


SECRET_MAX_BYTES = 64 * 1024


def _read_secret(path: str, what: str) -> str:
    """A secret file, under the config file's rule (gputui/safefile.py): one nobody else
    could have written or replaced."""
    from gputui.safefile import Refused, read_private_text
    from gputui.untrusted import escaped

    try:
        return read_private_text(os.path.expanduser(path), SECRET_MAX_BYTES).strip()
    except Refused as exc:
        raise ValueError(f"{what}: {exc}") from None
    except OSError as exc:
        raise ValueError(f"{what}: cannot read {escaped(path)}: {exc.strerror or exc}") from None


def make_client(cfg: ClusterConfig) -> HttpClient:
    """The HTTP client the config describes (ValueError with a one-line reason)."""
    from gputui.cluster.http import Credentials, HttpClient, TlsOptions

    header = cfg.auth_header
    if cfg.auth_header_file:
        header = _read_secret(cfg.auth_header_file, "cluster.auth_header_file")
    password = cfg.basic_auth_password
    if cfg.basic_auth_password_file:
        password = _read_secret(cfg.basic_auth_password_file, "cluster.basic_auth_password_file")
    if header and cfg.basic_auth_user:
        raise ValueError("cluster: set either an auth header or basic auth, not both")
    if password and not cfg.basic_auth_user:
        raise ValueError("cluster: a basic auth password needs cluster.basic_auth_user")
    creds = Credentials(header) if header else Credentials()
    if cfg.basic_auth_user:
        creds = Credentials.basic(cfg.basic_auth_user, password)
    tls = TlsOptions(cfg.tls_ca_file, cfg.tls_insecure_skip_verify, cfg.tls_client_cert, cfg.tls_client_key)
    try:
        tls.context()
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise ValueError(f"cluster: TLS settings: {exc}") from None
    return HttpClient(timeout=cfg.timeout, credentials=creds, tls=tls, max_body=cfg.max_response_mib * 2**20)


def make_source(args: argparse.Namespace, cfg: ClusterConfig) -> Any:
    """The source the command line (then the config file) names; ValueError when none."""
    from gputui.cluster.http import check_url
    from gputui.cluster.model import LabelMap
    from gputui.cluster.sources import DirectSource, PrometheusSource
    from gputui.cluster.targets import normalize_target, read_targets_file
    from gputui.untrusted import escaped

    labels = LabelMap(**vars(cfg.labels))
    targets = list(args.targets)
    if args.targets_file:
        from gputui.safefile import Refused

        try:
            targets += read_targets_file(args.targets_file)
        except (Refused, ValueError) as exc:  # one line each: the file (and line) and why
            raise ValueError(f"--targets-file: {exc}") from None
        except OSError as exc:
            raise ValueError(
                f"--targets-file: cannot read {escaped(args.targets_file)}: {exc.strerror or exc}"
            ) from None
    prometheus = args.prometheus
    if prometheus and targets:
        raise ValueError("give either --prometheus or exporter targets, not both")
    if not prometheus and not targets:
        prometheus = cfg.prometheus or None
        targets = list(cfg.targets)
    if not prometheus and not targets:
        raise ValueError(
            "nothing to show: give --prometheus URL, exporter targets (host:9400 ...), or set "
            "[cluster] prometheus / targets in the config file"
        )
    client = make_client(cfg)
    if prometheus:
        if problem := check_url(prometheus):
            raise ValueError(problem)
        selector = cfg.selector if args.selector is None else args.selector
        return PrometheusSource(prometheus, client, labels, selector)
    for t in targets:
        if problem := check_url(normalize_target(t)):
            raise ValueError(problem)
    return DirectSource(targets, client, labels)


def run(args: argparse.Namespace) -> int:
    from gputui.config import Config

    settings: Config = getattr(args, "settings", None) or Config()
    cfg = settings.cluster
    try:
        source = make_source(args, cfg)
    except ValueError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    from gputui.serve.child import in_browser

    if not sys.stdout.isatty() and not os.environ.get("GPUTUI_ALLOW_NOTTY") and not in_browser():
        print(f"{PROG}: needs a terminal", file=sys.stderr)
        return 2
    from gputui.ui.cluster.app import ClusterApp

    app = ClusterApp(
        source,
        refresh=args.refresh or cfg.refresh,
        idle_rule=settings.alerts.idle_memory,
        history_minutes=cfg.history_minutes,
    )
    app.run()
    source.close()
    return app.return_code or 0
