"""A small Impulse (protocol v10) client written from docs/PROTOCOL.md and schemas/impulse.fbs only.

The FlatBuffers bindings are generated at run time (`flatc --python`); call `load_bindings(dir)`
with the directory flatc wrote into before using anything that builds or reads datagrams.

Sections referred to below are those of docs/PROTOCOL.md.
"""

import hashlib
import math
import select
import socket
import struct
import sys
import time

import flatbuffers
import nacl.bindings as nb
import xxhash

PROTOCOL_VERSION = 11
MAX_DATAGRAM = 1200
MIN_CONNECT_BYTES = 248          # "The handshake", step 1 (protocol 6)
SESSIONLESS_PING_BYTES = 128     # "Ping and the server clock": >= the 88-byte Pong

W = None  # the generated module namespace impulse.wire, set by load_bindings()


def load_bindings(gen_dir):
    """Import the flatc-generated Python package impulse.wire from gen_dir."""
    global W
    if gen_dir not in sys.path:
        sys.path.insert(0, gen_dir)
    import importlib
    names = ["Envelope", "Message", "PacketHeader", "Vec3", "Quat", "QueryFilter", "Connect",
             "Challenge", "ConnectAccepted", "ConnectRejected", "Quantization", "CreateObject",
             "DestroyObject", "ApplyForce", "ApplyImpulse", "SetVelocity", "ApplyTorque",
             "SetAngularVelocity", "Raycast", "RaycastResult", "RayHitEntry", "SetInterest",
             "MoveKinematic", "SetFilter", "Ping", "Pong", "Disconnect", "RequestResult",
             "Snapshot", "CollisionEvents", "ResultCode", "BodyKind", "ShapeKind", "CreateJoint", "Input",
             "InputFrame", "InputMode",
             "DestroyJoint", "SetJointMotor", "JointKind", "JointMotorMode"]

    class NS:
        pass
    W = NS()
    for n in names:
        setattr(W, n, importlib.import_module("impulse.wire." + n))
    return W


# ----------------------------------------------------------------------------- XXH32
# XXH32 from the `xxhash` package (Debian: python3-xxhash).
_M32 = 0xFFFFFFFF


def xxh32(data, seed=0):
    return xxhash.xxh32_intdigest(bytes(data), seed)


# ----------------------------------------------------------------------------- crypto
def blake2b(msg, out, key=b""):
    return hashlib.blake2b(msg, digest_size=out, key=key).digest()


def token_key_id(key):
    """'Connect tokens', key id: first 4 bytes of a 16-byte keyed BLAKE2b."""
    return blake2b(b"impulse-token-key-id", 16, key)[:4]


def token_secret(token, key):
    """'Sealed packets', binding to the token."""
    return blake2b(b"impulse-token-secret" + token, 32, key)


def issue_token(key, client_id, expiry, max_objects, nonce):
    """'Connect tokens', Issuing (what a backend does). Returns the 69-byte token."""
    claims = struct.pack("<QQII", client_id, expiry, max_objects, 0)
    head = bytes([1]) + token_key_id(key)
    ad = b"impulse connect token" + head
    sealed = nb.crypto_aead_xchacha20poly1305_ietf_encrypt(claims, ad, nonce, key)
    return head + nonce + sealed


def cookie_mac_input(ipv4, port, slot):
    return (b"impulse-cookie-1" + bytes([4]) + socket.inet_aton(ipv4) + bytes(12) +
            struct.pack("<HQ", port, slot))


def make_cookie(cookie_key, ipv4, port, slot):
    return struct.pack("<Q", slot) + blake2b(cookie_mac_input(ipv4, port, slot), 16, cookie_key)


def kx_seed_keypair(seed):
    pk, sk = nb.crypto_kx_seed_keypair(seed)
    return pk, sk


def derive_keys(client_pk, client_sk, server_pk, binding=None):
    """'Sealed packets', key derivation, client side: returns (key_c2s, key_s2c)."""
    s2c_half, c2s_half = nb.crypto_kx_client_session_keys(client_pk, client_sk, server_pk)
    binding = binding if binding is not None else bytes(32)
    key_c2s = blake2b(b"impulse-c2s-key5" + binding, 32, c2s_half)
    key_s2c = blake2b(b"impulse-s2c-key5" + binding, 32, s2c_half)
    return key_c2s, key_s2c


def _nonce(seq):
    return bytes(4) + struct.pack("<Q", seq)


def seal(key, seq, plaintext):
    ad = b"IMPS" + struct.pack("<I", seq)
    return ad + nb.crypto_aead_chacha20poly1305_ietf_encrypt(plaintext, ad, _nonce(seq), key)


def open_sealed(key, datagram):
    """Returns (seq, plaintext) or raises ValueError."""
    if len(datagram) < 24 or datagram[:4] != b"IMPS":
        raise ValueError("not sealed")
    (seq,) = struct.unpack_from("<I", datagram, 4)
    try:
        pt = nb.crypto_aead_chacha20poly1305_ietf_decrypt(datagram[8:], datagram[:8], _nonce(seq), key)
    except Exception as e:  # nacl.exceptions.CryptoError
        raise ValueError("tag does not verify") from e
    return seq, pt


class ReplayWindow:
    """'Sealed packets', Receiving, steps 3 and 5: 256 entries, slot seq mod 256."""

    def __init__(self):
        self.slots = [None] * 256
        self.newest = 0

    def check(self, seq):
        if seq == 0:
            return False
        if self.newest and seq + 256 <= self.newest:
            return False
        return self.slots[seq % 256] != seq

    def record(self, seq):
        self.slots[seq % 256] = seq
        if seq > self.newest:
            self.newest = seq


# ----------------------------------------------------------------------------- bits
class CodecError(Exception):
    def __init__(self, kind, detail=""):
        super().__init__(kind + (": " + detail if detail else ""))
        self.kind = kind


class BitReader:
    def __init__(self, data, start_byte=0):
        self.data = data
        self.pos = start_byte * 8
        self.nbits = len(data) * 8

    def read(self, n):
        if self.pos + n > self.nbits:
            raise CodecError("Truncated")
        v = 0
        for j in range(n):
            p = self.pos + j
            v |= ((self.data[p >> 3] >> (p & 7)) & 1) << j
        self.pos += n
        return v

    def eg(self, k):
        z = 0
        while True:
            if self.pos >= self.nbits:
                raise CodecError("Truncated")
            if self.read(1):
                break
            z += 1
            if z > 32 - k:
                raise CodecError("BadRecord", "EG code too long")
        n = z + k
        return (1 << n) + self.read(n) - (1 << k)

    def egx(self, k):
        v = self.eg(k)
        if v == 0xFFFFFFFF:
            lo = self.read(32)
            hi = self.read(32)
            v = lo | (hi << 32)
            if v < 0xFFFFFFFF:
                raise CodecError("BadRecord", "escaped EGx value has a shorter code")
        return v

    def remaining(self):
        return self.nbits - self.pos


