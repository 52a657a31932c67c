#!/usr/bin/env python3
"""Independent reference of Impulse's sealed packets (docs/PROTOCOL.md, "Sealed packets").

Written from the document alone, not from the C++ code, with PyNaCl (libsodium's Python binding,
as a Python client would use it; Debian: python3-nacl) and hashlib's BLAKE2b. It computes every
test vector the document lists; tests/unit/shared/test_packet_crypto.cpp checks the C++ code
against the same hex, and the ctest packet_crypto.python_vectors runs --check, so the document,
this reference and the code cannot drift apart.

    usage: scripts/packet-crypto-vectors.py                          prints the vectors
           scripts/packet-crypto-vectors.py --check docs/PROTOCOL.md  compares them with the doc;
                                                                      exits 1 at the first mismatch
Needs a python3 that imports nacl (Debian's python3-nacl is for /usr/bin/python3).
"""
import hashlib
import struct
import sys

from nacl import bindings as nacl

BEGIN, END = "<!-- packet-crypto-vectors:begin -->", "<!-- packet-crypto-vectors:end -->"


def blake2b(message: bytes, out: int, key: bytes = b"") -> bytes:
    return hashlib.blake2b(message, digest_size=out, key=key).digest()


def kx_seed_keypair(seed: bytes):
    """crypto_kx_seed_keypair: secret key = BLAKE2b(out 32, seed), public key = X25519(secret key, 9)."""
    sk = blake2b(seed, 32)
    pk = nacl.crypto_scalarmult_base(sk)
    assert (pk, sk) == nacl.crypto_kx_seed_keypair(seed)
    return pk, sk


def session_keys(client, server, binding: bytes):
    """(key_c2s, key_s2c): crypto_kx's halves of h, each keyed into BLAKE2b with the binding."""
    (client_pk, client_sk), (server_pk, server_sk) = client, server
    s2c_half, c2s_half = nacl.crypto_kx_client_session_keys(client_pk, client_sk, server_pk)  # rx, tx
    assert (c2s_half, s2c_half) == nacl.crypto_kx_server_session_keys(server_pk, server_sk, client_pk)
    return (blake2b(b"impulse-c2s-key5" + binding, 32, key=c2s_half),
            blake2b(b"impulse-s2c-key5" + binding, 32, key=s2c_half))


def seal(key: bytes, sequence: int, plaintext: bytes) -> bytes:
    """IMPS || sequence (u32 LE) || ChaCha20-Poly1305-IETF(plaintext, ad = those 8 bytes)."""
    prefix = b"IMPS" + struct.pack("<I", sequence)
    nonce = bytes(4) + struct.pack("<Q", sequence)
    return prefix + nacl.crypto_aead_chacha20poly1305_ietf_encrypt(plaintext, prefix, nonce, key)


def vectors():
    """The document's test vectors, in its order: [(name, bytes)]."""
    client_seed, server_seed = bytes(range(32)), bytes(range(32, 64))
    client, server = kx_seed_keypair(client_seed), kx_seed_keypair(server_seed)
    anon_c2s, anon_s2c = session_keys(client, server, bytes(32))
    token_key, token = bytes([0x42] * 32), bytes(range(69))
    secret = blake2b(b"impulse-token-secret" + token, 32, key=token_key)
    token_c2s, token_s2c = session_keys(client, server, secret)
    plaintext = b"impulse sealed packet test"
    return [("client seed", client_seed), ("server seed", server_seed),
            ("client public key", client[0]), ("server public key", server[0]),
            ("anonymous c2s key", anon_c2s), ("anonymous s2c key", anon_s2c),
            ("token key", token_key), ("token", token), ("token secret", secret),
            ("token c2s key", token_c2s), ("token s2c key", token_s2c), ("plaintext", plaintext),
            ("sealed c2s, sequence 1", seal(anon_c2s, 1, plaintext)),
            ("sealed s2c, sequence 0x01020304", seal(anon_s2c, 0x01020304, plaintext))]


def vectors_in_doc(path: str) -> dict:
    """The indented "name: hex" lines between the markers of docs/PROTOCOL.md."""
    text = open(path, encoding="utf-8").read()
    if BEGIN not in text or END not in text:
        sys.exit(f"{path}: no {BEGIN} ... {END} block")
    block = text.split(BEGIN, 1)[1].split(END, 1)[0]
    lines = [line.strip() for line in block.splitlines() if line.startswith("    ") and ": " in line]
    return dict(line.split(": ", 1) for line in lines)


def main(argv) -> int:
    computed = [(name, value.hex()) for name, value in vectors()]
    if argv[1:2] != ["--check"]:
        if argv[1:]:
            sys.exit(__doc__)
        for name, value in computed:
            print(f"    {name}: {value}")
        return 0
    if len(argv) != 3:
        sys.exit(__doc__)
    doc = vectors_in_doc(argv[2])
    for name, value in computed:
        if name not in doc:
            print(f"MISMATCH: vector \"{name}\" missing from {argv[2]}")
            return 1
        if doc[name] != value:
            print(f"MISMATCH: \"{name}\"\n  doc:      {doc[name]}\n  computed: {value}")
            return 1
    extra = sorted(set(doc) - {name for name, _ in computed})
    if extra:
        print(f"MISMATCH: {argv[2]} lists vectors this script does not compute: {', '.join(extra)}")
        return 1
    print(f"all {len(computed)} vectors match {argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
