"""`coord certs`: a CA for a cluster (`init`) and the certificates it signs for members
and clients (`issue`), as PEM files in one directory (coord.tls.certs makes them)."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("certs", help="make a CA and the TLS certificates of members and clients")
    csub = c.add_subparsers(dest="certs_command", required=True)
    init = csub.add_parser("init", help="a new CA: DIR/ca.pem and DIR/ca.key")
    init.add_argument("--dir", required=True, help="where the CA is written")
    init.add_argument("--common-name", default="coord CA", help="the CA's name")
    init.add_argument("--days", type=int, default=3650, help="validity (default 3650)")
    init.add_argument("--force", action="store_true", help="replace an existing CA")
    init.set_defaults(func=cmd_init)
    issue = csub.add_parser(
        "issue", help="a certificate signed by DIR's CA: DIR/NAME.pem and DIR/NAME.key",
        description="A member's certificate (default) serves and opens TLS connections"
        " and names 127.0.0.1, ::1, localhost and every --san; a --client certificate"
        " only opens them. NAME is the subject's common name (etcd's user name for a"
        " client certificate when auth is on).")
    issue.add_argument("name", metavar="NAME")
    issue.add_argument("--dir", required=True, help="the CA's directory")
    issue.add_argument("--san", action="append", default=[], metavar="HOST_OR_IP",
                       help="another host name or IP address the certificate names"
                            " (repeat for more)")
    issue.add_argument("--client", action="store_true",
                       help="a client's certificate (clientAuth only), not a member's")
    issue.add_argument("--days", type=int, default=825, help="validity (default 825)")
    issue.add_argument("--out", help="write the pair here instead of DIR")
    issue.add_argument("--force", action="store_true", help="replace an existing pair")
    issue.set_defaults(func=cmd_issue)


def cmd_init(args: argparse.Namespace) -> int:
    from coord.tls.certs import CertError, make_ca

    try:
        pair = make_ca(args.dir, args.common_name, days=args.days, force=args.force)
    except (CertError, OSError) as e:
        print(f"coord certs: {e}", file=sys.stderr)
        return 1
    print(f"CA certificate {pair.cert} (give it to members and clients: --trusted-ca-file,"
          f" --peer-trusted-ca-file, --cacert)\nCA key {pair.key} (keep it private; it"
          f" signs certificates)")
    return 0


def cmd_issue(args: argparse.Namespace) -> int:
    from coord.tls.certs import CertError, issue

    try:
        pair = issue(args.dir, args.name, args.san, client=args.client, days=args.days,
                     force=args.force, out=args.out)
    except (CertError, OSError) as e:
        print(f"coord certs: {e}", file=sys.stderr)
        return 1
    if args.client:
        use = f"--cert {pair.cert} --key {pair.key}"
    else:
        use = (f"--cert-file {pair.cert} --key-file {pair.key} --peer-cert-file {pair.cert}"
               f" --peer-key-file {pair.key}")
    print(f"certificate {pair.cert}, key {pair.key}\n  use: {use}")
    return 0
