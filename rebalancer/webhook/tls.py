"""Self-signed certificates, made in milliseconds with `cryptography`: the webhook's serving
certificate in migrate mode, and the local test control plane's PKI."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=365)
CA_VALIDITY = datetime.timedelta(days=3650)
"""The webhook CA outlives many serving certificates, so renewing one leaves caBundle alone."""
RENEW_BEFORE = datetime.timedelta(days=90)
LEAF_USAGE = x509.KeyUsage(True, True, False, False, False, False, False, False, False)
CA_USAGE = x509.KeyUsage(True, False, False, False, False, True, True, False, False)


def name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def signed(
    subject: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    extensions: list[tuple[x509.ExtensionType, bool]],
    *,
    validity: datetime.timedelta = VALIDITY,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + validity)
    )
    # Strict verifiers (OpenSSL's X509_STRICT, as urllib3 sets it) need both key identifiers.
    extensions = [
        *extensions,
        (x509.SubjectKeyIdentifier.from_public_key(public_key), False),
        (x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), False),
    ]
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    return builder.sign(issuer_key, hashes.SHA256())


def make_ca(
    common_name: str, validity: datetime.timedelta = VALIDITY
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = name(common_name)
    extensions: list[tuple[x509.ExtensionType, bool]] = [
        (x509.BasicConstraints(ca=True, path_length=None), True),
        (CA_USAGE, True),
    ]
    return signed(subject, key.public_key(), subject, key, extensions, validity=validity), key


def serving_certificate(
    ca: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    dns_names: list[str],
    ip_addresses: list[str],
    *,
    validity: datetime.timedelta = VALIDITY,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    certificate = signed(
        name(dns_names[0] if dns_names else ip_addresses[0]),
        key.public_key(),
        ca.subject,
        ca_key,
        [
            (x509.SubjectAlternativeName(names), False),
            (LEAF_USAGE, True),
            (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False),
        ],
        validity=validity,
    )
    return certificate, key


def pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


@dataclass(frozen=True)
class ServingKeys:
    """A webhook's CA and serving certificate with their keys, as PEM: the replicas share them
    through one kubernetes.io/tls Secret, so that each serves what caBundle trusts. The CA key
    is kept so a renewed serving certificate can be signed by the CA caBundle already holds."""

    ca: bytes
    ca_key: bytes
    certificate: bytes
    key: bytes


def issue_serving_keys(dns_names: list[str], ip_addresses: list[str]) -> ServingKeys:
    """A new CA and a serving certificate it signed."""
    ca, ca_key = make_ca("topology-rebalancer-webhook-ca", CA_VALIDITY)
    certificate, key = serving_certificate(ca, ca_key, dns_names, ip_addresses)
    return ServingKeys(pem(ca), key_pem(ca_key), pem(certificate), key_pem(key))


def renewed(keys: ServingKeys, dns_names: list[str], ip_addresses: list[str]) -> ServingKeys:
    """A new serving certificate from the same CA, so caBundle stays as it is."""
    ca = x509.load_pem_x509_certificate(keys.ca)
    ca_key = serialization.load_pem_private_key(keys.ca_key, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an EC key")
    certificate, key = serving_certificate(ca, ca_key, dns_names, ip_addresses)
    return ServingKeys(keys.ca, keys.ca_key, pem(certificate), key_pem(key))


def unfit_because(
    keys: ServingKeys, dns_names: list[str], ip_addresses: list[str], now: datetime.datetime
) -> str | None:
    """Why these keys cannot serve the webhook for the next RENEW_BEFORE, or None if they can."""
    try:
        ca = x509.load_pem_x509_certificate(keys.ca)
        certificate = x509.load_pem_x509_certificate(keys.certificate)
        key = serialization.load_pem_private_key(keys.key, password=None)
        ca_key = serialization.load_pem_private_key(keys.ca_key, password=None)
        certificate.verify_directly_issued_by(ca)
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound) as error:
        return f"unreadable or not issued by its CA ({type(error).__name__})"
    if key.public_key() != certificate.public_key() or ca_key.public_key() != ca.public_key():
        return "a key does not match its certificate"
    missing = set(dns_names) - set(names.get_values_for_type(x509.DNSName))
    missing |= {
        ip
        for ip in ip_addresses
        if ipaddress.ip_address(ip) not in names.get_values_for_type(x509.IPAddress)
    }
    if missing:
        return f"the certificate does not name {sorted(missing)}"
    expiry = min(certificate.not_valid_after_utc, ca.not_valid_after_utc)
    if expiry - now < RENEW_BEFORE:
        return f"it expires at {expiry:%Y-%m-%d}"
    return None


def pair_problem(keys: ServingKeys) -> str | None:
    """Why the serving certificate and key cannot be served together, or None if they can."""
    try:
        certificate = x509.load_pem_x509_certificate(keys.certificate)
        key = serialization.load_pem_private_key(keys.key, password=None)
    except (ValueError, TypeError) as error:
        return f"tls.crt or tls.key is unreadable ({type(error).__name__})"
    if key.public_key() != certificate.public_key():
        return "tls.key does not match tls.crt"
    return None
