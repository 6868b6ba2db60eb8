import struct

import msgpack
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ndnps.protocol.codec import (CodecError, MixedSegments, decode_tensors, encode_tensors, flatten,
                         pack, param_spec, unflatten, unpack)
from ndnps.ndn.conventions import SEGMENT_SIZE, reassemble, segment

DTYPES = ["<f4", "<f8", "<f2", "<i8", "<i4", "<u2", "|u1", "|i1", "|b1", "<c8"]
SHAPES = [(), (0,), (1,), (7,), (3, 5), (2, 0, 4), (2, 3, 4, 1)]


def _array(dtype: str, shape: tuple, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.asarray(rng.standard_normal(shape) * 100).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_round_trip_dtypes_and_shapes(dtype, shape):
    a = _array(dtype, shape)
    tensors, meta = decode_tensors(encode_tensors({"x": a, "y": a.T}, version=7))
    assert meta == {"version": 7}
    assert list(tensors) == ["x", "y"]
    for got, want in zip(tensors.values(), (a, a.T)):
        assert got.dtype == np.dtype(dtype) and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_list_input_decodes_to_list_and_meta_kept():
    arrays = [np.arange(5, dtype=np.float32), np.eye(3, dtype=np.float64)]
    tensors, meta = decode_tensors(encode_tensors(arrays, version=3, train="t1", extra={"a": [1, 2]}))
    assert isinstance(tensors, list) and len(tensors) == 2
    assert meta == {"version": 3, "train": "t1", "extra": {"a": [1, 2]}}
    for got, want in zip(tensors, arrays):
        np.testing.assert_array_equal(got, want)


def test_big_endian_and_non_contiguous_become_little_endian():
    a = np.arange(24, dtype=">f4").reshape(4, 6)[:, ::2]
    (got,), _ = decode_tensors(encode_tensors([a]))
    assert got.dtype.str == "<f4"
    np.testing.assert_array_equal(got, a)


def test_raw_bytes_on_the_wire_not_lists():
    a = np.arange(1000, dtype=np.float32)
    blob = encode_tensors({"w": a})
    assert a.tobytes() in blob
    assert len(blob) < a.nbytes + 100


def test_decode_is_zero_copy_and_aligned():
    blob = encode_tensors({"a": np.ones(3, np.uint8), "b": np.arange(10, dtype=np.float64)})
    tensors, _ = decode_tensors(blob)
    for t in tensors.values():
        assert not t.flags.writeable  # a view into the immutable bytes, not a copy
        assert t.flags.aligned
        assert np.shares_memory(t, np.frombuffer(blob, np.uint8))
    # A bytearray gives writable views that alias it.
    buf = bytearray(blob)
    tensors, _ = decode_tensors(buf)
    tensors["b"][0] = 42.0
    assert bytes(buf) != blob and np.shares_memory(tensors["b"], np.frombuffer(buf, np.uint8))
    with pytest.raises(MixedSegments):                    # changed after it was encoded
        decode_tensors(buf)


def test_encoding_is_canonical():
    blob = encode_tensors({"a": np.arange(3, dtype=np.int16), "b": np.zeros((2, 2), np.float32)}, v=1)
    tensors, meta = decode_tensors(blob)
    assert encode_tensors(tensors, **meta) == blob


@pytest.mark.parametrize("bad", [{"o": np.array([object()])}, {"s": np.array(["abc"])},
                                 {1: np.zeros(2)}])
def test_encode_rejects_unsupported(bad):
    with pytest.raises(CodecError):
        encode_tensors(bad)


def test_every_truncation_and_any_trailing_byte_is_rejected():
    blob = encode_tensors({"a": np.arange(5, dtype=np.float32), "b": np.zeros(2, np.int8)}, version=1)
    for n in range(len(blob)):
        with pytest.raises(CodecError):
            decode_tensors(blob[:n])
    with pytest.raises(CodecError):
        decode_tensors(blob + b"\0")


def _forge(header: object, data: bytes = b"") -> bytes:
    """A blob with this header and data and a right checksum: what fails is the header."""
    h = msgpack.packb(header, use_bin_type=True)
    after = h + b"\0" * (-len(h) % 8) + data
    padded = after + b"\0" * (-len(after) % 8)
    words = sum(struct.unpack(f"<{len(padded) // 8}Q", padded)) % 2**64
    return struct.pack("<4sIQ", b"NPT2", len(h), words) + after


@pytest.mark.parametrize("header", [
    {"meta": {}, "names": None, "tensors": [["|O", [1]]]},          # object dtype
    {"meta": {}, "names": None, "tensors": [[">f4", [1]]]},         # big-endian
    {"meta": {}, "names": None, "tensors": [["<U4", [1]]]},         # strings
    {"meta": {}, "names": None, "tensors": [["nonsense", [1]]]},
    {"meta": {}, "names": None, "tensors": [["<f4", [-1]]]},
    {"meta": {}, "names": None, "tensors": [["<f4", [1.5]]]},
    {"meta": {}, "names": None, "tensors": [["<f4", [2**62, 2**62]]]},  # length bomb
    {"meta": {}, "names": None, "tensors": [["<f4", [1] * 33]]},
    {"meta": {}, "names": ["a", "a"], "tensors": [["<f4", [1]], ["<f4", [1]]]},
    {"meta": {}, "names": ["a"], "tensors": []},
    {"meta": [], "names": None, "tensors": []},
    {"meta": {}, "names": None},
    [1, 2, 3],
])
def test_forged_headers_raise_codec_error(header):
    with pytest.raises(CodecError):
        decode_tensors(_forge(header, b"\0" * 8))


def test_forged_valid_header_decodes():
    hdr = {"meta": {}, "names": None, "tensors": [["<f4", [2]]]}
    (a,), _ = decode_tensors(_forge(hdr, np.array([1, 2], "<f4").tobytes()))
    np.testing.assert_array_equal(a, [1, 2])


def test_a_blob_made_of_two_objects_segments_is_rejected():
    """Segments of one version of an object and of another made under the same names (a
    producer restarted mid-fetch): the same layout, different numbers."""
    a = encode_tensors([np.arange(4000, dtype=np.float32)], version=7)
    b = encode_tensors([np.arange(4000, dtype=np.float32) + 1], version=7)
    mixed = segment(a)[:1] + segment(b)[1:]
    assert len(reassemble(mixed)) == len(a)
    with pytest.raises(MixedSegments):
        decode_tensors(reassemble(mixed))


@pytest.mark.parametrize("where", [0, 5, -1])
def test_one_flipped_bit_is_rejected(where):
    blob = bytearray(encode_tensors([np.ones(100, np.float32)], step=3))
    start = 16                                   # after magic, header length and checksum
    blob[start + where if where >= 0 else where] ^= 0x10
    with pytest.raises(CodecError):
        decode_tensors(bytes(blob))


def test_bad_magic():
    blob = encode_tensors([np.zeros(1)])
    with pytest.raises(CodecError):
        decode_tensors(b"XXXX" + blob[4:])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_codec_error(buf):
    assume(not buf.startswith(b"NPT2"))
    with pytest.raises(CodecError):
        decode_tensors(buf)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=100))
