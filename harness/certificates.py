"""The certificates and keys a local control plane needs.

One CA signs the API server's serving certificate (for localhost and 127.0.0.1) and an admin
client certificate in group system:masters; a separate RSA key signs service account tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

from rebalancer.webhook.tls import (
    LEAF_USAGE,
    key_pem,
    make_ca,
    name,
    pem,
    serving_certificate,
    signed,
)


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    server_cert: Path
    server_key: Path
    admin_cert: Path
    admin_key: Path
    service_account_key: Path
    service_account_public_key: Path


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key = make_ca("topology-rebalancer-test-ca")
    server, server_key = serving_certificate(
        ca, ca_key, ["localhost", "kubernetes.default.svc"], ["127.0.0.1"]
    )
    admin_key = ec.generate_private_key(ec.SECP256R1())
    admin = signed(
        name("admin", "system:masters"),
        admin_key.public_key(),
        ca.subject,
        ca_key,
        [(LEAF_USAGE, True), (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)],
    )
    pki = Pki(
        ca_cert=directory / "ca.crt",
        server_cert=directory / "server.crt",
        server_key=directory / "server.key",
        admin_cert=directory / "admin.crt",
        admin_key=directory / "admin.key",
        service_account_key=directory / "sa.key",
        service_account_public_key=directory / "sa.pub",
    )
    for certificate, path in (
        (ca, pki.ca_cert),
        (server, pki.server_cert),
        (admin, pki.admin_cert),
    ):
        write_pem(certificate, path)
    write_key(server_key, pki.server_key)
    write_key(admin_key, pki.admin_key)
    service_account_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    write_key(service_account_key, pki.service_account_key)
    pki.service_account_public_key.write_bytes(
        service_account_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pki


def write_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey, path: Path) -> None:
    path.write_bytes(key_pem(key))
    path.chmod(0o600)


def write_pem(certificate: x509.Certificate, path: Path) -> None:
    path.write_bytes(pem(certificate))
