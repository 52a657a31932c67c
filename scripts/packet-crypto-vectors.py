#!/usr/bin/env python3
"""Independent reference of Impulse's sealed packets (docs/PROTOCOL.md, "Sealed packets").

Pure Python 3 (hashlib's BLAKE2b; X25519 after RFC 7748, ChaCha20-Poly1305 after RFC 8439), written
from the document alone, not from the C++ code. It prints the document's test vectors; the C++ unit
test tests/unit/shared/test_packet_crypto.cpp checks libsodium against the same hex, so the
document, this reference and the code cannot drift apart. Not constant-time: a reference, not for
production use.

    usage: scripts/packet-crypto-vectors.py          (prints the vectors)
"""
import hashlib
import struct

# ---- X25519 (RFC 7748, section 5) ----------------------------------------------------------
P = 2**255 - 19
A24 = 121665


def x25519(k: bytes, u: bytes) -> bytes:
    k = bytearray(k)
    k[0] &= 248
    k[31] &= 127
    k[31] |= 64
    scalar = int.from_bytes(k, "little")
    x1 = int.from_bytes(u, "little") & ((1 << 255) - 1)
    x2, z2, x3, z3, swap = 1, 0, x1, 1, 0
    for t in reversed(range(255)):
        bit = (scalar >> t) & 1
        swap ^= bit
        if swap:
            x2, x3, z2, z3 = x3, x2, z3, z2
        swap = bit
        a, b = (x2 + z2) % P, (x2 - z2) % P
        aa, bb = a * a % P, b * b % P
        e = (aa - bb) % P
        c, d = (x3 + z3) % P, (x3 - z3) % P
        da, cb = d * a % P, c * b % P
        x3 = (da + cb) ** 2 % P
        z3 = x1 * (da - cb) ** 2 % P
        x2 = aa * bb % P
        z2 = e * (aa + A24 * e) % P
    if swap:
        x2, x3, z2, z3 = x3, x2, z3, z2
    return (x2 * pow(z2, P - 2, P) % P).to_bytes(32, "little")


BASE = (9).to_bytes(32, "little")

# ---- ChaCha20-Poly1305 (RFC 8439) ----------------------------------------------------------


def _rotl(v, c):
    return ((v << c) & 0xFFFFFFFF) | (v >> (32 - c))


def _quarter(s, a, b, c, d):
    s[a] = (s[a] + s[b]) & 0xFFFFFFFF; s[d] = _rotl(s[d] ^ s[a], 16)
    s[c] = (s[c] + s[d]) & 0xFFFFFFFF; s[b] = _rotl(s[b] ^ s[c], 12)
    s[a] = (s[a] + s[b]) & 0xFFFFFFFF; s[d] = _rotl(s[d] ^ s[a], 8)
    s[c] = (s[c] + s[d]) & 0xFFFFFFFF; s[b] = _rotl(s[b] ^ s[c], 7)


def chacha20_block(key: bytes, counter: int, nonce: bytes) -> bytes:
    state = list(struct.unpack("<4I", b"expand 32-byte k")) + list(struct.unpack("<8I", key)) + \
        [counter] + list(struct.unpack("<3I", nonce))
    s = state[:]
    for _ in range(10):
        _quarter(s, 0, 4, 8, 12); _quarter(s, 1, 5, 9, 13); _quarter(s, 2, 6, 10, 14); _quarter(s, 3, 7, 11, 15)
        _quarter(s, 0, 5, 10, 15); _quarter(s, 1, 6, 11, 12); _quarter(s, 2, 7, 8, 13); _quarter(s, 3, 4, 9, 14)
    return struct.pack("<16I", *[(a + b) & 0xFFFFFFFF for a, b in zip(s, state)])


