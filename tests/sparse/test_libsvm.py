from __future__ import annotations

import io

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from algorithms.sparse import CSRBatch, _libsvm_kernels, as_csr_batch, libsvm
from algorithms.sparse.libsvm import (
    LibsvmFormatError,
    iter_libsvm,
    load_libsvm,
    parse_libsvm,
    write_libsvm,
)


def random_batch(seed=0, n=50, d=30):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.2, format="csr", random_state=seed)
    X.data = rng.normal(size=X.nnz) * 10.0 ** rng.integers(-30, 30, size=X.nnz)
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return as_csr_batch(X), y


def test_round_trip_is_exact_with_repr_values(tmp_path):
    batch, y = random_batch()
    path = tmp_path / "data.svm"
    write_libsvm(path, batch, y)
    parsed, labels = load_libsvm(path, n_features=batch.n_features)
    np.testing.assert_array_equal(parsed.indptr, batch.indptr)
    np.testing.assert_array_equal(parsed.indices, batch.indices)
    assert parsed.values.tobytes() == batch.values.tobytes()     # bit-exact
    np.testing.assert_array_equal(labels, y)


@pytest.mark.parametrize("zero_based", [False, True])
def test_matches_scikit_learn_loader(tmp_path, zero_based):
    batch, y = random_batch(1)
    path = tmp_path / "data.svm"
    dump_svmlight_file(batch.to_scipy(), y, str(path), zero_based=zero_based)
    X_ref, y_ref = load_svmlight_file(str(path), n_features=batch.n_features,
                                      zero_based=zero_based)
    parsed, labels = load_libsvm(path, n_features=batch.n_features, zero_based=zero_based)
    assert (parsed.to_scipy() != X_ref).nnz == 0
    np.testing.assert_array_equal(labels, y_ref)


def test_comments_blank_lines_qid_crlf_unsorted_and_precision():
    text = (b"# header comment\n"
            b"+1 qid:7 5:1.5 2:-2e3 # trailing comment\r\n"
            b"\n"
            b"   \t\n"
            b"-1\n"
            b"0.5 1:0.1 3:1.2345678901234567890 4:1e-320\n")
    batch, labels = parse_libsvm(text)
    assert labels.tolist() == [1.0, -1.0, 0.5]
    assert batch.indptr.tolist() == [0, 2, 2, 5]
    assert batch.indices.tolist() == [1, 4, 0, 2, 3]          # 1-based -> 0-based, sorted
    assert batch.values.tolist() == [-2e3, 1.5, 0.1, float("1.2345678901234567890"),
                                     float("1e-320")]
    assert batch.n_features == 5


def test_zero_based_auto_detection():
    assert parse_libsvm(b"1 0:1 3:2\n", zero_based="auto")[0].indices.tolist() == [0, 3]
    assert parse_libsvm(b"1 1:1 3:2\n", zero_based="auto")[0].indices.tolist() == [0, 2]


@pytest.mark.parametrize("text, line, column, message", [
    (b"1 1:2\n1 2:x\n", 2, 5, "value is not a number"),
    (b"1 1:2\n\n# c\nabc 1:2\n", 4, 1, "label is not a number"),
    (b"1 1:2\n-1 3 4:1\n", 2, 4, "expected 'index:value'"),
    (b"1 -3:2\n", 1, 3, "non-negative integer"),
    (b"1 0:2\n", 1, 3, "feature index 0 in a 1-based file"),
    (b"1 1:2\n1 2:3 2:4\n", 2, 7, "appears twice"),
    (b"1 1:2 99999999999:1\n", 1, 7, "larger than"),
    (b"1 1:nan\n", 1, 5, "not a number"),
    (b"1 1:1e999\n", 1, 5, "not finite"),
    (b"1 1:1\n-1e999 2:1\n", 2, 1, "label is not finite"),
    (b"1 3:1 2:1 3:2\n", 1, 11, "appears twice"),
    (b"1 qid:7 4:1  4:2 # 4:3\n", 1, 14, "appears twice"),
    (b"1 1:1 2:-1e999\n", 1, 9, "not finite"),
    (b"1 1:2x\n", 1, 5, "not a number"),
])
def test_malformed_lines_name_line_and_column(text, line, column, message):
    with pytest.raises(LibsvmFormatError, match=message) as error:
        parse_libsvm(text)
    assert (error.value.line, error.value.column) == (line, column)


def test_index_beyond_n_features_names_its_line():
    with pytest.raises(LibsvmFormatError, match="out of range") as error:
        parse_libsvm(b"1 1:1\n1 7:1\n", n_features=5)
    assert error.value.line == 2


def test_empty_input_and_writer_to_stream():
    batch, labels = parse_libsvm(b"")
    assert batch.n_rows == 0 and len(labels) == 0
    out = io.BytesIO()
    small = CSRBatch.from_arrays([0, 2, 2], [0, 3], [0.5, 2.0], 4)
    write_libsvm(out, small, [1, -1], zero_based=True, precision=3)
    assert out.getvalue() == b"1 0:0.5 3:2\n-1\n"