def test_random_bytes_after_magic_raise_only_codec_error(tail):
    try:
        decode_tensors(b"NPT2" + tail)
    except CodecError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_blob_decodes_or_raises_codec_error(data):
    blob = bytearray(encode_tensors({"w": np.arange(6, dtype=np.float32).reshape(2, 3),
                                     "b": np.ones(3, np.int64)}, version=5))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(blob) - 1))
        blob[i] = data.draw(st.integers(0, 255))
    try:
        decode_tensors(bytes(blob))
    except CodecError:
        pass


def test_flatten_unflatten_round_trip():
    params = {"W0": np.arange(6, dtype=np.float32).reshape(2, 3), "b0": np.ones(3, np.float32),
              "s": np.array(5.0, np.float32)}
    vec = flatten(params)
    assert vec.dtype == np.float32 and vec.shape == (10,) and vec.flags.c_contiguous
    np.testing.assert_array_equal(vec, [0, 1, 2, 3, 4, 5, 1, 1, 1, 5])
    back = unflatten(vec, param_spec(params))
    assert list(back) == list(params)
    for k in params:
        assert back[k].shape == params[k].shape
        np.testing.assert_array_equal(back[k], params[k])
        assert np.shares_memory(back[k], vec)
    assert flatten({}).shape == (0,)


