"""``biasbreaker keygen``: write an Ed25519 key pair for signing run traces."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from biasbreaker.cli._common import fail, stdout
from biasbreaker.errors import BiasbreakerError
from biasbreaker.redaction import register_public
from biasbreaker.trace.signing import SIGNING_KEY_ENV, write_key_pair


def keygen(
    key: Annotated[
        Path,
        typer.Argument(
            help="Private key file to create (mode 0600); the public key goes to KEY.pub.",
            dir_okay=False,
            show_default=False,
        ),
    ],
) -> None:
    """Write an Ed25519 key pair: KEY signs trace seals, KEY.pub verifies them.

    Sign traces by naming the private key in BIASBREAKER_SIGNING_KEY_FILE (or simulate
    --signing-key KEY); check them with biasbreaker verify --public-key KEY.pub. Neither file
    is ever overwritten; keep KEY out of version control and out of any TOML file.
    """
    try:
        private, public, encoded = write_key_pair(key)
    except BiasbreakerError as exc:
        fail(str(exc))
    register_public(encoded)  # a public key looks random, but is no secret: shown
    out = stdout()
    out.print(f"private key {private} (keep it secret), public key {public}: {encoded}")
    out.print(
        f"sign: export {SIGNING_KEY_ENV}={private}; verify: biasbreaker verify TRACE "
        f"--public-key {public}"
    )


def register(app: typer.Typer) -> None:
    """Add the ``keygen`` command."""
    app.command("keygen")(keygen)