def test_parallel_chunks_and_streaming_agree_with_one_pass(tmp_path, monkeypatch):
    batch, y = random_batch(2, n=300, d=40)
    path = tmp_path / "data.svm"
    write_libsvm(path, batch, y)
    whole, labels = load_libsvm(path, n_features=40, threads=1)
    monkeypatch.setattr(libsvm, "PARALLEL_MIN_BYTES", 1)
    for threads in (2, 3, 7):
        parsed, parsed_labels = load_libsvm(path, n_features=40, threads=threads)
        assert parsed.values.tobytes() == whole.values.tobytes()
        np.testing.assert_array_equal(parsed.indptr, whole.indptr)
        np.testing.assert_array_equal(parsed_labels, labels)
    streamed = list(iter_libsvm(path, n_features=40, chunk_bytes=1000))
    assert len(streamed) > 5
    assert sum(b.n_rows for b, _ in streamed) == 300
    np.testing.assert_array_equal(np.concatenate([b.values for b, _ in streamed]), whole.values)


def test_parallel_parts_with_colons_that_are_not_features(monkeypatch):
    """qid tokens and comments hold colons that are not features: the parts then leave
    gaps in the shared output, and the join must still give the one-pass result."""
    lines = []
    for k in range(400):
        extra = " qid:3" if k % 7 == 0 else ""
        comment = " # note: a:b" if k % 11 == 0 else ""
        lines.append(f"{1 if k % 2 else -1}{extra} {k % 9 + 1}:{k / 8} 12:{k}{comment}")
    text = ("\n".join(lines) + "\n").encode()
    whole, labels = parse_libsvm(text, n_features=20, threads=1)
    monkeypatch.setattr(libsvm, "PARALLEL_MIN_BYTES", 1)
    for threads in (2, 5):
        parsed, parsed_labels = parse_libsvm(text, n_features=20, threads=threads)
        assert parsed.values.tobytes() == whole.values.tobytes()
        np.testing.assert_array_equal(parsed.indices, whole.indices)
        np.testing.assert_array_equal(parsed.indptr, whole.indptr)
        np.testing.assert_array_equal(parsed_labels, labels)
    assert whole.nnz == 800


def test_line_numbers_are_global_across_chunks(tmp_path, monkeypatch):
    lines = [b"1 1:1 2:2"] * 500 + [b"1 3:oops"] + [b"-1 1:1"] * 100
    path = tmp_path / "bad.svm"
    path.write_bytes(b"\n".join(lines) + b"\n")
    monkeypatch.setattr(libsvm, "PARALLEL_MIN_BYTES", 1)
    with pytest.raises(LibsvmFormatError, match="bad.svm:501:5") as error:
        load_libsvm(path, threads=4)
    assert error.value.line == 501
    with pytest.raises(LibsvmFormatError) as error:
        list(iter_libsvm(path, n_features=5, chunk_bytes=256))
    assert error.value.line == 501
    dup = [b"1 1:1"] * 300 + [b"1 2:1 2:1"]
    path.write_bytes(b"\n".join(dup) + b"\n")
    with pytest.raises(LibsvmFormatError, match="appears twice") as error:
        load_libsvm(path, threads=3)
    assert error.value.line == 301


def test_empty_and_comment_only_files(tmp_path):
    empty = tmp_path / "empty.svm"
    empty.write_bytes(b"")
    batch, labels = load_libsvm(empty, n_features=3)
    assert batch.n_rows == 0 and batch.n_features == 3 and len(labels) == 0
    assert list(iter_libsvm(empty, n_features=3)) == []
    comments = tmp_path / "comments.svm"
    comments.write_bytes(b"# only a comment\n\n")
    assert load_libsvm(comments, n_features=3)[0].n_rows == 0


_DIGITS = "0123456789"


@pytest.mark.parametrize("seed", range(3))
def test_values_are_parsed_like_python_float(seed):
    """Every value token of a random mix of shapes (signs, leading zeros, no integer or
    no fraction part, exponents near the fast path's edges, 15-25 digit mantissas) parses
    to the same double as Python's correctly rounded ``float``."""
    rng = np.random.default_rng(seed)
    tokens = []
    for _ in range(4000):
        sign = rng.choice(["", "-", "+"])
        whole = "".join(rng.choice(list(_DIGITS), size=rng.integers(0, 12)))
        frac = "".join(rng.choice(list(_DIGITS), size=rng.integers(0, 14)))
        if not whole and not frac:
            whole = "7"
        body = whole + ("." + frac if frac or rng.random() < 0.2 else "")
        if rng.random() < 0.3:
            body += rng.choice(["e", "E"]) + rng.choice(["", "-", "+"]) + \
                str(rng.integers(0, 30))
        tokens.append(sign + body)
    text = "".join(f"1 {k + 1}:{t}\n" for k, t in enumerate(tokens)).encode()
    batch, _ = parse_libsvm(text, n_features=len(tokens))
    expected = np.array([float(t) for t in tokens])
    assert batch.values.tobytes() == expected.tobytes()