def chacha20_xor(key: bytes, counter: int, nonce: bytes, data: bytes) -> bytes:
    out = bytearray()
    for i in range(0, len(data), 64):
        block = chacha20_block(key, counter + i // 64, nonce)
        out += bytes(x ^ y for x, y in zip(data[i:i + 64], block))
    return bytes(out)


def poly1305(key: bytes, msg: bytes) -> bytes:
    r = int.from_bytes(key[:16], "little") & 0x0FFFFFFC0FFFFFFC0FFFFFFC0FFFFFFF
    s = int.from_bytes(key[16:], "little")
    acc, p = 0, (1 << 130) - 5
    for i in range(0, len(msg), 16):
        n = int.from_bytes(msg[i:i + 16] + b"\x01", "little")
        acc = (acc + n) * r % p
    return ((acc + s) & ((1 << 128) - 1)).to_bytes(16, "little")


def _pad16(b: bytes) -> bytes:
    return b"\x00" * (-len(b) % 16)


def aead_encrypt(key: bytes, nonce: bytes, plaintext: bytes, ad: bytes) -> bytes:
    otk = chacha20_block(key, 0, nonce)[:32]
    ct = chacha20_xor(key, 1, nonce, plaintext)
    mac_data = ad + _pad16(ad) + ct + _pad16(ct) + struct.pack("<QQ", len(ad), len(ct))
    return ct + poly1305(otk, mac_data)


# ---- Impulse -------------------------------------------------------------------------------


def kx_seed_keypair(seed: bytes):
    """libsodium crypto_kx_seed_keypair: sk = BLAKE2b-256(seed), pk = X25519(sk, 9)."""
    sk = hashlib.blake2b(seed, digest_size=32).digest()
    return x25519(sk, BASE), sk


def session_keys(client_pk, server_pk, shared, binding):
    """(client->server key, server->client key) from the X25519 shared secret."""
    h = hashlib.blake2b(shared + client_pk + server_pk, digest_size=64).digest()
    s2c_half, c2s_half = h[:32], h[32:]
    c2s = hashlib.blake2b(b"impulse-c2s-key5" + binding, digest_size=32, key=c2s_half).digest()
    s2c = hashlib.blake2b(b"impulse-s2c-key5" + binding, digest_size=32, key=s2c_half).digest()
    return c2s, s2c


def seal(key: bytes, sequence: int, plaintext: bytes) -> bytes:
    prefix = b"IMPS" + struct.pack("<I", sequence)
    nonce = b"\x00" * 4 + struct.pack("<Q", sequence)
    return prefix + aead_encrypt(key, nonce, plaintext, prefix)


def token_session_secret(token_key: bytes, token: bytes) -> bytes:
    return hashlib.blake2b(b"impulse-token-secret" + token, digest_size=32, key=token_key).digest()


def main():
    client_seed = bytes(range(32))
    server_seed = bytes(range(32, 64))
    client_pk, client_sk = kx_seed_keypair(client_seed)
    server_pk, server_sk = kx_seed_keypair(server_seed)
    shared = x25519(client_sk, server_pk)
    assert shared == x25519(server_sk, client_pk)
    print("client_seed      ", client_seed.hex())
    print("server_seed      ", server_seed.hex())
    print("client_public    ", client_pk.hex())
    print("server_public    ", server_pk.hex())
    anon_c2s, anon_s2c = session_keys(client_pk, server_pk, shared, bytes(32))
    print("anonymous c2s key", anon_c2s.hex())
    print("anonymous s2c key", anon_s2c.hex())
    token_key = bytes([0x42] * 32)
    token = bytes(range(69))
    secret = token_session_secret(token_key, token)
    print("token secret     ", secret.hex())
    bound_c2s, bound_s2c = session_keys(client_pk, server_pk, shared, secret)
    print("token c2s key    ", bound_c2s.hex())
    print("token s2c key    ", bound_s2c.hex())
    plaintext = b"impulse sealed packet test"
    print("plaintext        ", plaintext.hex())
    print("sealed c2s seq 1 ", seal(anon_c2s, 1, plaintext).hex())
    print("sealed s2c seq 0x01020304", seal(anon_s2c, 0x01020304, plaintext).hex())


if __name__ == "__main__":
    main()