class BitWriter:
    def __init__(self):
        self.bits = []

    def write(self, v, n):
        for j in range(n):
            self.bits.append((v >> j) & 1)

    def eg(self, u, k):
        w = u + (1 << k)
        n = w.bit_length() - 1
        self.write(0, n - k)
        self.write(1, 1)
        self.write(w - (1 << n), n)

    def egx(self, v, k):
        if v >= 0xFFFFFFFF:
            self.eg(0xFFFFFFFF, k)
            self.write(v & _M32, 32)
            self.write(v >> 32, 32)
        else:
            self.eg(v, k)

    def tobytes(self):
        out = bytearray((len(self.bits) + 7) // 8)
        for i, b in enumerate(self.bits):
            if b:
                out[i >> 3] |= 1 << (i & 7)
        return bytes(out)


def zz_enc(d):
    d &= _M32
    d = d - (1 << 32) if d >= 1 << 31 else d
    return ((d << 1) ^ (d >> 31)) & _M32


def zz_dec(u):
    v = (u >> 1) ^ (-(u & 1))
    return v  # a Python int: signed


def zz_dec32(u):
    """Decode and read the result as a signed 32-bit value."""
    v = zz_dec(u) & _M32
    return v - (1 << 32) if v >= 1 << 31 else v


def zz64_enc(d):
    d &= (1 << 64) - 1
    d = d - (1 << 64) if d >= 1 << 63 else d
    return ((d << 1) ^ (d >> 63)) & ((1 << 64) - 1)


def round_half_away(x):
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def bits_f32(u):
    return struct.unpack("<f", struct.pack("<I", u))[0]


# ----------------------------------------------------------------------------- quantisation
class Quant:
    """'Snapshot payload', section 1."""

    def __init__(self, world_bound=1024.0, fp=9, n=10, max_lin=64.0, fv=7, max_ang=32.0, fa=7):
        self.world_bound, self.fp, self.n = world_bound, fp, n
        self.max_lin, self.fv, self.max_ang, self.fa = max_lin, fv, max_ang, fa
        ok = (0 < world_bound <= 32768 and 0 <= fp <= 20 and 6 <= n <= 15 and max_lin > 0 and
              0 <= fv <= 15 and max_ang > 0 and 0 <= fa <= 15)
        if ok:
            self.pmax = math.floor(world_bound * 2.0 ** fp)
            self.vmax = math.floor(max_lin * 2.0 ** fv)
            self.amax = math.floor(max_ang * 2.0 ** fa)
            ok = (1 <= self.pmax <= 2 ** 24 and 1 <= self.vmax <= 32767 and 1 <= self.amax <= 32767)
        if not ok:
            raise CodecError("BadHeader", "unusable quantisation parameters")
        self.omax = 2 ** n - 1
        self.wp = (2 * self.pmax).bit_length()   # smallest w with 2^w >= 2*max+1
        self.wv = (2 * self.vmax).bit_length()
        self.wa = (2 * self.amax).bit_length()

    @classmethod
    def from_fb(cls, q):
        return cls(q.WorldBound(), q.PositionFractionBits(), q.OrientationBits(), q.MaxLinearSpeed(),
                   q.LinearVelocityFractionBits(), q.MaxAngularSpeed(), q.AngularVelocityFractionBits())

    def qpos(self, x):
        return max(-self.pmax, min(self.pmax, round_half_away(x * 2.0 ** self.fp)))

    def qvel(self, x):
        return max(-self.vmax, min(self.vmax, round_half_away(x * 2.0 ** self.fv)))

    def qang(self, x):
        return max(-self.amax, min(self.amax, round_half_away(x * 2.0 ** self.fa)))

    def qorient(self, q):
        mags = [abs(v) for v in q]
        largest = mags.index(max(mags))
        if q[largest] < 0:
            q = [-v for v in q]
        # GUESS (section 1 gives no precision): evaluated in binary32, as in the example; in double
        # precision the identity's (0 + 1/sqrt2) / sqrt2 * 1023 is 511.49999999999994 -> 511, not 512.
        r2, ir2 = f32(math.sqrt(2)), f32(1 / math.sqrt(2))
        c = [max(0, min(self.omax, round_half_away(f32(f32(f32(f32(q[i]) + ir2) / r2) * self.omax))))
             for i in range(4) if i != largest]
        return largest, c

    def dq_orient(self, largest, c):
        v = [ci / self.omax * math.sqrt(2) - 1 / math.sqrt(2) for ci in c]
        d = math.sqrt(max(0.0, 1 - sum(x * x for x in v)))
        q = v[:largest] + [d] + v[largest:]
        norm = math.sqrt(sum(x * x for x in q))
        return tuple(x / norm for x in q)


class QState:
    __slots__ = ("p", "largest", "c", "v", "w", "at_rest")

    def __init__(self, p, largest, c, v, w, at_rest):
        self.p, self.largest, self.c, self.v, self.w, self.at_rest = list(p), largest, list(c), list(v), list(w), at_rest

    def copy(self):
        return QState(self.p, self.largest, self.c, self.v, self.w, self.at_rest)


class SnapObject:
    def __init__(self, index, generation, body, shape, sensor, dims):
        self.index, self.generation = index, generation
        self.body, self.shape, self.sensor, self.dims = body, shape, sensor, dims
        self.ring = []  # [(sequence, QState)], newest last, at most R = 32

    @property
    def id(self):
        return (self.generation << 32) | self.index

    def state(self):
        return self.ring[-1][1]

    def view(self, q, tick=None):
        s = self.state()
        return {
            "id": self.id, "index": self.index, "generation": self.generation, "kind": self.body,
            "shape": self.shape, "sensor": self.sensor, "dims": self.dims,
            "position": tuple(x * 2.0 ** -q.fp for x in s.p),
            "orientation": q.dq_orient(s.largest, s.c),
            "velocity": tuple(x * 2.0 ** -q.fv for x in s.v),
            "angular_velocity": tuple(x * 2.0 ** -q.fa for x in s.w),
            "at_rest": bool(s.at_rest), "tick": tick,
        }


RING = 32


def _ser_state(kind, index, gen, s):
    return (struct.pack("<BII", kind, index, gen) + struct.pack("<3i", *s.p) + struct.pack("<3h", *s.v) +
            struct.pack("<3h", *s.w) + struct.pack("<3H", *s.c) + struct.pack("<BB", s.largest, s.at_rest))


class SnapshotReceiver:
    """'Snapshot payload', sections 2-7: decodes payloads against per-object rings."""

    def __init__(self, quant):
        self.q = quant
        self.objects = {}          # index -> SnapObject
        self.last_applied = None
        self.last_tick = None

    def _read_full(self, r):
        q = self.q
        at_rest = r.read(1)
        p = []
        for _ in range(3):
            f = r.read(q.wp)
            if f > 2 * q.pmax:
                raise CodecError("BadRecord", "position field out of range")
            p.append(f - q.pmax)
        largest = r.read(2)
        c = [r.read(q.n) for _ in range(3)]
        v, w = [0, 0, 0], [0, 0, 0]
        if not at_rest:
            v = []
            for _ in range(3):
                f = r.read(q.wv)
                if f > 2 * q.vmax:
                    raise CodecError("BadRecord", "velocity out of range")
                v.append(f - q.vmax)
            w = []
            for _ in range(3):
                f = r.read(q.wa)
                if f > 2 * q.amax:
                    raise CodecError("BadRecord", "angular velocity out of range")
                w.append(f - q.amax)
        return QState(p, largest, c, v, w, at_rest)

    def _deltas(self, r, k):
        d = [zz_dec32(r.eg(k)) for _ in range(3)]
        if d == [0, 0, 0]:
            raise CodecError("BadRecord", "changed bit with all-zero deltas")
        return d

    def decode(self, data, sequence):
        """Decode completely (no state change). Returns a list of records."""
        q = self.q
        if self.last_applied is not None and ((sequence - self.last_applied) & _M32) - (
                (1 << 32) if ((sequence - self.last_applied) & _M32) >= 1 << 31 else 0) <= 0:
            raise CodecError("Stale")
        if len(data) < 4:
            raise CodecError("Truncated")
        (checksum,) = struct.unpack_from("<I", data, 0)
        r = BitReader(data, 4)
        count = r.eg(3)
        if count > r.remaining() // 5:
            raise CodecError("BadHeader", "count too large")
        prev = -1
        recs = []
        ser = bytearray()
        for _ in range(count):
            index = prev + 1 + r.eg(2)
            if index >= 1 << 20:
                raise CodecError("TooManyObjects")
            prev = index
            if r.read(1) == 0:
                # delta
                dist = r.eg(2) + 1
                if dist > 1 << 20:
                    raise CodecError("BadRecord", "distance")
                obj = self.objects.get(index)
                if obj is None:
                    raise CodecError("UnknownBaseline", "index %d not held" % index)
                bseq = (sequence - dist) & _M32
                base = None
                for s, st in obj.ring:
                    if s == bseq:
                        base = st
                if base is None:
                    raise CodecError("UnknownBaseline", "sequence %d not in ring" % bseq)
                ns = base.copy()
                ns.at_rest = r.read(1)
                if r.read(1):
                    d = self._deltas(r, 4)
                    ns.p = [base.p[i] + d[i] for i in range(3)]
                if r.read(1):
                    if r.read(1):
                        d = self._deltas(r, 3)
                        ns.c = [base.c[i] + d[i] for i in range(3)]
                    else:
                        ns.largest = r.read(2)
                        if ns.largest == base.largest:
                            raise CodecError("BadRecord", "absolute orientation with same largest")
                        ns.c = [r.read(q.n) for _ in range(3)]
                if ns.at_rest:
                    ns.v, ns.w = [0, 0, 0], [0, 0, 0]
                else:
                    if r.read(1):
                        d = self._deltas(r, 3)
                        ns.v = [base.v[i] + d[i] for i in range(3)]
                    if r.read(1):
                        d = self._deltas(r, 3)
                        ns.w = [base.w[i] + d[i] for i in range(3)]
                if (any(abs(x) > q.pmax for x in ns.p) or any(not 0 <= x <= q.omax for x in ns.c) or
                        any(abs(x) > q.vmax for x in ns.v) or any(abs(x) > q.amax for x in ns.w)):
                    raise CodecError("BadRecord", "value out of range")
                recs.append(("delta", index, obj.generation, ns))
                ser += _ser_state(0, index, obj.generation, ns)
            elif r.read(1) == 0:
                gen = r.eg(0) + 1
                body = r.read(2)
                shape = r.read(3)
                sensor = r.read(1)
                # An asset's id: a hull (4, protocol 8), a mesh (5) or a heightfield (6, protocol 9).
                asset = r.read(16) if shape in (4, 5, 6) else None
                dims = []
                for _ in range(3):
                    u = r.read(32)
                    x = bits_f32(u)
                    if not math.isfinite(x) or x < 0 or (u >> 31):
                        raise CodecError("BadRecord", "dims")
                    dims.append(u)
                # Every 3-bit shape kind is known since protocol 11 (7: Cylinder).
                if body > 2:
                    raise CodecError("BadRecord", "body kind")
                st = self._read_full(r)
                recs.append(("entry", index, gen, st, body, shape, sensor, tuple(bits_f32(u) for u in dims)))
                ser += _ser_state(1, index, gen, st) + struct.pack("<BBB3I", body, shape, sensor, *dims)
                if asset is not None:
                    ser += struct.pack("<H", asset)
            else:
                recs.append(("exit", index))
                ser += struct.pack("<BI", 2, index)
        rest = r.remaining()
        if rest > 7 or (rest and r.read(rest) != 0):
            raise CodecError("BadHeader", "trailing bits")
        if xxh32(bytes(ser)) != checksum:
            raise CodecError("ChecksumMismatch")
        return recs, bytes(ser)

    def apply(self, data, sequence, tick=None):
        recs, _ = self.decode(data, sequence)
        for rec in recs:
            kind, index = rec[0], rec[1]
            if kind == "exit":
                self.objects.pop(index, None)
            elif kind == "entry":
                _, _, gen, st, body, shape, sensor, dims = rec
                obj = self.objects.get(index)
                if obj is None or obj.generation != gen:
                    obj = SnapObject(index, gen, body, shape, sensor, dims)
                    self.objects[index] = obj
                else:
                    obj.body, obj.shape, obj.sensor, obj.dims = body, shape, sensor, dims
                obj.ring.append((sequence, st))
                del obj.ring[:-RING]
            else:
                obj = self.objects[index]
                obj.ring.append((sequence, rec[3]))
                del obj.ring[:-RING]
        self.last_applied = sequence
        self.last_tick = tick
        return recs


def encode_snapshot(records, q):
    """A sender for tests: records are ('entry', index, gen, QState, body, shape, sensor, dims),
    ('delta', index, gen, QState, distance, base QState) or ('exit', index), ascending index."""
    bw = BitWriter()
    bw.eg(len(records), 3)
    prev = -1
    ser = bytearray()
    for rec in records:
        index = rec[1]
        bw.eg(index - prev - 1, 2)
        prev = index
        if rec[0] == "exit":
            bw.write(1, 1)
            bw.write(1, 1)
            ser += struct.pack("<BI", 2, index)
        elif rec[0] == "entry":
            _, _, gen, s, body, shape, sensor, dims = rec
            bw.write(1, 1)
            bw.write(0, 1)
            bw.eg(gen - 1, 0)
            bw.write(body, 2)
            bw.write(shape, 3)
            bw.write(sensor, 1)
            if shape in (4, 5, 6):
                bw.write(0, 16)  # asset 0
            for d in dims:
                bw.write(f32_bits(d), 32)
            bw.write(s.at_rest, 1)
            for x in s.p:
                bw.write(x + q.pmax, q.wp)
            bw.write(s.largest, 2)
            for c in s.c:
                bw.write(c, q.n)
            if not s.at_rest:
                for x in s.v:
                    bw.write(x + q.vmax, q.wv)
                for x in s.w:
                    bw.write(x + q.amax, q.wa)
            ser += _ser_state(1, index, gen, s) + struct.pack("<BBB3I", body, shape, sensor,
                                                              *[f32_bits(d) for d in dims])
            if shape in (4, 5, 6):
                ser += struct.pack("<H", 0)
        else:
            _, _, gen, s, dist, b = rec
            bw.write(0, 1)
            bw.eg(dist - 1, 2)
            bw.write(s.at_rest, 1)
            for new, old, k in ((s.p, b.p, 4),):
                ch = new != old
                bw.write(int(ch), 1)
                if ch:
                    for i in range(3):
                        bw.eg(zz_enc(new[i] - old[i]), k)
            chq = s.c != b.c or s.largest != b.largest
            bw.write(int(chq), 1)
            if chq:
                if s.largest == b.largest:
                    bw.write(1, 1)
                    for i in range(3):
                        bw.eg(zz_enc(s.c[i] - b.c[i]), 3)
                else:
                    bw.write(0, 1)
                    bw.write(s.largest, 2)
                    for c in s.c:
                        bw.write(c, q.n)
            if not s.at_rest:
                for new, old in ((s.v, b.v), (s.w, b.w)):
                    ch = new != old
                    bw.write(int(ch), 1)
                    if ch:
                        for i in range(3):
                            bw.eg(zz_enc(new[i] - old[i]), 3)
            ser += _ser_state(0, index, gen, s)
    return struct.pack("<I", xxh32(bytes(ser))) + bw.tobytes(), bytes(ser)


# ----------------------------------------------------------------------------- collision events
OCT_M = 2047


def _sign(t):
    return 1.0 if t >= 0 else -1.0  # -0.0 >= 0 is True


def oct_decode(u, v):
    """'Collision events', Normal: every operation rounded to binary32."""
    M = f32(OCT_M)
    x = f32(u / M)
    y = f32(v / M)
    z = f32(f32(1.0 - abs(x)) - abs(y))
    if z < 0:
        x, y = f32(f32(1.0 - abs(y)) * _sign(x)), f32(f32(1.0 - abs(x)) * _sign(y))
    L = f32(math.sqrt(f32(f32(f32(x * x) + f32(y * y)) + f32(z * z))))
    return (f32(x / L), f32(y / L), f32(z / L))


def oct_encode(n):
    x, y, z = (f32(c) for c in n)
    m = max(abs(x), abs(y), abs(z))
    if m == 0 or not math.isfinite(m):
        return 0, 0
    s = (f32(x / m), f32(y / m), f32(z / m))
    l = f32(f32(abs(s[0]) + abs(s[1])) + abs(s[2]))
    ox, oy = f32(s[0] / l), f32(s[1] / l)
    if s[2] < 0:
        ox, oy = f32(f32(1.0 - abs(oy)) * _sign(ox)), f32(f32(1.0 - abs(ox)) * _sign(oy))
    u = max(-OCT_M, min(OCT_M, round_half_away(f32(ox * OCT_M))))
    v = max(-OCT_M, min(OCT_M, round_half_away(f32(oy * OCT_M))))
    return u, v


def decode_events(block, q):
    """Returns a list of dicts (tick, sequence, type, a, b, point, normal, p, uv). All or nothing."""
    if len(block) < 5:
        raise CodecError("Truncated")
    (checksum,) = struct.unpack_from("<I", block, 0)
    if xxh32(bytes(block[4:])) != checksum:
        raise CodecError("ChecksumMismatch")
    r = BitReader(block, 4)
    count = r.read(5)
    events = []
    if count:
        base_tick = r.egx(16)
        base_seq = r.eg(16) & _M32
        prev_seq = (base_seq - 1) & _M32
        prev_tick = base_tick
        for _ in range(count):
            seq = (prev_seq + 1 + zz_dec32(r.eg(0))) & _M32
            tick = (prev_tick + zz_dec(r.egx(0))) & ((1 << 64) - 1)
            typ = r.read(2)
            ai = r.eg(8) & _M32
            ag = (r.eg(0) + 1) & _M32
            bi = (ai + zz_dec32(r.eg(6))) & _M32
            bg = (r.eg(0) + 1) & _M32
            if typ >= 2:  # protocol 7: JointAdded (2), JointRemoved (3) ("Joint events")
                ji = r.eg(4) & _M32
                jg = (r.eg(0) + 1) & _M32
                detail = r.read(3)
                if detail > (5 if typ == 2 else 2):
                    raise CodecError("BadRecord", "joint detail")
                anchors = []
                if typ == 2:
                    for _ in range(6):
                        f = r.read(q.wp)
                        if f > 2 * q.pmax:
                            raise CodecError("BadRecord", "anchor")
                        anchors.append((f - q.pmax) * 2.0 ** -q.fp)
                events.append({"sequence": seq, "tick": tick, "type": typ, "a": (ag << 32) | ai,
                               "b": (bg << 32) | bi, "joint": (jg << 32) | ji, "detail": detail,
                               "anchor_a": tuple(anchors[:3]), "anchor_b": tuple(anchors[3:])})
                prev_seq, prev_tick = seq, tick
                continue
            p = []
            for _ in range(3):
                f = r.read(q.wp)
                if f > 2 * q.pmax:
                    raise CodecError("BadRecord", "point")
                p.append(f - q.pmax)
            uv = []
            for _ in range(2):
                f = r.read(12)
                if f == 4095:
                    raise CodecError("BadRecord", "normal")
                uv.append(f - 2047)
            events.append({"sequence": seq, "tick": tick, "type": typ, "a": (ag << 32) | ai,
                           "b": (bg << 32) | bi, "p": p, "uv": uv,
                           "point": tuple(x * 2.0 ** -q.fp for x in p), "normal": oct_decode(*uv)})
            prev_seq, prev_tick = seq, tick
    rest = r.remaining()
    if rest > 7 or (rest and r.read(rest) != 0):
        raise CodecError("BadHeader", "trailing bits")
    return events


def encode_events(events, q):
    """events: dicts with sequence, tick, type, a, b, point (metres), normal (unit vector)."""
    bw = BitWriter()
    bw.write(len(events), 5)
    if events:
        bw.egx(events[0]["tick"], 16)
        bw.eg(events[0]["sequence"], 16)
        prev_seq = (events[0]["sequence"] - 1) & _M32
        prev_tick = events[0]["tick"]
        for e in events:
            bw.eg(zz_enc(e["sequence"] - prev_seq - 1), 0)
            bw.egx(zz64_enc(e["tick"] - prev_tick), 0)
            bw.write(e["type"], 2)
            ai, ag = e["a"] & _M32, e["a"] >> 32
            bi, bg = e["b"] & _M32, e["b"] >> 32
            bw.eg(ai, 8)
            bw.eg(ag - 1, 0)
            bw.eg(zz_enc(bi - ai), 6)
            bw.eg(bg - 1, 0)
            for x in e["point"]:
                bw.write(q.qpos(x) + q.pmax, q.wp)
            u, v = oct_encode(e["normal"])
            bw.write(u + 2047, 12)
            bw.write(v + 2047, 12)
            prev_seq, prev_tick = e["sequence"], e["tick"]
    body = bw.tobytes()
    return struct.pack("<I", xxh32(body)) + body


# ----------------------------------------------------------------------------- datagram checks
class BadDatagram(Exception):
    pass


SERVER_MESSAGES = {"Challenge", "ConnectAccepted", "ConnectRejected", "RequestResult", "RaycastResult",
                   "Snapshot", "CollisionEvents", "Pong", "Disconnect"}

# Field layouts of the tables a server sends, for the checks of "Checking a datagram without a
# FlatBuffers verifier": slot -> (kind, size/align). kinds: s = scalar, st = struct, v = vector of
# elements of that size, str = string, t = table.
_LAYOUT = {
    "Envelope": {0: ("s", 2), 1: ("s", 1), 2: ("u", 4), 3: ("st", 12, 4), 4: ("s", 8)},
    "Challenge": {0: ("v", 1)},
    "ConnectAccepted": {0: ("s", 4), 1: ("s", 2), 2: ("s", 2), 3: ("s", 8), 4: ("t", "Quantization"),
                        5: ("s", 4), 6: ("s", 4), 7: ("s", 1), 8: ("s", 8), 9: ("s", 8), 10: ("v", 1),
                        11: ("s", 1), 12: ("v", 1)},
    "Quantization": {0: ("s", 4), 1: ("s", 1), 2: ("s", 1), 3: ("s", 4), 4: ("s", 1), 5: ("s", 4),
                     6: ("s", 1)},
    "ConnectRejected": {0: ("s", 2), 1: ("str",)},
    "RequestResult": {0: ("s", 4), 1: ("s", 2), 2: ("s", 8), 3: ("str",), 4: ("s", 8)},
    "RaycastResult": {0: ("s", 4), 1: ("s", 2), 2: ("s", 8), 3: ("v", 40, 8), 4: ("s", 1), 5: ("str",)},
    "Snapshot": {0: ("s", 8), 1: ("v", 1), 2: ("s", 2)},
    "CollisionEvents": {0: ("v", 56, 8), 1: ("v", 1)},
    "Pong": {0: ("s", 8), 1: ("s", 8), 2: ("s", 8)},
    "Disconnect": {0: ("str",)},
}


def _u32(b, p):
    return struct.unpack_from("<I", b, p)[0]


def _check_ref(b, p):
    if p < 0 or p + 4 > len(b) or p % 4:
        raise BadDatagram("reference out of bounds")
    o = _u32(b, p)
    if o == 0 or o >= 1 << 31 or p + o + 4 > len(b):
        raise BadDatagram("bad reference")
    return p + o


def _check_table(b, t, name, counter, depth):
    counter[0] += 1
    if counter[0] > 8 or depth > 8:
        raise BadDatagram("tree too large")
    if t < 0 or t + 4 > len(b) or t % 4:
        raise BadDatagram("table out of bounds")
    (soff,) = struct.unpack_from("<i", b, t)
    v = t - soff
    if v < 0 or v + 4 > len(b) or v % 2:
        raise BadDatagram("vtable out of bounds")
    vsize, tsize = struct.unpack_from("<HH", b, v)
    if vsize < 4 or v + vsize > len(b) or t + tsize > len(b):
        raise BadDatagram("vtable size")
    fields = {}
    for slot, spec in _LAYOUT[name].items():
        so = 4 + 2 * slot
        if so + 2 > vsize:
            continue
        (fo,) = struct.unpack_from("<H", b, v + so)
        if fo == 0:
            continue
        p = t + fo
        kind = spec[0]
        if kind == "s":
            if p + spec[1] > len(b) or p % spec[1]:
                raise BadDatagram("scalar")
        elif kind == "st":
            if p + spec[1] > len(b) or p % spec[2]:
                raise BadDatagram("struct")
        elif kind in ("v", "str", "t", "u"):
            q = _check_ref(b, p)
            if kind == "t":
                _check_table(b, q, spec[1], counter, depth + 1)
            elif kind == "u":
                fields["union"] = q
            else:
                if q % 4:
                    raise BadDatagram("vector alignment")
                n = _u32(b, q)
                es = 1 if kind == "str" else spec[1]
                if q + 4 + n * es > len(b):
                    raise BadDatagram("vector bounds")
                if kind == "v" and len(spec) > 2 and (q + 4) % spec[2]:
                    raise BadDatagram("vector element alignment")
                if kind == "str" and (q + 4 + n >= len(b) or b[q + 4 + n] != 0 or n > 256):
                    raise BadDatagram("string")
    return fields


def check_server_datagram(b):
    """Structural checks 2-7 of 'Checking a datagram without a FlatBuffers verifier'.
    Returns the message type name."""
    if len(b) < 8 or len(b) > MAX_DATAGRAM:
        raise BadDatagram("size")
    if b[4:8] != b"IMPL":
        raise BadDatagram("identifier")
    root = _u32(b, 0)
    if root == 0:
        raise BadDatagram("root offset")
    counter = [0]
    f = _check_table(b, root, "Envelope", counter, 1)
    env = W.Envelope.Envelope.GetRootAs(b, 0)
    if env.ProtocolVersion() != PROTOCOL_VERSION:
        raise BadDatagram("protocol version %d" % env.ProtocolVersion())
    names = {v: k for k, v in vars(W.Message.Message).items() if not k.startswith("_")}
    name = names.get(env.MessageType())
    if name not in SERVER_MESSAGES or "union" not in f:
        raise BadDatagram("message type %r" % (name,))
    _check_table(b, f["union"], name, counter, 2)
    return name


# ----------------------------------------------------------------------------- building
def _vec3(b, v):
    return W.Vec3.CreateVec3(b, float(v[0]), float(v[1]), float(v[2]))


def _bytes_vec(b, data):
    return b.CreateByteVector(bytes(data))


def build_envelope(msg_fn, header=(0, 0, 0), version=PROTOCOL_VERSION, apply_tick=0):
    """msg_fn(builder) -> (message type, offset). Returns the finished bytes ("IMPL").
    apply_tick (protocol 10, "Ticks"): a world-changing request applies before that tick's step."""
    b = flatbuffers.Builder(256)
    mtype, moff = msg_fn(b)
    E = W.Envelope
    E.EnvelopeStart(b)
    if apply_tick:
        E.EnvelopeAddApplyTick(b, apply_tick)
    E.EnvelopeAddProtocolVersion(b, version)
    E.EnvelopeAddMessageType(b, mtype)
    E.EnvelopeAddMessage(b, moff)
    E.EnvelopeAddHeader(b, W.PacketHeader.CreatePacketHeader(b, *header))
    b.Finish(E.EnvelopeEnd(b), file_identifier=b"IMPL")
    return bytes(b.Output())


def msg_connect(kx_public, cookie=None, token=None, name="pyclient", padding=0, version=PROTOCOL_VERSION):
    def fn(b):
        C = W.Connect
        nm = b.CreateString(name)
        ck = _bytes_vec(b, cookie) if cookie else None
        tk = _bytes_vec(b, token) if token else None
        pd = _bytes_vec(b, bytes(padding)) if padding else None
        kx = _bytes_vec(b, kx_public) if kx_public is not None else None
        C.ConnectStart(b)
        C.ConnectAddProtocolVersion(b, version)
        C.ConnectAddClientName(b, nm)
        if ck is not None:
            C.ConnectAddCookie(b, ck)
        if tk is not None:
            C.ConnectAddToken(b, tk)
        if pd is not None:
            C.ConnectAddPadding(b, pd)
        if kx is not None:
            C.ConnectAddKxPublic(b, kx)
        return W.Message.Message.Connect, C.ConnectEnd(b)
    return fn


def build_connect(kx_public, cookie=None, token=None, name="pyclient"):
    """A Connect padded so the datagram is at least MIN_CONNECT_BYTES."""
    pad = 0
    while True:
        d = build_envelope(msg_connect(kx_public, cookie, token, name, pad))
        if len(d) >= MIN_CONNECT_BYTES:
            return d
        pad += MIN_CONNECT_BYTES - len(d)


def msg_create(request_id, shape, dims, position, kind=0, mass=1.0, velocity=None, orientation=None,
               asleep=False, shared=False, friction=None, restitution=None):
    def fn(b):
        C = W.CreateObject
        C.CreateObjectStart(b)
        C.CreateObjectAddRequestId(b, request_id)
        C.CreateObjectAddKind(b, kind)
        C.CreateObjectAddShape(b, shape)
        C.CreateObjectAddDims(b, _vec3(b, dims))
        C.CreateObjectAddPosition(b, _vec3(b, position))
        if velocity is not None:
            C.CreateObjectAddVelocity(b, _vec3(b, velocity))
        C.CreateObjectAddMass(b, mass)
        if friction is not None:
            C.CreateObjectAddFriction(b, friction)
        if restitution is not None:
            C.CreateObjectAddRestitution(b, restitution)
        if orientation is not None:
            C.CreateObjectAddOrientation(b, W.Quat.CreateQuat(b, *orientation))
        if asleep:
            C.CreateObjectAddAsleep(b, True)
        if shared:
            C.CreateObjectAddShared(b, True)
        return W.Message.Message.CreateObject, C.CreateObjectEnd(b)
    return fn


def msg_destroy(request_id, oid):
    def fn(b):
        D = W.DestroyObject
        D.DestroyObjectStart(b)
        D.DestroyObjectAddRequestId(b, request_id)
        D.DestroyObjectAddId(b, oid)
        return W.Message.Message.DestroyObject, D.DestroyObjectEnd(b)
    return fn


def msg_impulse(request_id, oid, impulse, point=None):
    def fn(b):
        A = W.ApplyImpulse
        A.ApplyImpulseStart(b)
        A.ApplyImpulseAddRequestId(b, request_id)
        A.ApplyImpulseAddId(b, oid)
        A.ApplyImpulseAddImpulse(b, _vec3(b, impulse))
        if point is not None:
            A.ApplyImpulseAddPoint(b, _vec3(b, point))
        return W.Message.Message.ApplyImpulse, A.ApplyImpulseEnd(b)
    return fn


def msg_input(oid, mode, first_tick, frames):
    """Input ("Ticks"): frames[i] = ((linear), (angular)) for tick first_tick + i; no request id."""
    def fn(b):
        I = W.Input
        I.InputStartFramesVector(b, len(frames))
        for lin, ang in reversed(frames):  # FlatBuffers vectors are built back to front
            W.InputFrame.CreateInputFrame(b, *lin, *ang)
        vec = b.EndVector()
        I.InputStart(b)
        I.InputAddId(b, oid)
        I.InputAddMode(b, mode)
        I.InputAddFirstTick(b, first_tick)
        I.InputAddFrames(b, vec)
        return W.Message.Message.Input, I.InputEnd(b)
    return fn


def msg_raycast(request_id, origin, translation, all_hits=False, back_faces=False, filt=None, seen_tick=0,
                seen_fraction=0.0):
    def fn(b):
        R = W.Raycast
        R.RaycastStart(b)
        if seen_tick:
            R.RaycastAddSeenTick(b, seen_tick)
            R.RaycastAddSeenFraction(b, seen_fraction)
        R.RaycastAddRequestId(b, request_id)
        R.RaycastAddOrigin(b, _vec3(b, origin))
        R.RaycastAddTranslation(b, _vec3(b, translation))
        if all_hits:
            R.RaycastAddAll(b, True)
        if filt is not None:
            R.RaycastAddFilter(b, W.QueryFilter.CreateQueryFilter(b, *filt))
        if back_faces:
            R.RaycastAddBackFaces(b, True)
        return W.Message.Message.Raycast, R.RaycastEnd(b)
    return fn


def msg_create_joint(request_id, kind, body_a, body_b, anchor, axis=None, break_force=0.0):
    """CreateJoint ("Joints"); absent fields take their defaults."""
    def fn(b):
        M = W.CreateJoint
        M.CreateJointStart(b)
        M.CreateJointAddRequestId(b, request_id)
        M.CreateJointAddKind(b, kind)
        M.CreateJointAddBodyA(b, body_a)
        M.CreateJointAddBodyB(b, body_b)
        M.CreateJointAddAnchor(b, _vec3(b, anchor))
        if axis is not None:
            M.CreateJointAddAxis(b, _vec3(b, axis))
        M.CreateJointAddBreakForce(b, break_force)
        return W.Message.Message.CreateJoint, M.CreateJointEnd(b)
    return fn


def msg_destroy_joint(request_id, jid):
    def fn(b):
        M = W.DestroyJoint
        M.DestroyJointStart(b)
        M.DestroyJointAddRequestId(b, request_id)
        M.DestroyJointAddId(b, jid)
        return W.Message.Message.DestroyJoint, M.DestroyJointEnd(b)
    return fn


def msg_move_kinematic(request_id, oid, position, orientation=None):
    def fn(b):
        M = W.MoveKinematic
        M.MoveKinematicStart(b)
        M.MoveKinematicAddRequestId(b, request_id)
        M.MoveKinematicAddId(b, oid)
        M.MoveKinematicAddPosition(b, _vec3(b, position))
        if orientation is not None:
            M.MoveKinematicAddOrientation(b, W.Quat.CreateQuat(b, *orientation))
        return W.Message.Message.MoveKinematic, M.MoveKinematicEnd(b)
    return fn


def msg_ping(nonce):
    def fn(b):
        P = W.Ping
        P.PingStart(b)
        P.PingAddNonce(b, nonce)
        return W.Message.Message.Ping, P.PingEnd(b)
    return fn


def msg_disconnect(reason):
    def fn(b):
        s = b.CreateString(reason)
        D = W.Disconnect
        D.DisconnectStart(b)
        D.DisconnectAddReason(b, s)
        return W.Message.Message.Disconnect, D.DisconnectEnd(b)
    return fn


def union_as(env, cls_module, cls_name):
    t = env.Message()
    obj = getattr(cls_module, cls_name)()
    obj.Init(t.Bytes, t.Pos)
    return obj


def result_name(code):
    for k, v in vars(W.ResultCode.ResultCode).items():
        if not k.startswith("_") and v == code:
            return k
    return "Unknown(%d)" % code


# ----------------------------------------------------------------------------- the client
class ImpulseError(Exception):
    pass


class Client:
    def __init__(self, host, port, client_token_hex=None, bare_token_hex=None, name="pyclient"):
        self.addr = (host, port)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.name = name
        self.token = None
        self.secret = None
        if client_token_hex:
            raw = bytes.fromhex(client_token_hex.strip())
            if len(raw) <= 32:
                raise ImpulseError("client token too short")
            self.token, self.secret = raw[:-32], raw[-32:]
        elif bare_token_hex:
            self.token = bytes.fromhex(bare_token_hex.strip())  # no secret: cannot act (by design)
        self.connected = False
        self.closed_reason = None
        self.send_seq = 0
        self.acked_recv = set()         # server sequences we ack
        self.window = ReplayWindow()
        self.next_request_id = 1
        self.pending = {}               # request_id -> (msg_fn, last_sent, apply_tick)
        self.input_lead = None          # Snapshot.input_lead, the latest reported ("Ticks")
        self.stop_in_ms = 0             # Snapshot.stop_in_ms: a draining server's time left
        self.relayed = []               # (tick, [relayed input dicts]) per applied snapshot with Snapshot.inputs
        self.results = {}               # request_id -> result dict
        self.answer_counts = {}         # request_id -> answers received
        self.pongs = {}
        self.pong_counts = {}
        self.snap = None
        self.snap_history = []          # [(tick, {id: view})] of applied snapshots
        self.snapshot_errors = {}
        self.events = {}                # sequence -> event
        self.event_errors = {}
        self.unauthenticated = 0
        self.event_copies = 0           # events received, duplicates included
        self.peer_ack = 0               # newest of our sequences the server acked
        self.peer_acked = set()         # our sequences the server acked (header ack + ack_bits)
        self.bad_acks = 0               # ack fields no correct peer sends (check 8; ignored)
        self.handshake = {"challenges": 0}
        self.dropped = {}
        self.last_ack_ping = 0.0
        self.last_ping = 0.0
        self.recv_since_ack = False
        self.ping_nonce = 1000
        self.log = []

    # -- handshake
    def connect(self, timeout=3.0):
        self.kx_pk, self.kx_sk = nb.crypto_kx_keypair()
        cookie = None
        deadline = time.monotonic() + timeout
        last = 0.0
        while time.monotonic() < deadline:
            now = time.monotonic()
            if now - last >= 0.1:
                self.last_connect = build_connect(self.kx_pk, cookie, self.token, self.name)
                self.sock.sendto(self.last_connect, self.addr)
                last = now
            r, _, _ = select.select([self.sock], [], [], 0.02)
            if not r:
                continue
            data, src = self.sock.recvfrom(2048)
            if src != self.addr:
                continue
            try:
                name = check_server_datagram(data)
            except BadDatagram:
                continue
            env = W.Envelope.Envelope.GetRootAs(data, 0)
            if name == "Challenge":
                ch = union_as(env, W.Challenge, "Challenge")
                cookie = bytes(ch.Cookie(i) for i in range(ch.CookieLength()))
                self.handshake["challenges"] += 1
                self.handshake["cookie_len"] = len(cookie)
                self.handshake["challenge_bytes"] = len(data)
                self.handshake["connect_bytes"] = len(build_connect(self.kx_pk, cookie, self.token, self.name))
                last = 0.0  # echo at once
            elif name == "ConnectRejected":
                rj = union_as(env, W.ConnectRejected, "ConnectRejected")
                raise ImpulseError("ConnectRejected %s: %s" % (result_name(rj.Reason()),
                                                                (rj.Message() or b"").decode("utf-8", "replace")))
            elif name == "ConnectAccepted":
                ca = union_as(env, W.ConnectAccepted, "ConnectAccepted")
                echoed = bytes(ca.ClientKxPublic(i) for i in range(ca.ClientKxPublicLength()))
                if echoed != self.kx_pk:
                    # "Connect replay": it answers another Connect (a replay of an earlier one).
                    self._count(self.dropped, "ConnectAccepted for another key share")
                    continue
                spk = bytes(ca.KxPublic(i) for i in range(ca.KxPublicLength()))
                if len(spk) != 32:
                    raise ImpulseError("ConnectAccepted.kx_public is not 32 bytes")
                qt = ca.Quantization()
                if qt is None:
                    raise ImpulseError("ConnectAccepted without quantization")
                self.quant = Quant.from_fb(qt)
                binding = None
                if ca.TokenBound():
                    binding = self.secret if self.secret is not None else bytes(32)
                self.token_bound = ca.TokenBound()
                self.key_c2s, self.key_s2c = derive_keys(self.kx_pk, self.kx_sk, spk, binding)
                self.client_id = ca.ClientId()
                self.tick_hz = ca.TickHz()
                self.snapshot_hz = ca.SnapshotHz()
                self.accept_tick = ca.Tick()
                self.max_objects = ca.MaxObjects()
                self.next_request_id = ca.FirstRequestId() or 1
                self.snap = SnapshotReceiver(self.quant)
                self.handshake["accepted_bytes"] = len(data)
                self.connected = True
                return ca
        raise ImpulseError("connect timed out")

    # -- sending
    def _header(self):
        self.send_seq += 1
        ack = max(self.acked_recv) if self.acked_recv else 0
        bits = 0
        for i in range(32):
            if ack - 1 - i in self.acked_recv:
                bits |= 1 << i
        return (self.send_seq, ack, bits)

    def sealed_bytes(self, msg_fn):
        """Build and seal the next datagram (consumes a sequence) without sending it."""
        h = self._header()
        return seal(self.key_c2s, h[0], build_envelope(msg_fn, h))

    def send(self, msg_fn, apply_tick=0):
        h = self._header()
        self.sock.sendto(seal(self.key_c2s, h[0], build_envelope(msg_fn, h, apply_tick=apply_tick)), self.addr)

    def send_raw(self, data):
        self.sock.sendto(data, self.addr)

    def request(self, make, *args, apply_tick=0, **kw):
        """make(request_id, ...) -> msg_fn. Returns the request id; resent until answered.
        apply_tick: an action for that tick ("Ticks"); 0 = at arrival."""
        rid = self.next_request_id
        self.next_request_id += 1
        fn = make(rid, *args, **kw)
        self.pending[rid] = [fn, time.monotonic(), apply_tick]
        self.send(fn, apply_tick)
        return rid

    def ping(self):
        self.ping_nonce += 1
        self.pongs[self.ping_nonce] = None
        self.send(msg_ping(self.ping_nonce))
        return self.ping_nonce

    # -- receiving
    def _count(self, d, k):
        d[k] = d.get(k, 0) + 1

    def _receive(self, data):
        if data[:4] == b"IMPS" and len(data) >= 24:
            if not self.connected:
                self._count(self.dropped, "sealed before session")
                return
            (seq,) = struct.unpack_from("<I", data, 4)
            if not self.window.check(seq):
                self._count(self.dropped, "replay")
                return
            try:
                seq, pt = open_sealed(self.key_s2c, data)
            except ValueError:
                self.unauthenticated += 1
                return
            self.window.record(seq)
            try:
                name = check_server_datagram(pt)
            except BadDatagram as e:
                self._count(self.dropped, "bad datagram: %s" % e)
                return
            env = W.Envelope.Envelope.GetRootAs(pt, 0)
            h = env.Header()
            hseq = h.Sequence() if h else 0
            if hseq != seq:
                self._count(self.dropped, "header sequence != sealed sequence")
                return
            self.recv_since_ack = True
            self._note_acks(h)
            if self._dispatch(name, env, seq):
                self.acked_recv.add(seq)
                if len(self.acked_recv) > 64:
                    self.acked_recv = set(sorted(self.acked_recv)[-33:])
        else:
            try:
                name = check_server_datagram(data)
            except BadDatagram:
                self._count(self.dropped, "plaintext junk")
                return
            if name == "ConnectAccepted":
                self._count(self.dropped, "duplicate ConnectAccepted")
            else:
                self._count(self.dropped, "plaintext " + name)

    def _note_acks(self, h):
        """Check 8 of 'Checking a datagram without a FlatBuffers verifier'."""
        ack, bits = (h.Ack(), h.AckBits()) if h else (0, 0)
        if ack > self.send_seq or (ack == 0 and bits) or (ack and ack <= 32 and bits >> (ack - 1)):
            self.bad_acks += 1
            return
        if ack:
            self.peer_ack = max(self.peer_ack, ack)
            self.peer_acked.add(ack)
            for i in range(32):
                if bits >> i & 1:
                    self.peer_acked.add(ack - 1 - i)

    def _dispatch(self, name, env, seq):
        """Returns True when the datagram is to be acked."""
        if name == "RequestResult":
            rr = union_as(env, W.RequestResult, "RequestResult")
            rid = rr.RequestId()
            self._count(self.answer_counts, rid)
            if rid not in self.results:
                self.results[rid] = {"type": "RequestResult", "code": rr.Code(), "id": rr.Id(),
                                     "message": (rr.Message() or b"").decode("utf-8", "replace"),
                                     "tick": rr.Tick()}
            self.pending.pop(rid, None)
        elif name == "RaycastResult":
            rr = union_as(env, W.RaycastResult, "RaycastResult")
            rid = rr.RequestId()
            self._count(self.answer_counts, rid)
            hits = []
            for i in range(rr.HitsLength()):
                h = rr.Hits(i)
                pt, nm = h.Point(W.Vec3.Vec3()), h.Normal(W.Vec3.Vec3())
                hits.append({"id": h.Id(), "point": (pt.X(), pt.Y(), pt.Z()),
                             "normal": (nm.X(), nm.Y(), nm.Z()),
                             "fraction": h.Fraction()})
            if rid not in self.results:
                self.results[rid] = {"type": "RaycastResult", "code": rr.Code(), "tick": rr.Tick(),
                                     "hits": hits, "truncated": rr.Truncated(),
                                     "message": (rr.Message() or b"").decode("utf-8", "replace")}
            self.pending.pop(rid, None)
        elif name == "Snapshot":
            sn = union_as(env, W.Snapshot, "Snapshot")
            data = bytes(sn.Data(i) for i in range(sn.DataLength()))
            try:
                self.snap.apply(data, seq, sn.Tick())
            except CodecError as e:
                self._count(self.snapshot_errors, e.kind)
                return False
            if sn.InputLead() != -32768:
                self.input_lead = sn.InputLead()
            # A draining server's time left [ms], 0 when it is not stopping ("Snapshots").
            self.stop_in_ms = sn.StopInMs()
            # Other clients' inputs ("Snapshots"): keep the well-formed ones, at most 8.
            got = []
            for i in range(min(sn.InputsLength(), 8)):
                r = sn.Inputs(i)
                f = r.Frame(W.InputFrame.InputFrame())
                lv, av = f.Linear(W.Vec3.Vec3()), f.Angular(W.Vec3.Vec3())
                lin, ang = (lv.X(), lv.Y(), lv.Z()), (av.X(), av.Y(), av.Z())
                if r.Id() == 0 or r.Mode() not in (0, 1) or not all(math.isfinite(x) for x in lin + ang):
                    continue
                got.append({"id": r.Id(), "mode": r.Mode(), "linear": lin, "angular": ang, "repeats": r.Repeats()})
            if got:
                self.relayed.append((sn.Tick(), got))
                del self.relayed[:-600]
            views = {o.id: o.view(self.quant, sn.Tick()) for o in self.snap.objects.values()}
            self.snap_history.append((sn.Tick(), views))
            del self.snap_history[:-600]
        elif name == "CollisionEvents":
            ce = union_as(env, W.CollisionEvents, "CollisionEvents")
            block = bytes(ce.Packed(i) for i in range(ce.PackedLength()))
            try:
                evs = decode_events(block, self.quant)
            except CodecError as e:
                self._count(self.event_errors, e.kind)
                return False
            self.event_copies += len(evs)
            for e in evs:
                self.events.setdefault(e["sequence"], e)
        elif name == "Pong":
            pg = union_as(env, W.Pong, "Pong")
            self.pongs[pg.Nonce()] = (pg.Tick(), pg.ServerTimeUs(), time.monotonic())
            self._count(self.pong_counts, pg.Nonce())
        elif name == "Disconnect":
            d = union_as(env, W.Disconnect, "Disconnect")
            self.closed_reason = (d.Reason() or b"").decode("utf-8", "replace")
            self.connected = False
        else:
            self._count(self.dropped, "unexpected " + name)
        return True

    def pump(self, duration=0.0, send=True):
        """Receive for `duration` seconds (at least one poll), resending requests and acking."""
        end = time.monotonic() + duration
        while True:
            now = time.monotonic()
            wait = max(0.0, min(end - now, 0.01))
            r, _, _ = select.select([self.sock], [], [], wait)
            while r:
                data, src = self.sock.recvfrom(2048)
                if src == self.addr:
                    self._receive(data)
                r, _, _ = select.select([self.sock], [], [], 0)
            now = time.monotonic()
            if self.connected and send:
                for rid, ent in list(self.pending.items()):
                    if now - ent[1] >= 0.1:
                        ent[1] = now
                        self.send(ent[0], ent[2])  # a resent action keeps its tick
                interval = 1.0 / max(1, self.snapshot_hz)
                if self.recv_since_ack and now - self.last_ack_ping >= interval:
                    self.send(msg_ping(0))
                    self.last_ack_ping = now
                    self.recv_since_ack = False
                if now - self.last_ping >= 1.0:
                    self.last_ping = now
                    self.ping()
            if now >= end:
                return

    def wait_for(self, pred, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.pump(0.01)
            v = pred()
            if v:
                return v
        raise ImpulseError("timed out after %.1f s waiting for %s" % (timeout, what))

    def wait_result(self, rid, timeout=2.0):
        return self.wait_for(lambda: self.results.get(rid), timeout, "the answer to request %d" % rid)

    def objects(self):
        return {o.id: o.view(self.quant, self.snap.last_tick) for o in self.snap.objects.values()}

    def disconnect(self, reason="bye", copies=3):
        fn = msg_disconnect(reason)
        for _ in range(copies):
            self.send(fn)
        self.connected = False

    def close(self):
        self.sock.close()