def test_shortest_repr_values_stay_on_the_exact_path():
    """``repr`` of doubles from 1e-9 to 1e3 (what ``write_libsvm`` writes by default: 16-17
    significant digits, up to 9 leading zeros, exponents to e-09) parses to the same
    doubles with no token left to the slow path: leading zeros are not significant digits.
    Counting them sent 55% of a normalized X1 file to Python's ``float`` (468 rows/s)."""
    rng = np.random.default_rng(5)
    values = rng.choice([-1.0, 1.0], 5000) * rng.uniform(1.0, 10.0, 5000) \
        * 10.0 ** rng.integers(-9, 3, 5000)
    text = "".join(f"1 {k + 1}:{float(v)!r}\n" for k, v in enumerate(values)).encode()
    buf = np.frombuffer(text, dtype=np.uint8)
    indices, numbers = np.empty(len(values), np.int32), np.empty(len(values))
    result = _libsvm_kernels._parse(buf, len(values) + 1, indices, numbers, True)
    rows, code, n_hard = result[2], result[4], result[9]
    assert (rows, code, n_hard) == (len(values), 0, 0)
    assert numbers.tobytes() == values.tobytes()
    batch, _ = parse_libsvm(text, n_features=len(values))
    assert batch.values.tobytes() == values.tobytes()


_LINE = st.tuples(
    st.sampled_from(["1", "-1", "+1", "0.5"]),
    st.booleans(),                                        # a qid token
    st.lists(st.tuples(st.integers(1, 40), st.sampled_from(["0.5", "-2", "1e-3", "3"])),
             max_size=6, unique_by=lambda p: p[0]),
    st.sampled_from(["", " # a:b c:d", "\r"]),            # comment with colons, CRLF
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(_LINE, st.sampled_from(["", "# only: a comment", "   "])),
                max_size=40),
       st.integers(2, 5))
def test_parallel_parse_equals_one_pass_on_any_text(lines, threads):
    """Any mix of lines (qid tokens, comments with colons, blank lines, CRLF, unsorted
    rows) parses in parallel parts, into one shared output or joined, to the one-pass
    result."""
    text_lines = []
    for line in lines:
        if isinstance(line, str):
            text_lines.append(line)
            continue
        label, qid, pairs, tail = line
        tokens = [label] + (["qid:3"] if qid else []) + [f"{i}:{v}" for i, v in pairs]
        text_lines.append(" ".join(tokens) + tail)
    text = ("\n".join(text_lines) + "\n").encode()
    whole, labels = parse_libsvm(text, n_features=41, threads=1)
    saved = libsvm.PARALLEL_MIN_BYTES
    libsvm.PARALLEL_MIN_BYTES = 1
    try:
        parsed, parsed_labels = parse_libsvm(text, n_features=41, threads=threads)
    finally:
        libsvm.PARALLEL_MIN_BYTES = saved
    np.testing.assert_array_equal(parsed.indptr, whole.indptr)
    np.testing.assert_array_equal(parsed.indices, whole.indices)
    assert parsed.values.tobytes() == whole.values.tobytes()
    np.testing.assert_array_equal(parsed_labels, labels)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80), st.integers(0, 7))
def test_byte_counts_match_a_plain_count_at_any_offset(data, offset):
    """Eight bytes at a time (zero_bytes) and the byte-wise tail agree with bytes.count,
    for every length mod 8 and unaligned starts; bytes next to 0x0A / 0x3A (and 0x8A,
    0xBA: equal in the low seven bits) must not be miscounted."""
    from algorithms.sparse._libsvm_kernels import _count_bytes

    padded = np.frombuffer(b"\x8a" * offset + data + b"\xba\n:", dtype=np.uint8)
    view = padded[offset:offset + len(data)]
    assert _count_bytes(view) == (data.count(b"\n"), data.count(b":"))


def test_byte_counts_on_every_byte_value():
    from algorithms.sparse._libsvm_kernels import _count_bytes

    data = bytes(range(256)) * 3 + b"\n\n::"
    buf = np.frombuffer(data, dtype=np.uint8)
    assert _count_bytes(buf) == (data.count(b"\n"), data.count(b":"))


def test_an_out_of_range_index_error_points_at_its_column():
    with pytest.raises(LibsvmFormatError) as caught:
        parse_libsvm(b"1 2:1\n-1 3:1 12:2 4:1\n", n_features=10)
    assert (caught.value.line, caught.value.column) == (2, 8)
    assert "12" in caught.value.reason
