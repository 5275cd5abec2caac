"""Ed25519 signatures of a trace's seals (optional: ``pip install 'biasbreaker[sign]'``).

A seal signed with a private key binds the chain head — hence every line before it — to the
holder of that key: anyone with the matching public key can check that the trace up to the
seal is byte for byte what the key holder sealed. A signature does **not** prove that the
scores in the trace were honestly measured, that the pipeline ran the code it claims, or that
the key was not stolen; it proves who sealed the bytes (``docs/control.md`` §6).

The signing key is a file (PKCS #8 PEM, written by ``biasbreaker keygen``), given explicitly or
named by the environment variable :data:`SIGNING_KEY_ENV`; never a TOML setting, so a key is
not committed with a configuration file. Keys and signatures are deterministic (RFC 8032), so
the same key and trace give the same bytes.

Source:
    RFC 8032, "Edwards-Curve Digital Signature Algorithm (EdDSA)" (Josefsson, Liusvaara 2017),
    via the ``cryptography`` library (pyca).
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Final

from biasbreaker.errors import InputError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

SIGNING_KEY_ENV: Final = "BIASBREAKER_SIGNING_KEY_FILE"
"""The environment variable naming the signing key file (a path, never the key itself)."""


def _ed25519() -> ModuleType:
    """The ``cryptography`` Ed25519 module, or an error saying how to install it."""
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as exc:
        raise InputError(
            "signing traces needs the cryptography package: pip install 'biasbreaker[sign]'"
        ) from exc
    return ed25519


def _serialization() -> ModuleType:
    _ed25519()
    from cryptography.hazmat.primitives import serialization

    return serialization


class Signer:
    """Signs seals with an Ed25519 private key.

    Args:
        key: The private key.
        source: Where it came from (a file path), for messages; never the key itself.
    """

    def __init__(self, key: Ed25519PrivateKey, source: str = "<key>") -> None:
        self._key = key
        self.source = source
        serialization = _serialization()
        raw = key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self.public_key = base64.b64encode(raw).decode("ascii")
        """The public key: 32 raw bytes in standard base64."""

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Signer:
        """Load a PKCS #8 PEM Ed25519 private key (``biasbreaker keygen`` writes one).

        Raises:
            InputError: The file cannot be read or holds no unencrypted Ed25519 private key
                (the message names the file, never its content).
        """
        file = Path(path)
        ed25519 = _ed25519()
        serialization = _serialization()
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise InputError(f"signing key {file}: cannot read it: {exc.strerror or exc}") from None
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError):
            raise InputError(
                f"signing key {file}: not an unencrypted PEM private key; write one with "
                "biasbreaker keygen"
            ) from None
        if not isinstance(key, ed25519.Ed25519PrivateKey):
            raise InputError(
                f"signing key {file}: not an Ed25519 key; write one with biasbreaker keygen"
            )
        return cls(key, str(file))

    def sign(self, message: bytes) -> str:
        """The signature of ``message``: 64 bytes in standard base64."""
        return base64.b64encode(self._key.sign(message)).decode("ascii")


def signer_from_environment() -> Signer | None:
    """The signer whose key file :data:`SIGNING_KEY_ENV` names, or ``None`` if it is unset.

    Raises:
        InputError: The variable names a file that is not a usable key (the message names the
            variable and the file).
    """
    named = os.environ.get(SIGNING_KEY_ENV, "")
    if not named:
        return None
    try:
        return Signer.from_file(named)
    except InputError as exc:
        raise InputError(f"{SIGNING_KEY_ENV}: {exc}") from None


def load_public_key(path: str | os.PathLike[str]) -> str:
    """Read an Ed25519 public key (PEM, as ``biasbreaker keygen`` writes ``KEY.pub``).

    Returns:
        The key: 32 raw bytes in standard base64, as seals record it.

    Raises:
        InputError: The file cannot be read or holds no Ed25519 public key.
    """
    file = Path(path)
    ed25519 = _ed25519()
    serialization = _serialization()
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise InputError(f"public key {file}: cannot read it: {exc.strerror or exc}") from None
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError):
        raise InputError(
            f"public key {file}: not a PEM public key (give the KEY.pub that biasbreaker "
            "keygen wrote, not the private key)"
        ) from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise InputError(f"public key {file}: not an Ed25519 key")
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode("ascii")


def signature_valid(public_key: str, message: bytes, signature: str) -> bool:
    """Whether ``signature`` (base64) is ``public_key``'s (base64) Ed25519 signature of ``message``.

    A malformed key or signature is simply not valid.
    """
    ed25519 = _ed25519()
    from cryptography.exceptions import InvalidSignature

    try:
        key = ed25519.Ed25519PublicKey.from_public_bytes(
            base64.b64decode(public_key, validate=True)
        )
        key.verify(base64.b64decode(signature, validate=True), message)
    except (InvalidSignature, ValueError, binascii.Error):
        return False
    return True


def write_key_pair(path: str | os.PathLike[str]) -> tuple[Path, Path, str]:
    """Write a new Ed25519 key pair: ``path`` (private, mode 0600) and ``path.pub`` (public).

    Args:
        path: The private key file to create; neither it nor ``<path>.pub`` may exist.

    Returns:
        The private and public key files and the public key (base64).

    Raises:
        InputError: A file already exists (keys are never overwritten) or cannot be written.
    """
    private = Path(path)
    public = private.with_name(private.name + ".pub")
    ed25519 = _ed25519()
    serialization = _serialization()
    for file in (private, public):
        if file.exists():
            raise InputError(
                f"{file} already exists; keys are never overwritten: choose another path"
            )
    key = ed25519.Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    pub = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    try:
        fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(pem)
        public.write_bytes(pub)
    except OSError as exc:
        raise InputError(f"cannot write the key pair at {private}: {exc.strerror or exc}") from None
    return private, public, Signer(key, str(private)).public_key


__all__ = [
    "SIGNING_KEY_ENV",
    "Signer",
    "load_public_key",
    "signature_valid",
    "signer_from_environment",
    "write_key_pair",
]