def test_flatten_casts_to_float32():
    assert flatten({"a": np.arange(3, dtype=np.float64)}).dtype == np.float32


@pytest.mark.parametrize("n", [9, 11])
def test_unflatten_rejects_wrong_size(n):
    with pytest.raises(CodecError):
        unflatten(np.zeros(n, np.float32), [("a", (2, 5))])


def test_unflatten_over_decoded_blob_is_zero_copy():
    params = {"W": np.ones((4, 4), np.float32), "b": np.zeros(4, np.float32)}
    (vec,), meta = decode_tensors(encode_tensors([flatten(params)], version=2))
    back = unflatten(vec, param_spec(params))
    assert not back["W"].flags.writeable and np.shares_memory(back["W"], vec)


@pytest.mark.parametrize("size", [0, 1, SEGMENT_SIZE - 1, SEGMENT_SIZE, SEGMENT_SIZE + 1, 5 * SEGMENT_SIZE + 17])
def test_segment_sizes_and_reassembly(size):
    blob = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    segs = segment(blob)
    assert all(len(s) <= SEGMENT_SIZE for s in segs)
    assert all(len(s) == SEGMENT_SIZE for s in segs[:-1])
    assert len(segs) == max(1, -(-size // SEGMENT_SIZE))
    assert reassemble(segs) == blob


def test_segment_custom_size_and_real_model_blob():
    blob = encode_tensors({"W": np.zeros((300, 100), np.float32)}, version=1)
    segs = segment(blob, 1000)
    assert max(map(len, segs)) == 1000
    tensors, meta = decode_tensors(reassemble(segs))
    assert tensors["W"].shape == (300, 100) and meta == {"version": 1}
    with pytest.raises(ValueError):
        segment(blob, 0)


def test_pack_unpack():
    msg = {"op": "assign", "spec": {"kind": "mlp", "hidden": [64]}, "blob": b"\x00\xff", "lr": 0.1}
    assert unpack(pack(msg)) == msg


@pytest.mark.parametrize("buf", [b"", b"\xc1", b"\x92\x01", b"\x01\x02", b"\x81\x90\x01"])
def test_unpack_bad_input(buf):
    with pytest.raises(CodecError):
        unpack(buf)


def test_pack_unserialisable():
    with pytest.raises(CodecError):
        pack({"x": object()})


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_unpack_random_bytes_never_raises_other_errors(buf):
    try:
        unpack(buf)
    except CodecError:
        pass


# ---- straight to numpy buffers: the blob as pieces, segments cut from them ------------------

@given(st.lists(st.integers(0, 3000), max_size=5), st.integers(1, 9000),
       st.sampled_from(["<f4", "<i2", "|u1", "<f8"]))
@settings(max_examples=150, deadline=None)
def test_the_pieces_join_to_the_blob_and_cut_to_its_segments(sizes, size, dtype):
    from ndnps.client.segments import cut
    from ndnps.protocol.codec import tensor_pieces
    rng = np.random.default_rng(sum(sizes) + size)
    arrays = [rng.integers(0, 100, n).astype(dtype) for n in sizes]
    pieces = tensor_pieces(arrays, kind="x")
    blob = encode_tensors(arrays, kind="x")
    assert b"".join(pieces) == blob
    assert [bytes(s) for s in cut(pieces, size)] == segment(blob, size)
    assert [bytes(s) for s in cut(blob, size)] == segment(blob, size)


def test_a_tensors_piece_is_its_own_memory():
    from ndnps.protocol.codec import tensor_pieces
    vec = np.arange(1000, dtype=np.float32)
    pieces = tensor_pieces([vec], kind="params")
    assert any(isinstance(p, memoryview) and np.shares_memory(np.frombuffer(p, np.float32), vec)
               for p in pieces)
    # a producer's segments from the pieces: the vector's bytes copied once, into the packets
    from ndnps.client.security import DigestSigner
    from ndnps.client.segments import sign_segments
    from ndnps.client.wire import parse_data
    from ndnps.protocol import names
    wires = sign_segments(pieces, lambda s: names.distribute("ps", "t", 1, s), DigestSigner())
    assert b"".join(parse_data(w).content for w in wires) == encode_tensors([vec], kind="params")
