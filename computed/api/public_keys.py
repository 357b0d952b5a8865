"""Key pairs' keys: checking a public key, its fingerprint, and generating a key pair.

Owns what Nova's key pairs compute from a key, with Nova's results (no I/O, no state: safe
from any thread):

* ``ssh``: the public key must be one OpenSSH's ``authorized_keys`` format loads (RSA, ECDSA,
  Ed25519...); its fingerprint is the MD5 of the key's base64 body as colon-separated hex
  (what Nova shows, and ``ssh-keygen -l -E md5``).
* ``x509``: a PEM certificate; its fingerprint is the SHA-1 of the certificate, colon-separated.
* generation: ``ssh`` makes an RSA 2048 key (the private key in the PEM form Nova returns);
  ``x509`` a self-signed certificate for ``CN=<user>`` and the private key as base64 PKCS#12
  without a password (Nova's WinRM certificate), valid 10 years.

A key that is not one is :class:`InvalidKey`, with a reason fit for a one-line 400.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

SSH = 'ssh'
X509 = 'x509'
TYPES = (SSH, X509)
#: What a generated ssh public key ends with (Nova's says Generated-by-Nova).
GENERATED_COMMENT = 'Generated-by-computed'
RSA_BITS = 2048
CERTIFICATE_DAYS = 3650


class InvalidKey(ValueError):
    """The public key is not one of its type."""


def _colons(hex_digest: str) -> str:
    return ':'.join(hex_digest[i:i + 2] for i in range(0, len(hex_digest), 2))


def fingerprint(public_key: str, key_type: str) -> str:
    """The key's fingerprint as Nova shows it; :class:`InvalidKey` if it is not a key of
    ``key_type``."""
    if key_type == X509:
        try:
            cert = x509.load_pem_x509_certificate(public_key.encode('utf-8'))
        except (ValueError, TypeError):
            raise InvalidKey("not a PEM X.509 certificate") from None
        return _colons(cert.fingerprint(hashes.SHA1()).hex())  # noqa: S303 - Nova's digest
    try:
        serialization.load_ssh_public_key(public_key.strip().encode('utf-8'))
        body = base64.b64decode(public_key.split()[1], validate=True)
    except (ValueError, TypeError, IndexError, binascii.Error,
            UnsupportedAlgorithm) as exc:
        reason = str(exc).split('\n')[0] or type(exc).__name__
        raise InvalidKey(f'not an OpenSSH public key ({reason})') from None
    return _colons(hashlib.md5(body, usedforsecurity=False).hexdigest())


def generate(key_type: str, user_id: str) -> tuple[str, str, str]:
    """A new key pair: (private key, public key, fingerprint)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=RSA_BITS)
    if key_type == X509:
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, user_id)])
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now)
                .not_valid_after(now + datetime.timedelta(days=CERTIFICATE_DAYS))
                .add_extension(x509.SubjectAlternativeName([x509.OtherName(
                    x509.ObjectIdentifier('1.3.6.1.4.1.311.20.2.3'),  # the WinRM user's UPN
                    _utf8_string(f'{user_id}@localhost'))]), critical=False)
                .sign(key, hashes.SHA256()))
        public = cert.public_bytes(serialization.Encoding.PEM).decode()
        bundle = pkcs12.serialize_key_and_certificates(
            None, key, cert, None, serialization.NoEncryption())
        return base64.b64encode(bundle).decode(), public, fingerprint(public, X509)
    private = key.private_bytes(serialization.Encoding.PEM,
                                serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption()).decode()
    openssh = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                            serialization.PublicFormat.OpenSSH).decode()
    public = f'{openssh} {GENERATED_COMMENT}'
    return private, public, fingerprint(public, SSH)


def _utf8_string(text: str) -> bytes:
    """DER of a UTF8String (what an UPN other name holds)."""
    data = text.encode('utf-8')
    if len(data) < 0x80:
        return bytes([0x0c, len(data)]) + data
    length = len(data).to_bytes((len(data).bit_length() + 7) // 8, 'big')
    return bytes([0x0c, 0x80 | len(length)]) + length + data
